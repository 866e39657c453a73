"""`laya.evals_shortlist.evaluate_shortlist`: evals of shortlisted choice questions (laya/evals/narrowed.py)."""

from .evals.narrowed import SHORTLIST_SCHEMA, evaluate_shortlist

__all__ = ["SHORTLIST_SCHEMA", "evaluate_shortlist"]
