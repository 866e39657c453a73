"""compat-0.4.15 §12 (R-EV-1..9): the published `laya.evals` API, `laya.evidence`, shortlist/tournament
evals and the `laya-evals` validate/run/compare/agreement/evidence commands."""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import pytest

from laya import evals as E
from laya.evals import (ChoiceAccuracy, Dataset, EvalError, EvalReport, Example, MeanConfidence, NoulAccuracy,
                        ScoreMAE, ScoreWithin, aurc, brier, ece, evaluate, selective_accuracy)
from laya.evals_cli import OnnxRunner, RouterRunner, main

INTENT = {"type": "choice", "instructions": "What does the customer want?", "criteria": ["refund", "bug", "other"]}
URGENT = {"type": "noul", "instructions": "Is it urgent?"}
ANGER = {"type": "score", "instructions": "How angry?", "criteria": ["calm", "mild", "angry"]}
QS = {"intent": INTENT, "urgent": URGENT}


def choice(label, conf=0.8):
    return {"type": "choice", "choice": label, "probabilities": {label: conf}, "confidence": conf,
            "answer_confidence": conf}


def noul(p):
    return {"type": "noul", "noul": p, "confidence": max(p, 1 - p)}


class FakeRunner:
    """Answers 'refund' to every intent and p=0.9 to every noul; records its calls."""

    def __init__(self):
        self.calls = []

    def answer(self, questions):
        out = {}
        for qid, q in questions.items():
            out[qid] = choice("refund") if q["type"] == "choice" else noul(0.9) if q["type"] == "noul" else \
                {"type": "score", "score": 1.2, "confidence": 0.5}
        return {"answers": out, "model": "fake"}

    def predict(self, state, questions, model=None, min_confidence=None):
        self.calls.append(("predict", state, model, min_confidence))
        return self.answer(questions)


class BatchRunner(FakeRunner):
    def predict_batch(self, states, questions, model=None, batch_size=None, **kwargs):
        self.calls.append(("batch", list(states), model, batch_size, kwargs))
        return [self.answer(questions) for _ in states]


class RequestRunner(FakeRunner):
    def predict_batch(self, requests, batch_size=None, min_confidence=None):
        self.calls.append(("requests", requests, batch_size, min_confidence))
        return [self.answer(r["questions"]) for r in requests]


class PlainRunner:
    def predict(self, state, questions):
        return FakeRunner().answer(questions)


def examples():
    return [Example("I want my money back", QS, {"intent": "refund", "urgent": True}, tags=["a"], language="en"),
            Example("The app crashes", QS, {"intent": "bug", "urgent": False}, tags=["a", "b"], language="en"),
            Example("Hallo, Rechnung bitte", {"intent": INTENT}, {"intent": "other"}, language="de")]


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.jsonl"
    rows = ["# a comment", ""] + [json.dumps(e.to_dict()) for e in examples()]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


# ---- R-EV-1 data ------------------------------------------------------------------------------------------

def test_dataset_from_jsonl_skips_blank_and_comment_lines(data_file):
    ds = Dataset.from_jsonl(data_file)
    assert len(ds) == 3 and ds[0].tags == ("a",) and ds[2].language == "de" and ds[0].model is None
    assert isinstance(ds[1].tags, tuple) and ds[1].tags == ("a", "b")


@pytest.mark.parametrize("row, message", [
    ([1], "row must be an object, got list"),
    ({"state": "x", "questions": {}}, "row is missing 'expected'"),
    ({"state": "x", "questions": [], "expected": {}}, "row 'questions' must be an object"),
    ({"state": "x", "questions": {"q": URGENT}, "expected": [True]},
     "row 'expected' must be an object keyed by question id"),
    ({"state": "x", "questions": {"q": URGENT}, "expected": {"b": 1, "a": 2}},
     "row 'expected' names unknown question(s): a, b"),
    ({"state": "x", "questions": {"q": URGENT}, "expected": {"q": True}, "tags": "t"}, "row 'tags' must be a list"),
])
def test_example_from_dict_errors(row, message):
    with pytest.raises(EvalError) as e:
        Example.from_dict(row)
    assert str(e.value) == message and isinstance(e.value, ValueError)


