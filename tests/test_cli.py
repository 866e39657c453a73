"""The `laya` command: demo, presets, JSON output, exit codes."""

import json
import subprocess
import sys

import pytest

from laya.cli import main


def test_demo_prints_a_labelled_table(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "DEMO checkpoint" in out and "not trained" in out
    for qid in ("intent", "is_urgent", "frustration", "refund_requested", "churn_risk"):
        assert f"\n{qid} " in out
    assert "input tokens" in out


def test_preset_json(tiny_checkpoint, capsys):
    assert main(["Please reset my password", "--preset", "email", "--model", tiny_checkpoint, "--json",
                 "--min-confidence", "0.9"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result["answers"]) == ["category", "is_spam", "is_phishing", "urgency", "needs_reply"]
    assert all("abstention" in a for a in result["answers"].values())


def test_batch_jsonl(tiny_checkpoint, tmp_path, capsys):
    lines = tmp_path / "in.txt"
    lines.write_text('first message\n{"message": "second", "id": 2}\n\nthird\n')
    assert main(["--batch", str(lines), "--preset", "triage", "--model", tiny_checkpoint, "--json",
                 "--batch-size", "2", "--sort-by-length"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 3 and all(r["model"] == "laya-rl-agent" for r in out)


def test_questions_file(tiny_checkpoint, tmp_path, capsys):
    qfile = tmp_path / "q.json"
    qfile.write_text(json.dumps({"state_key": "text", "questions": {"ok": {"type": "noul", "instructions": "Fine?"}}}))
    assert main(["all good", "--questions", str(qfile), "--model", tiny_checkpoint]) == 0
    assert "\nok " in capsys.readouterr().out


@pytest.mark.parametrize("argv,code,fragment", [
    (["some text", "--predict"], 2, "no questions"),
    (["x", "--preset", "triage", "--min-confidence", "2"], 2, "min_confidence"),
    (["x", "--preset", "triage", "--model", "./no/such/checkpoint"], 1, "Local model path not found"),
])
def test_exit_codes(argv, code, fragment, capsys):
    assert main(argv) == code
    assert fragment in capsys.readouterr().err


def test_import_is_torch_free_and_console_script_exists():
    probe = "import sys, laya; laya.triage_questions(); print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"
    import laya
    assert laya.__version__ == "0.4.15" and callable(laya.load)
