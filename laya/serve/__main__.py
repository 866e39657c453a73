"""`python -m laya.serve`: the same entry point as `laya-serve`."""

from . import main

raise SystemExit(main())