def test_dataset_file_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"state": "x"\n', encoding="utf-8")
    with pytest.raises(EvalError, match=rf"^{bad}:1 is not valid JSON: "):
        Dataset.from_jsonl(str(bad))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("# nothing\n\n", encoding="utf-8")
    with pytest.raises(EvalError, match=rf"^{empty} contains no examples$"):
        Dataset.from_jsonl(str(empty))
    with pytest.raises(EvalError, match="cannot be read: "):
        Dataset.from_jsonl(str(tmp_path / "missing.jsonl"))
    where = tmp_path / "where.jsonl"
    where.write_text("\n" + json.dumps({"state": "x", "questions": {}, "expected": {}, "tags": 3}) + "\n")
    with pytest.raises(EvalError, match=rf"^{where}:2 'tags' must be a list$"):
        Dataset.from_jsonl(str(where))


# ---- R-EV-2 evaluators ------------------------------------------------------------------------------------

def test_evaluators():
    assert ChoiceAccuracy().score(choice("a"), "a") == 1.0 and ChoiceAccuracy().score(choice("a"), "b") == 0.0
    assert ChoiceAccuracy().score(choice("a"), True) is None and ChoiceAccuracy().score(noul(0.5), "a") is None
    assert NoulAccuracy().score(noul(0.5), True) == 1.0 and NoulAccuracy().score(noul(0.49), True) == 0.0
    assert NoulAccuracy().score(noul(0.2), False) == 1.0 and NoulAccuracy().score(noul(0.9), "yes") is None
    score = {"type": "score", "score": 1.25, "probabilities": {"0": 0.1, "1": 0.7, "2": 0.2}}
    assert ScoreMAE().score(score, 2) == pytest.approx(0.75) and ScoreMAE().score(score, True) is None
    assert ScoreWithin().name == "score_within_0.1" and ScoreWithin(0.25).name == "score_within_0.25"
    assert ScoreWithin(1).name == "score_within_1"
    assert ScoreWithin(0.3).score(score, 1) == 1.0 and ScoreWithin(0.2).score(score, 1) == 0.0
    mc = MeanConfidence()
    assert mc.name == "mean_confidence" and mc.score({"answer_confidence": 0.6, "confidence": 0.1}, None) == 0.6
    assert mc.score({"type": "choice", "confidence": 0.3, "probabilities": {"a": 0.9}}, None) == 0.3
    assert mc.score({"type": "noul", "noul": 0.2}, None) == pytest.approx(0.8)
    assert mc.score({"type": "choice", "probabilities": {"a": 0.35, "b": 0.65}}, None) == 0.65
    first, second = E.default_evaluators(), E.default_evaluators()
    assert [e.name for e in first] == ["choice_accuracy", "noul_accuracy", "score_mae", "mean_confidence"]
    assert all(a is not b for a, b in zip(first, second)) and isinstance(first[0], E.Evaluator)


# ---- R-EV-3 metrics ---------------------------------------------------------------------------------------

def test_metrics_empty_and_values():
    for fn in (ece, brier, aurc):
        assert fn([], []) is None
    assert selective_accuracy([], [], 0.5) is None
    assert brier([0.8, 0.4], [True, False]) == pytest.approx((0.04 + 0.16) / 2)
    assert ece([0.75], [True]) == pytest.approx(0.25)
    # ties at the cut are accepted together
    conf, correct = [0.9, 0.8, 0.8, 0.1], [True, False, True, False]
    assert selective_accuracy(conf, correct, 0.5) == pytest.approx(2 / 3)
    assert selective_accuracy(conf, correct, 0.25) == 1.0
    assert selective_accuracy(conf, correct, 1.0) == 0.5
    for bad in (0, -0.1, 1.5, float("nan")):
        assert selective_accuracy(conf, correct, bad) is None
    # risk-coverage groups: {0.9}: risk 0; {0.8, 0.8}: 1/3; {0.1}: 2/4 -> 1/4*0 + 2/4*1/3 + 1/4*1/2
    assert aurc(conf, correct) == pytest.approx(0.5 / 3 + 0.125)
    assert aurc([0.5, 0.5], [True, False]) == pytest.approx(0.5)


# ---- R-EV-4 evaluate --------------------------------------------------------------------------------------

