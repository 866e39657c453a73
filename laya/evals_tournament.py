"""`laya.evals_tournament.evaluate_tournament`: evals of tournament choice questions (laya/evals/narrowed.py)."""

from .evals.narrowed import TOURNAMENT_SCHEMA, evaluate_tournament

__all__ = ["TOURNAMENT_SCHEMA", "evaluate_tournament"]
