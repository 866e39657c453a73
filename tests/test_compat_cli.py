"""compat-0.4.15 §11 / §17: the `laya` command against a recording Router (nothing loads)."""

import io
import json

import pytest

import laya
from laya import cli


class FakeRouter:
    def __init__(self, fail=None, diagnostics=True):
        self.calls, self.fail = [], fail
        if not diagnostics:
            self.predict_batch = self._predict_batch_plain

    def _raise(self):
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error

    def route(self, state, **kwargs):
        self.calls.append(("route", state, kwargs))
        self._raise()
        return laya.RouteDecision(model="english", repo="convaiinnovations/laya", reason="explicit",
                                  detection=None, workflow=None)

    def predict(self, state, questions, **kwargs):
        self.calls.append(("predict", state, questions, kwargs))
        self._raise()
        return result()

    def route_batch(self, requests, **kwargs):
        self.calls.append(("route_batch", requests, kwargs))
        return [laya.RouteDecision(model="multilingual", repo="r", reason="why", detection=None, workflow=None)
                for _ in requests]

    def predict_batch(self, requests, batch_size=None, min_confidence=None, sort_by_length=False,
                      diagnostics=None):
        self.calls.append(("predict_batch", requests, dict(batch_size=batch_size, min_confidence=min_confidence,
                                                           sort_by_length=sort_by_length)))
        if diagnostics is not None:
            diagnostics["sort_by_length"] = {"groups": 2, "reordered": 0, "smallest": 1, "largest": 2}
        return [result() for _ in requests]

    def _predict_batch_plain(self, requests, batch_size=None, min_confidence=None, sort_by_length=False):
        self.calls.append(("predict_batch", requests, {}))
        return [result() for _ in requests]


def result():
    return {"model": "laya-rl-agent", "usage": {},
            "routing": {"model": "english", "repo": "r", "reason": "explicit", "detection": None},
            "answers": {"intent": {"type": "choice", "choice": "refund",
                                   "probabilities": {"refund": 0.8734, "other": 0.1266}},
                        "frustration": {"type": "score", "score": 2.3456, "probabilities": {"0": 1.0}},
                        "is_urgent": {"type": "noul", "noul": 0.91234, "low_confidence": True}}}


@pytest.fixture
def router(monkeypatch):
    fake = FakeRouter()
    monkeypatch.setattr(cli, "make_router", lambda args: fake)
    return fake


def test_text_is_several_words_and_routing_passes_the_four_controls(router, capsys):
    assert cli.main(["hello", "there", "my", "friend "]) == 0
    assert router.calls == [("route", {"text": "hello there my friend"},
                             {"model": None, "task": None, "lang": None, "lang_guess": None})]
    out = capsys.readouterr().out
    assert out == "Model     : english\nReason    : explicit\n"
    assert cli.main(["x", "--explain", "--model", "ML", "--lang-guess", "de"]) == 0
    assert router.calls[-1][2] == {"model": "multilingual", "task": None, "lang": None, "lang_guess": "de",
                                   "explain": True}
    assert cli.main(["x", "--model", "AUTO", "--json"]) == 0
    assert router.calls[-1][2]["model"] is None
    assert json.loads(capsys.readouterr().out.split("\n", 2)[-1] or "{}") is not None


def test_predict_alone_answers_the_router_questions(router, capsys):
    assert cli.main(["route", "me", "--predict"]) == 0
    kind, state, questions, kwargs = router.calls[-1]
    assert kind == "predict" and state == {"request": "route me"} and questions == laya.router_questions()
    assert kwargs == {"model": None, "task": None, "lang": None, "lang_guess": None}
    out = capsys.readouterr().out.splitlines()
    assert out == ["Model     : english", "Reason    : explicit", "", "intent      : refund (p=0.873)",
                   "frustration : 2.35", "is_urgent   : 0.912  [low-confidence]"]
    assert cli.main(["x", "--preset", "guard", "--max-len", "64", "--min-confidence", "0"]) == 0
    _, state, _, kwargs = router.calls[-1]
    assert state == {"prompt": "x"} and kwargs["max_len"] == 64 and kwargs["min_confidence"] == 0.0
    assert "head_max_len" not in kwargs
    for preset, key in cli.PRESET_STATE_KEYS.items():
        assert cli.main(["x", "--preset", preset, "--json"]) == 0
        assert router.calls[-1][1] == {key: "x"}
    assert cli.PRESET_STATE_KEYS == {"email": "body", "guard": "prompt", "moderation": "post", "router": "request",
                                     "triage": "message"}