def test_evaluate_report_shape():
    report = evaluate(FakeRunner(), Dataset(examples()))
    assert isinstance(report, EvalReport) and len(report.cases) == 5
    case = report.cases[0]
    for key in ("qid", "language", "model", "tags", "expected", "answer", "confidence", "correct", "scores"):
        assert key in case
    assert case["model"] == "fake" and case["correct"] is True and case["scores"]["choice_accuracy"] == 1.0
    assert report.overall["choice_accuracy"] == pytest.approx(1 / 3)
    assert report.overall["noul_accuracy"] == 0.5 and report.overall["score_mae"] is None
    for key in ("mean_confidence", "ece", "brier", "aurc", "selective_accuracy@50", "selective_accuracy@80",
                "latency_p50_ms", "latency_p95_ms", "cost_per_decision_p50_ms", "cost_per_decision_p95_ms"):
        assert key in report.overall
    assert set(report.slices) == {"language", "model", "qid", "tag"}
    assert set(report.slices["language"]) == {"en", "de"} and set(report.slices["tag"]) == {"a", "b"}
    assert report.slices["qid"]["intent"]["choice_accuracy"] == pytest.approx(1 / 3)
    cfg = report.config
    assert cfg["schema"] == E.REPORT_SCHEMA == "laya-evals-report/1" and cfg["coverage_metric_definition"] == 2
    assert len(cfg["questions_sha256"]) == 64 and cfg["laya_version"] and isinstance(cfg["timing"], dict)
    data = json.loads(report.to_json())
    assert set(data) == {"config", "overall", "slices", "cases"}
    md = report.to_markdown()
    assert md.startswith("| metric | value |") and "### by language" in md and "| choice_accuracy | 0.3333 |" in md


def test_evaluate_model_routing_fields():
    class Routed(FakeRunner):
        def predict(self, state, questions, model=None, min_confidence=None):
            return {**self.answer(questions), "routing": {"model": "english"}}

    ex = [Example("a", {"intent": INTENT}, {"intent": "refund"}, model="multilingual"),
          Example("b", {"intent": INTENT}, {"intent": "refund"})]
    report = evaluate(Routed(), ex)
    assert [c["model"] for c in report.cases] == ["multilingual", "english"]


def test_evaluate_argument_checks():
    ds = Dataset(examples())
    with pytest.raises(EvalError, match="on_error"):
        evaluate(FakeRunner(), ds, on_error="ignore")
    with pytest.raises(EvalError, match="min_confidence"):
        evaluate(FakeRunner(), ds, min_confidence=1.5)
    with pytest.raises(EvalError, match="min_confidence"):
        evaluate(PlainRunner(), ds, min_confidence=0.5)
    with pytest.raises(EvalError, match="model"):
        evaluate(PlainRunner(), [Example("s", {"intent": INTENT}, {"intent": "bug"}, model="english")])
    evaluate(PlainRunner(), ds)  # no model, no min_confidence: fine

    class NoGateBatch(FakeRunner):
        def predict_batch(self, states, questions, model=None, batch_size=None):
            return [self.answer(questions) for _ in states]

    evaluate(NoGateBatch(), ds, min_confidence=0.5)  # not batching: predict_batch is not asked
    with pytest.raises(EvalError, match="predict_batch"):
        evaluate(NoGateBatch(), ds, batch_size=4, min_confidence=0.5)


def test_evaluate_batches_consecutive_examples():
    runner = BatchRunner()
    ex = examples() + [Example("x", QS, {"intent": "refund"}, model="english"),
                       Example("y", QS, {"intent": "refund"}, model="english")]
    evaluate(runner, ex, batch_size=2, min_confidence=0.3, sort_by_length=True)
    batches = [c for c in runner.calls if c[0] == "batch"]
    assert [len(c[1]) for c in batches] == [2, 1, 2]  # same questions, then other questions, then a model
    assert batches[0][2] is None and batches[2][2] == "english" and batches[0][3] == 2
    assert batches[0][4] == {"min_confidence": 0.3, "sort_by_length": True}
    runner = RequestRunner()
    evaluate(runner, ex, batch_size=8)
    assert [len(c[1]) for c in runner.calls] == [2, 1, 2]
    assert runner.calls[2][1][0] == {"state": "x", "questions": QS, "model": "english"} and runner.calls[0][3] is None
    runner = FakeRunner()  # no predict_batch: one predict per example, model only when named
    evaluate(runner, ex, batch_size=8, min_confidence=0.2)
    assert len(runner.calls) == 5 and runner.calls[0][2] is None and runner.calls[3][2] == "english"
    assert all(c[3] == 0.2 for c in runner.calls)


