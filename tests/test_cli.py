"""The `laya` command: demo, presets, JSON output, exit codes."""

import json
import os
import subprocess
import sys

import pytest

from laya.cli import main


def test_demo_prints_a_labelled_table(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "laya-mini checkpoint" in out and "model card" in out
    # laya-mini really decides: the sample asks for a refund of a double charge
    assert "refund (p=" in next(line for line in out.splitlines() if line.startswith("intent "))
    for qid in ("intent", "is_urgent", "frustration", "refund_requested", "churn_risk"):
        assert f"\n{qid:<12}: " in out
    assert "Model     : custom" in out


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
    (["some text", "--predict", "--explain"], 2, "--explain is for routing only"),
    (["x", "--preset", "triage", "--aoti-path", "d.pt2"], 2, "--aoti-path 'd.pt2' needs --backend aoti"),
    (["x", "--preset", "triage", "--backend", "eager", "--onnx-path", "m.onnx"], 2,
     "--onnx-path 'm.onnx' needs --backend onnx (got --backend 'eager')"),
])
def test_exit_codes(argv, code, fragment, capsys):
    assert main(argv) == code
    assert fragment in capsys.readouterr().err


def test_bad_arguments_are_argparse_errors(capsys):
    for argv in (["x", "--preset", "triage", "--min-confidence", "2"], ["x", "--model", "./no/such/checkpoint"],
                 ["text", "--model", "englsh"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2


def test_load_failure_exits_2(tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "rl_agent_config.json").write_text("{}")
    assert main(["x", "--preset", "triage", "--model", str(broken)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("laya: Incompatible model") and captured.out == ""


def test_import_is_torch_free_and_console_script_exists():
    probe = "import sys, laya; laya.triage_questions(); print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"
    import laya
    assert laya.__version__ == "0.4.15" and callable(laya.load)


# ---- routing-only default mode, flags, subprocess end-to-end ------------------------------------

def run_cli(*argv, stdin=None):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "laya.cli", *argv], input=stdin, capture_output=True, text=True,
                          env=env, timeout=300)


def test_routing_only_is_the_default(capsys):
    assert main(["Necesito ayuda con mi factura", "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["model"] == "multilingual" and decision["repo"] == "convaiinnovations/laya/multilingual"
    assert main(["I was charged twice for my order"]) == 0
    out = capsys.readouterr().out
    assert "Model     : english" in out and "Reason    : " in out


def test_explain_lang_guess_task_and_model_flags(capsys):
    assert main(["Necesito ayuda con mi factura", "--explain"]) == 0
    out = capsys.readouterr().out
    assert '"reason": "language_evidence"' in out and '"language": "es"' in out
    for argv, model in ((["Hello", "--lang-guess", "en"], "english"), (["Hello", "--task", "typed"], "typed-decisions"),
                        (["Hello", "--model", "ML"], "multilingual"), (["Hello", "--model", "auto"], "multilingual"),
                        (["hola amigo", "--lang", "en_US.UTF-8"], "english")):
        assert main([*argv, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["model"] == model, argv


@pytest.mark.parametrize("argv,fragment", [
    (["text", "--min-confidence", "0.5"], "needs --predict, --preset or --questions"),
    (["text", "--lang", "12"], "not a language code"),
])
def test_routing_mode_usage_errors(argv, fragment, capsys):
    assert main(argv) == 2
    assert fragment in capsys.readouterr().err


def test_low_confidence_marker_and_routing_line(tiny_checkpoint, capsys):
    assert main(["all good here", "--preset", "moderation", "--model", tiny_checkpoint,
                 "--min-confidence", "1.0"]) == 0
    out = capsys.readouterr().out
    assert "Model     : custom" in out and "Reason    : explicit model" in out
    assert out.count("[low-confidence]") == 5


def test_end_to_end_subprocess_json(tiny_checkpoint):
    proc = run_cli("I was charged twice for my invoice", "--preset", "triage", "--model", tiny_checkpoint, "--json",
                   "--backend", "eager", "--device", "cpu", "--max-len", "128")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert list(result["answers"]) == ["intent", "is_urgent", "frustration", "refund_requested", "churn_risk"]
    assert result["routing"]["model"] == "custom" and result["routing"]["repo"] == tiny_checkpoint
    assert result["usage"]["input_tokens"] > 0
    assert result["routing"]["detection"] is None  # an explicit model skips detection


def test_subprocess_usage_exit_codes():
    assert run_cli("x", "--predict", "--explain").returncode == 2
    assert run_cli("x", "--preset", "nope").returncode == 2  # argparse usage error


def test_batch_progress_bar_and_order(tmp_path, capsys):
    texts = ["I was charged twice for my order", "Necesito ayuda con mi factura", "请帮我退款"] * 101
    path = tmp_path / "many.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    assert main(["--batch", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    models = [json.loads(line)["model"] for line in captured.out.splitlines()]
    assert models == ["english", "multilingual", "multilingual"] * 101
    assert captured.err == ""


def test_interactive_mode_reads_stdin_lines():
    # an empty line ends the session, like quit/exit and EOF (compat R-CLI-6)
    proc = run_cli(stdin="hola amigo, necesito ayuda\nI was charged twice for my order\nquit\nignored\n")
    assert proc.returncode == 0, proc.stderr
    models = [line.split(": ", 1)[1] for line in proc.stdout.replace("laya> ", "\n").splitlines()
              if line.startswith("Model")]
    assert models == ["multilingual", "english"]
    proc = run_cli(stdin="hola amigo\n\nI was charged twice for my order\n")
    assert proc.stdout.count("Model     : ") == 1


def test_exported_graph_paths_reach_laya_load(tiny_checkpoint, tmp_path, capsys):
    missing = tmp_path / "nope.pt2"
    assert main(["x", "--preset", "triage", "--model", tiny_checkpoint, "--backend", "aoti",
                 "--aoti-path", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "AOTInductor package not found" in err and "nope.pt2" in err
