"""Evaluating laya on labelled data (numpy only at import time; torch comes with whoever loads an agent).

    from laya.evals import Dataset, evaluate
    report = evaluate(laya.Router(), Dataset.from_jsonl("gold.jsonl"), batch_size=32)
    print(report.to_markdown())

- Data: `Example`, `Dataset` (`from_jsonl`), `EvalError`; fingerprints `questions_fingerprint`,
  `file_fingerprint`, `REPORT_SCHEMA`.
- Scoring: `Evaluator`, `ChoiceAccuracy`, `NoulAccuracy`, `ScoreMAE`, `ScoreWithin`, `MeanConfidence`,
  `default_evaluators`; metrics `ece`, `brier`, `aurc`, `selective_accuracy`.
- Running: `evaluate(runner, dataset, ...) -> EvalReport` (`to_json`, `to_markdown`, `comparable_to`,
  `compare`), `assert_regression`.
- Agreement of a student with a repeated teacher: `compare_agreement`, `evaluate_agreement`.
- Checkpoint helpers of `laya-evals --data` (ours): `EvalItem`, `load_eval_items`, `answer_items`,
  `metrics`, `agreement`, `judge_gates`.
"""

from __future__ import annotations

from .agreement_runs import AGREEMENT_REPORT_SCHEMA, AGREEMENT_RUN_SCHEMA, compare_agreement, evaluate_agreement
from .dataset import Dataset, EvalError, Example, file_fingerprint, questions_fingerprint
from .evaluators import (ChoiceAccuracy, Evaluator, MeanConfidence, NoulAccuracy, ScoreMAE, ScoreWithin,
                         default_evaluators)
from .items import (GATE_POLICIES, TYPES, EvalItem, agreement, answer_items, finite_fraction, is_hit, judge_gates,
                    load_eval_items, metrics, probs_from_answer)
from .loop import evaluate
from .report import REPORT_SCHEMA, EvalReport, assert_regression
from .selective import aurc, brier, ece, selective_accuracy

__all__ = ["AGREEMENT_REPORT_SCHEMA", "AGREEMENT_RUN_SCHEMA", "ChoiceAccuracy", "Dataset", "EvalError", "EvalItem",
           "EvalReport", "Evaluator", "Example", "GATE_POLICIES", "MeanConfidence", "NoulAccuracy", "REPORT_SCHEMA",
           "ScoreMAE", "ScoreWithin", "TYPES", "agreement", "answer_items", "assert_regression", "aurc", "brier",
           "compare_agreement", "default_evaluators", "ece", "evaluate", "evaluate_agreement", "file_fingerprint",
           "finite_fraction", "is_hit", "judge_gates", "load_eval_items", "metrics", "probs_from_answer",
           "questions_fingerprint", "selective_accuracy"]