def test_evaluate_on_error_skip_and_fail():
    class Flaky(FakeRunner):
        def predict(self, state, questions, model=None):
            if state == "The app crashes":
                raise RuntimeError("boom")
            result = self.answer(questions)
            result["answers"].pop("urgent", None)
            return result

    report = evaluate(Flaky(), examples(), on_error="skip")
    assert {"index": 1, "error": "RuntimeError: boom"} in report.config["errored"]
    assert {"index": 0, "question": "urgent", "error": "missing answer"} in report.config["errored"]
    assert len(report.cases) == 2
    with pytest.raises(RuntimeError, match="boom"):
        evaluate(Flaky(), examples()[1:])
    with pytest.raises(EvalError, match="^runner returned no answer for question 'urgent'$"):
        evaluate(Flaky(), examples()[:1])


def test_compare_and_regression():
    ds = Dataset(examples())
    base = evaluate(FakeRunner(), ds)
    ok, deltas = base.compare(base)
    assert ok and deltas["choice_accuracy"] == {"baseline": base.overall["choice_accuracy"],
                                                "value": base.overall["choice_accuracy"], "diff": 0.0,
                                                "tolerance": 0.0}
    assert not any(m.endswith("_ms") for m in deltas)
    worse = EvalReport.from_dict(json.loads(base.to_json()))
    worse.overall["choice_accuracy"] -= 0.1
    worse.overall["ece"] += 0.05
    ok, deltas = worse.compare(base)
    assert not ok and deltas["choice_accuracy"]["diff"] == pytest.approx(-0.1)
    assert worse.compare(base, {"choice_accuracy": 0.2, "ece": 0.1})[0]
    assert "latency_p50_ms" in worse.compare(base, {"latency_p50_ms": 1e9})[1]
    with pytest.raises(EvalError, match="inf"):
        worse.compare(base, {"choice_accuracy": float("inf")})
    with pytest.raises(AssertionError, match=r"^evaluation regressed: \{"):
        E.assert_regression(worse, base)
    E.assert_regression(base, base)
    other = EvalReport.from_dict(json.loads(base.to_json()))
    other.config["questions_sha256"] = "0" * 64
    ok, reasons = other.comparable_to(base)
    assert not ok and "questions_sha256" in reasons[0]
    ok, deltas = other.compare(base)
    assert not ok and all(d["incomparable"] for d in deltas.values())
    unknown = EvalReport.from_dict(json.loads(base.to_json()))
    del unknown.config["questions_sha256"]
    assert unknown.comparable_to(base) == (True, [])


# ---- R-EV-5 fingerprints ----------------------------------------------------------------------------------

def test_fingerprints(tmp_path, data_file):
    a = E.questions_fingerprint(Dataset([Example("s", {"intent": INTENT, "urgent": URGENT}, {})]))
    b = E.questions_fingerprint(Dataset([Example("t", {"urgent": URGENT}, {}), Example("u", {"intent": INTENT}, {})]))
    c = E.questions_fingerprint(Dataset([Example("s", {"intent": {**INTENT, "instructions": "Other?"}}, {})]))
    assert a == b != c and len(a) == 64
    with open(data_file, "rb") as f:
        assert E.file_fingerprint(data_file) == hashlib.sha256(f.read()).hexdigest()
    with pytest.raises(EvalError):
        E.file_fingerprint(str(tmp_path / "nope"))
    assert evaluate(FakeRunner(), Dataset.from_jsonl(data_file)).config["dataset_sha256"] == E.file_fingerprint(data_file)


# ---- R-EV-6 agreement -------------------------------------------------------------------------------------

def run_doc(run_id, labels, revision="r1"):
    cases = [{"id": i, "state": f"s{i}", "questions": {"intent": INTENT}, "answers": {"intent": label},
              "language": "en", "tags": ["t"]} for i, label in enumerate(labels)]
    return {"schema": "laya-agreement-run/1", "run_id": run_id,
            "provenance": {"revision": revision, "settings": {"temperature": 1}}, "cases": cases}


