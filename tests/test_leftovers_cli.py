"""Fuzzing leftovers: `laya-evals` checks made up front (run --on-error fail checks states and questions first,
output folders, non-numeric baseline metrics), `laya --max-len` and `laya demo` refusals."""

from __future__ import annotations

import json

import pytest

from laya import cli
from laya.evals.report import EvalReport, metric_number
from laya.evals_cli import main as evals_main

NOUL = {"urgent": {"type": "noul", "instructions": "Does it need a reply today?"}}
def no_forward(*args, **kwargs):
    raise AssertionError("no window may be scored once the window count is refused")


# ---- laya: --max-len and friends, demo ---------------------------------------------------------------------

def test_laya_max_len_below_one_is_the_librarys_error_when_answering(monkeypatch, capsys):
    # R-CLI-6: an answering run reports the library's refusal as "laya: <message>", exit 2
    assert cli.main(["hello", "--model", cli.LAYA_MINI, "--max-len", "-5", "--preset", "triage"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("laya: ") and "max_len" in err and "-5" in err


def test_laya_demo_with_a_broken_checkpoint_prints_no_banner(tmp_path, capsys):
    (tmp_path / "rl_agent_config.json").write_text("{}")
    assert cli.main(["demo", "--model", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("laya: ")


def test_laya_demo_answers_with_the_router_it_loaded(monkeypatch, capsys):
    class Router:
        calls: list = []

        def load(self, name):
            self.calls.append(("load", name))

        def predict(self, state, questions, **kwargs):
            self.calls.append(("predict", state))
            return {"model": "m", "routing": {"model": "custom", "reason": "explicit"}, "answers": {}}

    fake = Router()
    monkeypatch.setattr(cli, "make_router", lambda args: fake)
    assert cli.main(["demo"]) == 0
    assert fake.calls == [("load", cli.CUSTOM_MODEL), ("predict", {"message": cli.DEMO_TEXT})]
    assert capsys.readouterr().out.startswith("laya demo: ")


# ---- laya-evals: run --on-error fail checks up front ----------------------------------------------------------

def write_rows(path, *rows) -> str:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return str(path)


GOOD = {"state": "I want my money back", "questions": NOUL, "expected": {"urgent": True}}


@pytest.fixture
def no_runner(monkeypatch):
    import laya.evals_cli

    monkeypatch.setattr(laya.evals_cli, "make_runner", no_forward)


@pytest.mark.parametrize("row, needle", [
    ({**GOOD, "state": 5}, "state must be a str, dict or list, not int"),
    ({**GOOD, "questions": {"urgent": {"type": "nope", "instructions": "?"}}}, "question 'urgent': unknown type")])
def test_run_refuses_up_front_what_the_library_refuses(row, needle, tmp_path, no_runner, capsys):
    # --on-error fail stops before answering with the example named; validate keeps to R-EV-1's checks (exit 0)
    data = write_rows(tmp_path / "d.jsonl", GOOD, row)
    assert evals_main(["run", data]) == 2
    assert capsys.readouterr().err.strip().startswith(f"laya-evals: {data}: example 1 (counted from 0): {needle}")
    assert evals_main(["validate", data]) == 0


def test_run_with_on_error_skip_does_not_refuse_a_bad_example_up_front(tmp_path, monkeypatch):
    # R-EV-4: skip mode records a failing example as errored and goes on
    import laya.evals_cli

    seen = []

    class Runner:
        def predict(self, state, questions, model=None, min_confidence=None):
            seen.append(state)
            if not isinstance(state, str):
                raise TypeError("state must be a str, dict or list, not int")
            return {"answers": {"urgent": {"answer": True, "probabilities": {"true": 0.9, "false": 0.1},
                                           "confidence": 0.9}}}

    monkeypatch.setattr(laya.evals_cli, "make_runner", lambda args: Runner())
    data = write_rows(tmp_path / "d.jsonl", GOOD, {**GOOD, "state": 5})
    assert evals_main(["run", data, "--on-error", "skip"]) == 0
    assert 5 in seen

@pytest.mark.parametrize("flag", ["--json", "--markdown"])
def test_run_checks_its_output_folder_before_answering(flag, tmp_path, no_runner, capsys):
    data = write_rows(tmp_path / "d.jsonl", GOOD)
    target = tmp_path / "missing" / "report.out"
    assert evals_main(["run", data, flag, str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"laya-evals: {flag} {target}: the folder {target.parent} does not exist")
    assert evals_main(["run", data, flag, str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_agreement_and_evidence_check_their_output_before_working(tmp_path, capsys):
    target = tmp_path / "missing" / "out.json"
    missing = str(tmp_path / "none.json")
    assert evals_main(["agreement", missing, missing, missing, "--json", str(target)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert evals_main(["evidence", "--model", "nowhere", "--data", missing, "--out", str(target)]) == 2
    assert capsys.readouterr().err.startswith(f"laya-evals evidence: error: --out {target}: the folder")


# ---- non-numeric metrics in a baseline comparison ---------------------------------------------------------

def report_file(path, **overall) -> str:
    doc = {"config": {"schema": "laya-evals-report/1"}, "overall": {"ece": 0.1, **overall}, "slices": {},
           "cases": []}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("bad", ["high", True, [1]])
def test_a_non_numeric_baseline_metric_is_named(bad, tmp_path, no_runner, capsys):
    report = report_file(tmp_path / "r.json", choice_accuracy=0.8)
    base = report_file(tmp_path / "b.json", choice_accuracy=bad)
    assert evals_main(["compare", report, "--baseline", base]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (f"laya-evals: the baseline's metric 'choice_accuracy' is {bad!r}, not a number; "
                                    "fix or regenerate that report")
    data = write_rows(tmp_path / "d.jsonl", GOOD)
    assert evals_main(["run", data, "--baseline", base]) == 2  # refused before the runner is built
    assert "'choice_accuracy' is" in capsys.readouterr().err


def test_metric_number_and_the_gate_policy_name_the_bad_value():
    from laya.evals.dataset import EvalError
    from laya.evals.gate_policy import apply_policy

    assert metric_number(1, "'m'", "report") == 1.0 and metric_number(None, "'m'", "report") is None
    good = EvalReport({}, {"choice_accuracy": 0.8})
    bad = EvalReport({}, {"choice_accuracy": "0.9"})
    rule = {"slice": {}, "metric": "choice_accuracy", "min_count": 0, "limit": "max_drop", "value": 0.1}
    with pytest.raises(EvalError, match=r"the baseline's metric choice_accuracy \[overall\] is '0.9', not a number"):
        apply_policy([rule], good, bad)
    with pytest.raises(EvalError, match=r"the report's metric 'choice_accuracy' is '0.9', not a number"):
        bad.compare(good)


@pytest.mark.parametrize("report", [
    {"overall": {}, "cases": 5}, {"overall": {}, "config": [1]}, {"overall": {}, "slices": [1]},
    {"overall": {}, "slices": {"language": [1]}}, {"overall": {}, "cases": [1.5]}])
def test_compare_names_a_malformed_report_instead_of_a_traceback(report, tmp_path, capsys):
    ok, bad = tmp_path / "ok.json", tmp_path / "bad.json"
    ok.write_text(json.dumps({"config": {}, "overall": {"ece": 0.1}, "slices": {}, "cases": []}))
    bad.write_text(json.dumps(report))
    assert evals_main(["compare", str(ok), "--baseline", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"laya-evals: {bad}: an eval report must be an object with")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert evals_main(["compare", str(ok), "--baseline", str(deep)]) == 2
    assert f"{deep} is not valid JSON" in capsys.readouterr().err


def test_a_gate_policy_limit_too_big_for_a_float_is_named(tmp_path, capsys):
    ok, policy = tmp_path / "ok.json", tmp_path / "policy.json"
    ok.write_text(json.dumps({"config": {}, "overall": {"ece": 0.1}, "slices": {}, "cases": []}))
    policy.write_text('{"version": 1, "rules": [{"metric": "ece", "max": 1' + "0" * 400 + '}]}')
    assert evals_main(["compare", str(ok), "--baseline", str(ok), "--gate-policy", str(policy)]) == 2
    assert "gate policy rule 0 'max' must be a finite number" in capsys.readouterr().err


def test_compare_names_a_slice_row_that_is_not_an_object(tmp_path, capsys):
    ok, bad = tmp_path / "ok.json", tmp_path / "bad.json"
    ok.write_text(json.dumps({"config": {}, "overall": {"ece": 0.1}, "slices": {}, "cases": []}))
    bad.write_text(json.dumps({"overall": {}, "slices": {"qid": {"a": 1}}}))
    assert evals_main(["compare", str(ok), "--baseline", str(bad)]) == 2
    assert "an eval report must be an object with" in capsys.readouterr().err
    bad.write_text(json.dumps({"overall": {}, "config": 0}))  # a falsy part of the wrong type is refused too
    assert evals_main(["compare", str(ok), "--baseline", str(bad)]) == 2


@pytest.mark.parametrize("argv", [["run", "data.jsonl", "--batch-size", "0"],
                                  ["run", "--model", "m", "--data", "data.jsonl", "--batch-size", "x"]])
def test_evals_positive_int_flags_name_the_flag(argv, capsys):
    # both `run` forms (published and checkpoint) share one parser, whose error names the flag
    with pytest.raises(SystemExit) as e:
        evals_main(argv)
    assert e.value.code == 2
    assert f"--batch-size must be a positive integer, got {argv[-1]!r}" in capsys.readouterr().err
