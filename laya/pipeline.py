"""Re-export: the request path lives in laya.predictor (Predictor) and laya.question_sets."""

from .predictor import NO_SCOPE, Predictor  # noqa: F401
from .question_sets import QUESTION_CACHE_SIZE, QuestionSet, _checked, checked_questions, question_set  # noqa: F401
from .sequence import DEFAULT_HEAD_MAX_LEN, DEFAULT_MAX_LEN  # noqa: F401