def test_compare_agreement():
    ref = run_doc("a", ["refund", "bug", "other", "bug"])
    rep = run_doc("b", ["refund", "bug", "bug", "bug"])
    stu = run_doc("s", ["refund", None, "other", "refund"], revision="student")
    out = E.compare_agreement(ref, rep, stu, bootstrap_samples=200, seed=1)
    assert out["schema"] == "laya-agreement-report/1" and out["limitations"]
    o = out["overall"]
    assert (o["n_cases"], o["n_decisions"]) == (4, 4)
    assert o["teacher_repeat_agreement"] == 0.75 and o["student_teacher_agreement"] == 0.5
    assert o["student_coverage"] == 0.75 and o["paired_agreement_delta"] == pytest.approx(-0.25)
    lo, hi = o["paired_delta_ci95"]
    assert lo <= -0.25 <= hi
    assert set(out["slices"]) == {"qid", "language", "tag"} and len(out["cases"]) == 4
    assert out["config"]["bootstrap_samples"] == 200 and out["config"]["run_ids"]["student"] == "s"
    one = E.compare_agreement(run_doc("a", ["bug"]), run_doc("b", ["bug"]), run_doc("s", ["bug"]))
    assert one["overall"]["paired_delta_ci95"] is None


def test_agreement_validation():
    ref, rep, stu = run_doc("a", ["bug"]), run_doc("b", ["bug"]), run_doc("s", ["bug"])
    with pytest.raises(EvalError, match="run_id"):
        E.compare_agreement(ref, run_doc("a", ["bug"]), stu)
    with pytest.raises(EvalError, match="provenance"):
        E.compare_agreement(ref, run_doc("b", ["bug"], revision="r2"), stu)
    for samples in (99, 100001, True):
        with pytest.raises(EvalError, match="bootstrap_samples"):
            E.compare_agreement(ref, rep, stu, bootstrap_samples=samples)
    with pytest.raises(EvalError, match="seed"):
        E.compare_agreement(ref, rep, stu, seed=-1)
    with pytest.raises(EvalError, match="teacher|null|labels"):
        E.compare_agreement(run_doc("a", [None]), rep, stu)


def test_evaluate_agreement():
    ref = run_doc("a", ["refund", "bug"])
    rep = run_doc("b", ["refund", "refund"])
    runner = FakeRunner()
    out = E.evaluate_agreement(runner, ref, rep, student_provenance={"revision": "x", "settings": {}},
                               model="english", bootstrap_samples=100)
    assert out["overall"]["student_teacher_agreement"] == 0.5 and runner.calls[0][2] == "english"
    with pytest.raises(EvalError):
        E.evaluate_agreement(runner, ref, rep, student_provenance="x")


# ---- R-EV-7 shortlist / tournament ------------------------------------------------------------------------

BIG = {"type": "choice", "instructions": "Which team?", "criteria": [f"team{i}" for i in range(6)]}


def fake_embed(texts):
    return np.asarray([[1.0, float(len(t) % 5)] for t in texts], dtype=np.float32)


def test_evaluate_shortlist(agent):
    from laya.evals_shortlist import evaluate_shortlist

    ds = [Example(f"ticket {i}", {"team": BIG}, {"team": f"team{i}"}) for i in range(4)]
    report = evaluate_shortlist(agent, ds, fake_embed, k=2, checkpoint_id="tiny", embedder_id="fake")
    assert report.config["schema"] == "laya-shortlist-evals-report/1"
    block = report.config["shortlist"]
    assert (block["k"], block["checkpoint_id"], block["embedder_id"]) == (2, "tiny", "fake")
    assert sum(block["counts"].values()) == 4
    for case in report.cases:
        kept = case["shortlist"]["kept"]
        want = "correct" if case["correct"] else "retrieval_miss" if case["expected"] not in kept else "decision_miss"
        assert case["shortlist_status"] == want
    recalled = sum(c["shortlist_status"] != "retrieval_miss" for c in report.cases)
    assert report.overall["shortlist_recall_at_k"] == recalled / 4
    for bad in ({"k": 0}, {"checkpoint_id": " "}, {"embedder_id": ""}):
        kwargs = {"k": 2, "checkpoint_id": "tiny", "embedder_id": "fake", **bad}
        with pytest.raises(EvalError):
            evaluate_shortlist(agent, ds, fake_embed, **kwargs)
    with pytest.raises(EvalError, match="callable"):
        evaluate_shortlist(agent, ds, None, checkpoint_id="tiny", embedder_id="fake")
    with pytest.raises(EvalError, match="choice"):
        evaluate_shortlist(agent, [Example("s", {"u": URGENT}, {"u": True})], fake_embed, checkpoint_id="t",
                           embedder_id="f")