@pytest.mark.parametrize("argv,message", [
    (["x", "--predict", "--explain"], "laya: --explain is for routing only; omit --predict, --preset and --questions."),
    (["x", "--preset", "triage", "--explain"],
     "laya: --explain is for routing only; omit --predict, --preset and --questions."),
    (["x", "--min-confidence", "0"], "laya: --min-confidence gates answers, so it needs --predict, --preset or "
                                     "--questions."),
    (["x", "--batch", "f.txt"], "laya: pass either a text or --batch FILE, not both."),
    (["x", "--questions", "q.json", "--preset", "triage"],
     "laya: --questions and --preset choose different question sets; pass one"),
])
def test_refusals_exit_2_before_anything_loads(argv, message, monkeypatch, capsys):
    monkeypatch.setattr(cli, "make_router", lambda args: pytest.fail("must not build a router"))
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == message


def test_batch_file_refusals(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "make_router", lambda args: pytest.fail("must not build a router"))
    missing = tmp_path / "none.txt"
    assert cli.main(["--batch", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"laya: could not read {missing} (") and err.strip().endswith(").")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n")
    assert cli.main(["--batch", str(blank)]) == 2
    assert capsys.readouterr().err.strip() == f"laya: no requests found in {blank}."


@pytest.mark.parametrize("content,message", [
    ([1], "--questions file must be a JSON object of question id -> definition"),
    ({"questions": [1]}, "the 'questions' field of the --questions file must be an object"),
    ({"questions": {"q": {}}, "state_key": 3}, "'state_key' must be a non-empty string, got 3"),
    ({}, "--questions file holds no questions"),
    ({"questions": {}}, "--questions file holds no questions"),
    ({"q": []}, "question 'q' must map to an object, got list"),
])
def test_questions_file_errors(content, message, tmp_path, router, capsys):
    path = tmp_path / "q.json"
    path.write_text(json.dumps(content))
    assert cli.main(["x", "--questions", str(path)]) == 2
    assert capsys.readouterr().err.strip() == f"laya: {message}"
    assert cli.main(["x", "--questions", str(tmp_path / "nope.json")]) == 2
    assert capsys.readouterr().err.strip() == f"laya: no such --questions file: {tmp_path / 'nope.json'}"


def test_questions_file_forms(tmp_path):
    q = {"ok": {"type": "noul", "instructions": "Fine?"}}
    path = tmp_path / "q.json"
    for content, expected in (
            (q, (q, "request")),
            ({"questions": q}, (q, "request")),
            ({"questions": q, "state_key": "body"}, (q, "body")),
            # a question named 'questions' (its definition's values are not all objects)
            ({"questions": {"type": "noul", "instructions": "Is it?"}},
             ({"questions": {"type": "noul", "instructions": "Is it?"}}, "request"))):
        path.write_text(json.dumps(content))
        assert cli.load_questions(str(path)) == expected


def test_library_errors_and_load_failures_exit_2(monkeypatch, capsys):
    for error, first in ((ValueError("bad lang"), "laya: bad lang"),
                         (RuntimeError("offline"), "laya: could not run Laya (offline)."),
                         (OSError("no hub"), "laya: could not run Laya (no hub)."),
                         (ImportError("no torch"), "laya: could not run Laya (no torch).")):
        fake = FakeRouter(fail=error)
        monkeypatch.setattr(cli, "make_router", lambda args: fake)
        assert cli.main(["x", "--predict"]) == 2
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert lines[0] == first and captured.out == ""
        if first != "laya: bad lang":
            assert len(lines) == 2 and "Hub" in lines[1]


def test_interactive_session_continues_after_a_failure(monkeypatch, capsys):
    fake = FakeRouter(fail=ValueError("first fails"))
    monkeypatch.setattr(cli, "make_router", lambda args: fake)
    monkeypatch.setattr("sys.stdin", io.StringIO("one\ntwo\nquit\nthree\n"))
    assert cli.main([]) == 2  # a failed line makes the session's exit code 2
    assert [c[1] for c in fake.calls] == [{"text": "one"}, {"text": "two"}]
    captured = capsys.readouterr()
    assert captured.out.startswith("laya> ") and "laya: first fails" in captured.err
    monkeypatch.setattr("sys.stdin", io.StringIO("one\n\ntwo\n"))
    fake.calls.clear()
    assert cli.main([]) == 0 and len(fake.calls) == 1  # an empty line ends it
    monkeypatch.setattr("sys.stdin", io.StringIO("one\n"))
    assert cli.main([]) == 0  # and EOF


def test_batch_routing_is_one_call(router, tmp_path, capsys):
    path = tmp_path / "in.txt"
    long = "x" * 49
    path.write_text(f" first \n\n{long}\n" + "y" * 48 + "\n")
    assert cli.main(["--batch", str(path), "--task", "typed"]) == 0
    (kind, requests, kwargs), = router.calls
    assert kind == "route_batch" and kwargs == {}
    assert requests[0] == {"state": {"text": "first"}, "questions": {}, "model": None, "task": "typed", "lang": None,
                           "lang_guess": None}
    assert capsys.readouterr().out.splitlines() == [
        "multilingual   why  <- first", f"multilingual   why  <- {'x' * 45}...", f"multilingual   why  <- {'y' * 48}"]
    assert cli.main(["--batch", str(path), "--json"]) == 0
    assert [json.loads(line)["model"] for line in capsys.readouterr().out.splitlines()] == ["multilingual"] * 3
    assert cli.main(["--batch", str(path), "--explain"]) == 0
    assert router.calls[-1][2] == {"explain": True}
    assert capsys.readouterr().out.count("Model     : multilingual") == 3


def test_batch_answers_and_sort_notes(router, tmp_path, capsys):
    path = tmp_path / "in.txt"
    path.write_text("a\n" + "b" * 80 + "\nc\n")
    assert cli.main(["--batch", str(path), "--preset", "triage", "--batch-size", "4", "--max-len", "99",
                     "--sort-by-length", "--min-confidence", "1"]) == 0
    kind, requests, kwargs = router.calls[-1]
    assert kwargs == {"batch_size": 4, "min_confidence": 1.0, "sort_by_length": True}
    assert requests[1]["state"] == {"message": "b" * 80} and requests[1]["max_len"] == 99
    assert requests[1]["lang_guess"] is None and "head_max_len" not in requests[1]
    captured = capsys.readouterr()
    assert captured.out.startswith("# a\nModel     : english\n")
    assert f"# {'b' * 69}...\n" in captured.out
    assert captured.err.startswith("note: --sort-by-length groups within each checkpoint batch, not across the "
                                   "file:")
    assert "2 of 2" in captured.err
    assert cli.main(["--batch", str(path), "--preset", "triage", "--json"]) == 0
    assert router.calls[-1][2] == {"batch_size": None, "min_confidence": None, "sort_by_length": False}
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_sort_note_without_diagnostics(monkeypatch, tmp_path, capsys):
    fake = FakeRouter(diagnostics=False)
    monkeypatch.setattr(cli, "make_router", lambda args: fake)
    path = tmp_path / "in.txt"
    path.write_text("a\nb\nc\n")
    assert cli.main(["--batch", str(path), "--predict", "--sort-by-length", "--batch-size", "3"]) == 0
    assert capsys.readouterr().err.startswith(
        "note: --sort-by-length only takes effect with --batch-size N where 1 < N < 3")
    assert cli.main(["--batch", str(path), "--predict", "--sort-by-length", "--batch-size", "2"]) == 0
    assert capsys.readouterr().err == ""
    one = {"sort_by_length": {"groups": 1, "reordered": 0, "smallest": 1, "largest": 1}}
    assert cli.sort_note(2, 5, one).startswith(
        "note: --sort-by-length only takes effect with --batch-size N where 1 < N < 1")


def test_sort_note_reads_the_routers_published_report():
    """R-CLI-8 over R-RT-19: the Router writes diagnostics["sort_by_length"] = {groups, reordered, ...}."""
    report = {"sort_by_length": {"groups": 3, "reordered": 1, "smallest": 2, "largest": 6}}
    note = cli.sort_note(4, 10, report)
    assert note.startswith("note: --sort-by-length groups within each checkpoint batch, not across the file:")
    assert "2 of 3" in note and "2-6" in note and "10 lines" in note
    assert cli.sort_note(4, 10, {"sort_by_length": {"groups": 2, "reordered": 2, "smallest": 5, "largest": 5}}) is None
    assert cli.sort_note(4, 10, {}) is None  # the router ran nothing to reorder
    assert cli.sort_note(8, 3, None).startswith(
        "note: --sort-by-length only takes effect with --batch-size N where 1 < N < 3")


def test_argument_types():
    import argparse

    assert cli.model_name(" Multi ") == "multilingual" and cli.model_name("auto") is None
    with pytest.raises(argparse.ArgumentTypeError) as e:
        cli.model_name("klingon")
    for word in ("english", "multilingual", "typed-decisions", "ml", "'auto'"):
        assert word in str(e.value)
    assert cli.min_confidence_value("0") == 0.0 and cli.min_confidence_value("1") == 1.0
    for bad in ("inf", "1.5", "nan", "abc"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli.min_confidence_value(bad)
    args = cli.build_parser().parse_args(["a", "b", "--max-len", "9", "--min-confidence", "0.0"])
    assert args.text == ["a", "b"]
    assert cli.budget_overrides(args) == {"max_len": 9} and cli.abstention_override(args) == {"min_confidence": 0.0}
    assert cli.resolve_questions(cli.build_parser().parse_args(["--predict"])) == (laya.router_questions(), "request")


def test_make_router_is_the_construction_point(monkeypatch):
    seen = {}

    class Recorder:
        def __init__(self, **kwargs):
            seen.update(kwargs)
    monkeypatch.setattr(laya, "Router", Recorder)
    cli.make_router(cli.build_parser().parse_args(["x", "--device", "cpu"]))
    assert seen == {"device": "cpu", "preload": False}


def test_train_and_eval_subcommands(monkeypatch, capsys):
    import laya.train_cli

    with pytest.raises(SystemExit) as e:
        cli.main(["train", "--help"])
    assert e.value.code == 0 and "laya-train" in capsys.readouterr().out
    assert callable(laya.train_cli.main)
    seen = []
    monkeypatch.setattr(cli, "evals_main", lambda: (lambda argv: seen.append(argv) or 0))
    assert cli.main(["eval", "validate", "x.jsonl"]) == 0 and seen == [["validate", "x.jsonl"]]
    assert cli.main(["train", "--data", "missing.jsonl", "--dry-run"]) == 2


def test_read_batch_lines_reads_utf8_from_stdin_whatever_the_locale(tmp_path, monkeypatch):
    # R-CLI-10: '-' = stdin, UTF-8, stripped non-blank lines
    import os
    import subprocess
    import sys

    code = "import laya.cli as c; print(ascii(c.read_batch_lines('-')))"
    env = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    out = subprocess.run([sys.executable, "-c", code], input="  Olá señor \n\n  \nпривет\n".encode("utf-8"),
                         capture_output=True, env=env, check=True).stdout.decode()
    assert out.strip() == ascii(["Olá señor", "привет"])
    form_feed = subprocess.run([sys.executable, "-c", code], input="a\u2028b\x0cc\nd\n".encode("utf-8"),
                               capture_output=True, check=True).stdout.decode()
    assert form_feed.strip() == ascii(["a\u2028b\x0cc", "d"])  # split at newlines only, as a file is
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\n\n b \n"))  # a replaced stdin without bytes
    assert cli.read_batch_lines("-") == ["a", "b"]
    path = tmp_path / "lines.txt"
    path.write_text(" x \n\ny\n", encoding="utf-8")
    assert cli.read_batch_lines(str(path)) == ["x", "y"]


def test_a_question_file_nested_too_deep_is_a_clear_error(tmp_path):
    from laya.cli_questions import load_questions

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000)
    with pytest.raises(ValueError, match=f"^could not read --questions file {deep}"):
        load_questions(str(deep))