def test_evaluate_tournament(agent):
    from laya.evals_tournament import evaluate_tournament

    ds = [Example(f"ticket {i}", {"team": BIG}, {"team": f"team{i}"}) for i in range(4)]
    report = evaluate_tournament(agent, ds, group_size=2, checkpoint_id="tiny")
    assert report.config["schema"] == "laya-tournament-evals-report/1" and report.config["tournament_group_size"] == 2
    for case in report.cases:
        finalists = case["tournament"]["finalists"]
        want = "correct" if case["correct"] else \
            "elimination_miss" if case["expected"] not in finalists else "final_choice_miss"
        assert case["tournament_status"] == want
    survived = sum(c["tournament_status"] != "elimination_miss" for c in report.cases)
    assert report.overall["tournament_survival_rate"] == survived / 4
    assert "tournament_accuracy_on_survivors" in report.overall
    with pytest.raises(EvalError):
        evaluate_tournament(agent, ds, group_size=1, checkpoint_id="tiny")
    with pytest.raises(EvalError):
        evaluate_tournament(agent, ds, checkpoint_id="")
    other = EvalReport.from_dict(json.loads(report.to_json()))
    other.config["tournament_group_size"] = 4
    assert not report.comparable_to(other)[0]


# ---- R-EV-8 evidence --------------------------------------------------------------------------------------

def test_evidence(tmp_path):
    from laya import evidence as ev

    with pytest.raises(FileNotFoundError, match=rf"^no rl_agent_config.json under '{tmp_path}'$"):
        ev.inspect_checkpoint(str(tmp_path))
    (tmp_path / "rl_agent_config.json").write_text("{not json")
    with pytest.raises(ValueError):
        ev.inspect_checkpoint(str(tmp_path))
    (tmp_path / "rl_agent_config.json").write_text(json.dumps({"encoder": "x"}))
    res = ev.inspect_checkpoint(str(tmp_path))
    assert res["checkpoint"] == str(tmp_path) and res["calibration"]["state"] == ev.MISSING
    assert "reason" in res["calibration"] and "report" not in res
    block = {"types": {"choice": {"n": 120}, "noul": {"n": 10}}, "questions_sha256": "ab"}
    (tmp_path / "rl_agent_config.json").write_text(json.dumps({"training": {"laya_train_calibration": block}}))
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"config": {"schema": "laya-evals-report/1", "questions_sha256": "cd"},
                                  "overall": {}}))
    res = ev.inspect_checkpoint(str(tmp_path), str(report))
    assert res["calibration"] == {"state": ev.PRESENT, "types": ["choice"]}
    assert res["report"]["state"] == ev.PRESENT and res["report"]["fields"]["questions_sha256"] == "cd"
    assert res["relationship"]["state"] == ev.INCOMPARABLE and res["relationship"]["reason"]
    summary = ev.format_summary(res)
    assert summary.splitlines()[0] == f"evidence summary for {tmp_path}" and "INCOMPARABLE" in summary
    thin = {"training": {"laya_train_calibration": {"types": {"choice": {"n": 3}}}}}
    (tmp_path / "rl_agent_config.json").write_text(json.dumps(thin))
    assert ev.inspect_checkpoint(str(tmp_path))["calibration"]["state"] == ev.INSUFFICIENT
    assert {ev.PRESENT, ev.MISSING, ev.INSUFFICIENT, ev.UNKNOWN, ev.INCOMPARABLE} == {
        "PRESENT", "MISSING", "INSUFFICIENT", "UNKNOWN", "INCOMPARABLE"}
    assert callable(ev.inspect_calibration) and callable(ev.inspect_report) and callable(ev.relate)


# ---- R-EV-9 CLI -------------------------------------------------------------------------------------------

@pytest.fixture
def fake_cli(monkeypatch):
    import laya.evals_cli

    runner = BatchRunner()
    monkeypatch.setattr(laya.evals_cli, "make_runner", lambda args: runner)
    return runner


def test_cli_validate(data_file, capsys):
    assert main(["validate", data_file]) == 0
    assert capsys.readouterr().out.strip() == "3 examples, 2 question id(s): intent, urgent"


def test_cli_errors_exit_2(tmp_path, data_file, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("[1]\n")
    assert main(["validate", str(bad)]) == 2
    assert capsys.readouterr().err.strip() == f"laya-evals: {bad}:1 must be an object, got list"
    assert main(["run", data_file, "--calibration", "c.json"]) == 2
    assert "--onnx" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "none.json"), "--baseline", str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err.startswith("laya-evals: ")
    assert main(["evidence", "--checkpoint", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"laya-evals: no rl_agent_config.json under '{tmp_path}'"


def test_cli_run_prints_writes_and_gates(fake_cli, data_file, tmp_path, capsys):
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    assert main(["run", data_file, "--batch-size", "2", "--json", str(out_json), "--markdown", str(out_md),
                 "--slice", "language", "--score-within", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "%-18s %.4f" % ("choice_accuracy", 1 / 3) in out and "by language" in out
    report = json.loads(out_json.read_text())
    assert "score_within_0.5" in report["overall"] and out_md.read_text().startswith("| metric | value |")
    assert main(["run", data_file, "--min-accuracy", "0.5"]) == 1
    assert "FAIL: choice_accuracy 0.3333 < --min-accuracy 0.5" in capsys.readouterr().err
    assert main(["run", data_file, "--max", "ece=0", "--min", "noul_accuracy=0.9"]) == 1
    err = capsys.readouterr().err
    assert err.count("FAIL: ") == 2
    assert main(["run", data_file, "--min", "nosuch=1"]) == 1
    assert "nosuch" in capsys.readouterr().err
    assert main(["run", data_file, "--baseline", str(out_json)]) == 0
    capsys.readouterr()
    assert main(["run", data_file, "--min-confidence", "0.4", "--batch-size", "4"]) == 0
    assert fake_cli.calls[-1][4]["min_confidence"] == 0.4


def test_cli_gate_policy(fake_cli, data_file, tmp_path, capsys):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"version": 1, "rules": [
        {"slice": {"language": "en"}, "metric": "choice_accuracy", "min": 0.6},
        {"slice": {"language": "de"}, "metric": "choice_accuracy", "min_count": 5, "min": 0.0},
        {"metric": "noul_accuracy", "max": 1.0},
        {"slice": {"tag": "zzz"}, "metric": "choice_accuracy", "min": 0.0}]}))
    assert main(["run", data_file, "--gate-policy", str(policy)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("FAIL: ")]
    assert len(err) == 3
    relative = tmp_path / "relative.json"
    relative.write_text(json.dumps({"version": 1, "rules": [{"metric": "choice_accuracy", "max_drop": 0.0}]}))
    assert main(["run", data_file, "--gate-policy", str(relative)]) == 2
    assert "--baseline" in capsys.readouterr().err
    two = tmp_path / "two.json"
    two.write_text(json.dumps({"version": 1, "rules": [{"metric": "ece", "min": 0, "max": 1}]}))
    assert main(["run", data_file, "--gate-policy", str(two)]) == 2


def test_cli_compare(fake_cli, data_file, tmp_path, capsys):
    base = tmp_path / "base.json"
    assert main(["run", data_file, "--json", str(base)]) == 0
    capsys.readouterr()
    assert main(["compare", str(base), "--baseline", str(base)]) == 0
    worse = json.loads(base.read_text())
    worse["overall"]["choice_accuracy"] = 0.0
    worse_path = tmp_path / "worse.json"
    worse_path.write_text(json.dumps(worse))
    assert main(["compare", str(worse_path), "--baseline", str(base)]) == 1
    assert "choice_accuracy" in capsys.readouterr().err
    assert main(["compare", str(worse_path), "--baseline", str(base), "--tolerance", "choice_accuracy=0.5"]) == 0
    worse["config"]["dataset_sha256"] = "f" * 64
    worse_path.write_text(json.dumps(worse))
    assert main(["compare", str(worse_path), "--baseline", str(base), "--tolerance", "choice_accuracy=0.5"]) == 1
    assert "dataset_sha256" in capsys.readouterr().err


def test_cli_agreement(tmp_path, capsys):
    paths = []
    for name, doc in (("ref", run_doc("a", ["bug", "refund"])), ("rep", run_doc("b", ["bug", "bug"])),
                      ("stu", run_doc("s", ["bug", None]))):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(doc))
    out = tmp_path / "agreement.json"
    assert main(["agreement", *map(str, paths), "--bootstrap-samples", "100", "--json", str(out)]) == 0
    assert "teacher_repeat_agreement" in capsys.readouterr().out
    assert json.loads(out.read_text())["schema"] == "laya-agreement-report/1"
    paths[0].write_text('{"schema": "laya-agreement-run/1", "schema": "again"}')
    assert main(["agreement", *map(str, paths)]) == 2
    assert "'schema' twice" in capsys.readouterr().err


def test_cli_evidence(tmp_path, capsys):
    (tmp_path / "rl_agent_config.json").write_text("{}")
    assert main(["evidence", "--checkpoint", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"evidence summary for {tmp_path}\ncalibration: MISSING")


def test_runners_forward_min_confidence_only_when_set():
    class Spy:
        def __init__(self):
            self.calls = []
            self.model_id = "english"

        def predict(self, *a, **k):
            self.calls.append((a, k))
            return {"answers": {}}

        def predict_batch(self, *a, **k):
            self.calls.append((a, k))
            return [{"answers": {}}]

    spy = Spy()
    RouterRunner(spy).predict("s", QS)
    RouterRunner(spy).predict("s", QS, model="english", min_confidence=0.5)
    RouterRunner(spy).predict_batch(["s"], QS, model="english", batch_size=4)
    assert spy.calls[0][1] == {"model": None} and spy.calls[1][1] == {"model": "english", "min_confidence": 0.5}
    assert spy.calls[2] == (([{"state": "s", "questions": QS, "model": "english"}],), {"batch_size": 4})
    onnx = OnnxRunner(spy)
    onnx.predict("s", QS, model="en")  # an alias of the same checkpoint
    assert spy.calls[-1][1] == {}
    onnx.predict_batch(["s"], QS, batch_size=2, min_confidence=0.1)
    assert spy.calls[-1][1] == {"batch_size": 2, "min_confidence": 0.1}
    with pytest.raises(EvalError) as e:
        onnx.predict("s", QS, model="multilingual")
    assert str(e.value) == ("the ONNX runner serves only 'english', but this example asks for 'multilingual'; "
                            "run them separately or drop --onnx")


def test_cli_run_through_the_router(tiny_checkpoint, tmp_path, capsys):
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(e.to_dict()) for e in examples()) + "\n")
    out = tmp_path / "r.json"
    assert main(["run", str(path), "--model", tiny_checkpoint, "--device", "cpu", "--batch-size", "4",
                 "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert len(report["cases"]) == 5 and report["config"]["runner"] == "router"
    assert all(c["answer"]["type"] in ("choice", "noul") for c in report["cases"])


def test_evals_stay_torch_free():
    import subprocess

    code = "import sys, laya.evals, laya.evidence, laya.evals_cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


class FakeRouter:
    made: list = []

    def __init__(self, models=None, device=None, revision=None, revisions=None):
        FakeRouter.made.append({"models": models, "device": device, "revision": revision, "revisions": revisions})
        self.calls = []

    def predict(self, state, questions, model=None, min_confidence=None):
        return {**FakeRunner().answer(questions), "routing": {"model": model or "english"}}

    def predict_batch(self, requests, batch_size=None, min_confidence=None, sort_by_length=False):
        return [self.predict(r["state"], r["questions"], r.get("model")) for r in requests]


@pytest.mark.parametrize("where", ["laya.evals_cli", "laya"])
def test_cli_run_builds_a_router_runner(where, monkeypatch, data_file, tmp_path, capsys):
    import importlib

    monkeypatch.setattr(importlib.import_module(where), "Router", FakeRouter)
    FakeRouter.made.clear()
    out = tmp_path / "r.json"
    assert main(["run", data_file, "--device", "cpu", "--revision", "abc", "--revision", "english=def",
                 "--batch-size", "2", "--model", "multilingual", "--json", str(out)]) == 0
    assert FakeRouter.made == [{"models": None, "device": "cpu", "revision": "abc", "revisions": {"english": "def"}}]
    assert {c["model"] for c in json.loads(out.read_text())["cases"]} == {"multilingual"}
    assert main(["run", data_file, "--revision", "a", "--revision", "b"]) == 2
    assert "--revision" in capsys.readouterr().err


def test_cli_bad_flag_values_fail_before_answering(fake_cli, data_file, capsys):
    for flag in (["--min", "accuracy"], ["--max", "ece=x"], ["--tolerance", "ece=inf"]):
        assert main(["run", data_file, *flag]) == 2
        assert capsys.readouterr().err.startswith("laya-evals: ")
    assert fake_cli.calls == []


def test_a_nan_or_infinite_metric_never_passes_a_regression_check():
    from laya.evals.report import regressed

    assert regressed("accuracy", 0.5, float("nan"), 0.0) and regressed("ece", float("inf"), 0.1, 0.0)
    assert not regressed("accuracy", 0.5, 0.6, 0.0) and regressed("accuracy", 0.5, 0.4, 0.0)
