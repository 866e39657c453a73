"""`laya-evals` (laya.evals_cli) on the tiny checkpoint: run metrics and gates with their exit statuses,
compare, agreement of a model with itself, evidence records, usage errors; the shared metric helpers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from laya import evals
from laya.evals_cli import main

INTENT = {"type": "choice", "instructions": "What does the customer want?",
          "criteria": {"refund": "money back", "bug": "something broken", "other": None}}
ANGER = {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "mild", "annoyed"]}
URGENT = {"type": "noul", "instructions": "Is it urgent?"}
ROWS = [
    {"state": "I want my money back for order 1234.", "questions": {"intent": INTENT}, "expected": {"intent": "refund"}},
    {"state": "The app crashes on login", "questions": {"intent": INTENT, "urgent": URGENT},
     "gold": {"intent": {"probabilities": {"bug": 1}}, "urgent": {"probabilities": {"true": 0.8, "false": 0.2}}}},
    {"state": {"message": "Thanks, all good now.", "tier": "gold"}, "questions": {"anger": ANGER, "urgent": URGENT},
     "expected": {"anger": 0, "urgent": False}},
    {"state": "ok", "questions": {"intent": INTENT, "other": URGENT}, "expected": {"intent": "other"}},  # other: no gold
]


@pytest.fixture
def gold(tmp_path) -> str:
    path = tmp_path / "gold.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return str(path)


def run_json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main(argv + ["--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_run_json_keys_and_metrics(tiny_checkpoint, gold, capsys):
    code, res = run_json(capsys, ["run", "--model", tiny_checkpoint, "--data", gold])
    assert code == 0 and res["exit_status"] == 0 and res["command"] == "run"
    assert {"model", "data", "metrics", "gates", "environment"} <= set(res)
    assert res["data"]["items"] == 6 and res["data"]["by_type"] == {"choice": 3, "noul": 2, "score": 1}
    assert len(res["data"]["sha256"]) == 64 and len(res["model"]["weights_sha256"]) == 64
    assert list(res["metrics"]) == ["choice", "score", "noul", "all"]
    for row in res["metrics"].values():
        assert set(row) == {"n", "accuracy", "brier", "ece", "confidence"}
        assert 0 <= row["accuracy"] <= 1 and 0 <= row["ece"] <= 1 and 0 <= row["brier"] <= 2
    assert res["metrics"]["all"]["n"] == 6
    assert res["gates"]["passed"] and res["gates"]["failed_rows"] == []  # no gate given


def test_run_gates_exit_status_and_policies(tiny_checkpoint, gold, capsys):
    base = ["run", "--model", tiny_checkpoint, "--data", gold]
    assert run_json(capsys, base + ["--min-accuracy", "0", "--max-ece", "1"])[0] == 0
    code, res = run_json(capsys, base + ["--min-accuracy", "1"])
    acc = {k: v["accuracy"] for k, v in res["metrics"].items()}
    assert acc["all"] < 1  # the random tiny model misses something
    assert code == 1 and not res["gates"]["passed"] and "all" in res["gates"]["failed_rows"]
    assert any("accuracy" in f for f in res["gates"]["rows"]["all"]["failures"])
    # warn: same failures reported, exit 0
    code, res = run_json(capsys, base + ["--min-accuracy", "1", "--row-policy", "warn"])
    assert code == 0 and res["gates"]["passed"] and res["gates"]["failed_rows"]
    # all: fails only when every judged row fails; a threshold between the worst and best row passes
    lo, hi = min(acc.values()), max(acc.values())
    if lo < hi:
        code, res = run_json(capsys, base + ["--min-accuracy", str(hi), "--row-policy", "all"])
        assert code == 0 and res["gates"]["failed_rows"]
        assert run_json(capsys, base + ["--min-accuracy", str(hi), "--row-policy", "any"])[0] == 1
    code, res = run_json(capsys, base + ["--max-ece", "0", "--row-policy", "all"])
    assert code == 1 and set(res["gates"]["failed_rows"]) == set(res["metrics"])


def test_run_text_and_markdown(tiny_checkpoint, gold, capsys):
    assert main(["run", "--model", tiny_checkpoint, "--data", gold, "--min-accuracy", "1"]) == 1
    out = capsys.readouterr().out
    assert "accuracy" in out and "FAIL" in out and "policy any" in out
    assert main(["run", "--model", tiny_checkpoint, "--data", gold, "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| type | n | accuracy | brier | ece | confidence | gate |" in out


def test_text_label_csv(tiny_checkpoint, tmp_path, capsys):
    path = tmp_path / "tl.csv"
    path.write_text("text,label\nrefund please,billing\napp is down,tech\nwhere is my invoice,billing\n")
    code, res = run_json(capsys, ["run", "--model", tiny_checkpoint, "--data", str(path)])
    assert code == 0 and res["metrics"]["choice"]["n"] == 3 and list(res["metrics"]) == ["choice", "all"]


def test_compare_side_by_side_with_deltas(tiny_checkpoint, gold, capsys):
    code, res = run_json(capsys, ["compare", "--model", tiny_checkpoint, "--model", tiny_checkpoint, "--data", gold])
    assert code == 0 and len(res["models"]) == 2 and len(res["metrics"]) == 2 and len(res["deltas"]) == 1
    assert res["metrics"][0] == res["metrics"][1]
    assert all(v == 0 for row in res["deltas"][0].values() for v in row.values())
    assert main(["compare", "--model", tiny_checkpoint, "--model", tiny_checkpoint, "--data", gold]) == 0
    assert "m1-m0" in capsys.readouterr().out


def test_agreement_with_itself(tiny_checkpoint, gold, capsys):
    code, res = run_json(capsys, ["agreement", "--model", tiny_checkpoint, "--data", gold,
                                  "--against", "model", tiny_checkpoint, "--min-agreement", "1", "--max-dp", "0"])
    assert code == 0 and res["gates"]["passed"]
    assert res["agreement"]["all"] == {"n": 6, "argmax_agreement": 1.0, "max_abs_dp": 0.0, "mean_abs_dp": 0.0}


def test_evidence_markdown_and_from_run(tiny_checkpoint, gold, tmp_path, capsys):
    assert main(["evidence", "--model", tiny_checkpoint, "--data", gold, "--min-accuracy", "0"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# laya-evals evidence record")
    for part in ("verdict: **PASS**", "weights sha256", "## Data", "sha256:", "## Metrics", "| all | 6 |",
                 "## Gates", "torch:", "laya: `0.4.15`", "date (UTC):"):
        assert part in md, part
    run_file = tmp_path / "run.json"
    code, res = run_json(capsys, ["run", "--model", tiny_checkpoint, "--data", gold, "--min-accuracy", "1"])
    run_file.write_text(json.dumps(res))
    out_file = tmp_path / "evidence.json"
    assert main(["evidence", "--from", str(run_file), "--json", "--out", str(out_file)]) == 1
    rec = json.loads(out_file.read_text())
    assert rec["verdict"] == "fail" and rec["metrics"] == res["metrics"] and rec["data"]["sha256"] == res["data"]["sha256"]
    assert "run.json" in rec["source"]


@pytest.mark.parametrize("argv, needle", [
    (["run", "--data", "D", "--min-accuracy", "1.5"], "'1.5'"),
    (["run", "--data", "D", "--max-ece", "nan"], "'nan'"),
    (["run", "--data", "D", "--row-policy", "most"], "'most'"),
    (["run", "--data", "D", "--batch-size", "0"], "'0'"),
    (["run", "--data", "D", "--json", "--markdown"], "--markdown"),
    (["bench"], "'bench'"),
])
def test_usage_errors_from_the_parser(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and needle in capsys.readouterr().err


def test_usage_errors_from_inputs(tiny_checkpoint, gold, tmp_path, capsys):
    missing = str(tmp_path / "nope.jsonl")
    assert main(["run", "--model", tiny_checkpoint, "--data", missing]) == 2
    assert "nope.jsonl" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"state": "x", "questions": {"q": INTENT}, "expected": {"q": "refnud"}}) + "\n")
    assert main(["run", "--model", tiny_checkpoint, "--data", str(bad)]) == 2
    assert "'refnud'" in capsys.readouterr().err
    assert main(["run", "--model", str(tmp_path / "no-ckpt"), "--data", gold]) == 2
    assert "no-ckpt" in capsys.readouterr().err
    assert main(["agreement", "--model", tiny_checkpoint, "--data", gold, "--against", "tflite", "x"]) == 2
    assert "'tflite'" in capsys.readouterr().err
    assert main(["compare", "--model", tiny_checkpoint, "--data", gold]) == 2
    assert "at least twice" in capsys.readouterr().err
    assert main(["run", "--model", tiny_checkpoint, "--data", gold, "--calibration", str(tmp_path / "c.json")]) == 2
    assert "c.json" in capsys.readouterr().err
    assert main(["run", "--data", gold]) == 2
    assert "--model" in capsys.readouterr().err


def test_help_documents_gates_and_exit_status(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    for part in ("run", "agreement", "compare", "evidence", "Exit status", "--row-policy any", "ECE"):
        assert part in out, part


def test_metric_helpers():
    t = np.array([0.5, 0.5, 0.0])  # tied gold maxima: either counts
    assert evals.is_hit(np.array([0.1, 0.8, 0.1]), t) and not evals.is_hit(np.array([0.1, 0.1, 0.8]), t)
    m = evals.metrics([(0, np.array([1.0, 0.0]), 2, {})], [np.array([0.75, 0.25])])
    assert m["choice"] == {"n": 1, "accuracy": 1.0, "brier": 0.125, "ece": 0.25, "confidence": 0.75}
    table = {"choice": {"accuracy": 0.9, "ece": 0.05}, "all": {"accuracy": 0.5, "ece": 0.05}}
    assert not evals.judge_gates(table, min_accuracy=0.8, policy="any")["passed"]
    assert evals.judge_gates(table, min_accuracy=0.8, policy="all")["passed"]
    assert not evals.judge_gates(table, min_accuracy=0.95, policy="all")["passed"]
    assert evals.judge_gates(table, min_accuracy=0.95, policy="warn")["passed"]
    with pytest.raises(ValueError, match="'some'"):
        evals.judge_gates(table, policy="some")


def test_onnx_run_and_agreement(tiny_checkpoint, agent, gold, tmp_path, capsys):
    """--onnx answers through ONNXAgent; the graph agrees with the eager model (~11 s export on 2 cores)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from laya.export import onnx as export

    graph = export.export_module(agent.model, str(tmp_path / "laya.onnx"))
    code, res = run_json(capsys, ["run", "--model", tiny_checkpoint, "--onnx", graph, "--data", gold])
    assert code == 0 and res["model"]["runtime"] == "onnx" and len(res["model"]["onnx_sha256"]) == 64
    assert "onnxruntime" in res["environment"]
    code, res = run_json(capsys, ["agreement", "--model", tiny_checkpoint, "--data", gold,
                                  "--against", "onnx", graph, "--min-agreement", "1", "--max-dp", "0.01"])
    assert code == 0 and res["against"]["runtime"] == "onnx" and res["agreement"]["all"]["argmax_agreement"] == 1.0
    assert main(["run", "--model", tiny_checkpoint, "--onnx", str(tmp_path / "missing.onnx"), "--data", gold]) == 2
    assert "missing.onnx" in capsys.readouterr().err
    # the published design: run DATASET --onnx PATH (OnnxRunner); an example naming another checkpoint is refused
    rows = tmp_path / "published.jsonl"
    rows.write_text(json.dumps({"state": "refund please", "questions": {"intent": INTENT},
                                "expected": {"intent": "refund"}}) + "\n", encoding="utf-8")
    report = tmp_path / "report.json"
    assert main(["run", str(rows), "--model", tiny_checkpoint, "--onnx", graph, "--json", str(report)]) == 0
    assert json.loads(report.read_text())["config"]["runner"] == "onnx"
    capsys.readouterr()
    with open(rows, "a", encoding="utf-8") as f:
        f.write(json.dumps({"state": "x", "questions": {"intent": INTENT}, "expected": {"intent": "bug"},
                            "model": "multilingual"}) + "\n")
    assert main(["run", str(rows), "--model", tiny_checkpoint, "--onnx", graph]) == 2
    assert "the ONNX runner serves only" in capsys.readouterr().err


# ---- review fixes ----------------------------------------------------------------------------------------

def test_criteria_order_is_part_of_the_question(agent, tmp_path):
    """Two definitions differing only in criteria order are two questions: each row is answered as a
    direct predict of its own definition (order changes the model's output)."""
    a = {"type": "choice", "instructions": "What does the customer want?",
         "criteria": {"refund": "money back", "bug": "something broken", "other": None}}
    b = {"type": "choice", "instructions": a["instructions"],
         "criteria": {"other": None, "bug": "something broken", "refund": "money back"}}
    state = "I want my money back for order 1234."
    path = tmp_path / "order.jsonl"
    path.write_text("\n".join(json.dumps({"state": state, "questions": {"intent": d}, "expected": {"intent": "refund"}})
                              for d in (a, b)) + "\n", encoding="utf-8")
    items = evals.load_eval_items(str(path))
    probs = evals.answer_items(agent, items)
    direct = [evals.probs_from_answer(it.question, agent.predict(state, {"intent": d})["answers"]["intent"])
              for it, d in zip(items, (a, b))]
    assert not np.allclose(direct[0], direct[1], atol=1e-3)  # the order matters for this model
    for got, want in zip(probs, direct):
        np.testing.assert_allclose(got, want, atol=1e-3)


def test_rows_out_of_step_is_a_usage_error(tiny_checkpoint, gold, monkeypatch, capsys):
    import laya.train.data as data

    real = data.load_examples
    monkeypatch.setattr(data, "load_examples", lambda path, *a, **k: real(path, *a, **k)[:-1])
    with pytest.raises(ValueError, match="gold.jsonl"):
        evals.load_eval_items(gold)
    assert main(["run", "--model", tiny_checkpoint, "--data", gold]) == 2
    assert "out of step" in capsys.readouterr().err


def test_text_label_jsonl_without_flag_and_forced_text_column(tiny_checkpoint, tmp_path, capsys):
    rows = [{"text": "refund me", "label": "billing"}, {"text": "app crashes", "label": "tech"}]
    plain = tmp_path / "tl.jsonl"
    plain.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    code, res = run_json(capsys, ["run", "--model", tiny_checkpoint, "--data", str(plain)])
    assert code == 0 and res["metrics"]["all"]["n"] == 2
    # rows with a "state" key but no "questions" dict are text+label too; --text-column state forces it
    stated = tmp_path / "st.jsonl"
    stated.write_text("\n".join(json.dumps({"state": r["text"], "label": r["label"]}) for r in rows) + "\n",
                      encoding="utf-8")
    code, res = run_json(capsys, ["run", "--model", tiny_checkpoint, "--data", str(stated), "--text-column", "state"])
    assert code == 0 and res["metrics"]["all"]["n"] == 2


def test_evidence_from_run_rejudges_with_new_gates(tiny_checkpoint, gold, tmp_path, capsys):
    run_file = tmp_path / "run.json"
    code, res = run_json(capsys, ["run", "--model", tiny_checkpoint, "--data", gold])
    assert code == 0
    run_file.write_text(json.dumps(res))
    code, rec = run_json(capsys, ["evidence", "--from", str(run_file), "--min-accuracy", "1"])
    assert code == 1 and rec["verdict"] == "fail" and rec["gates"]["min_accuracy"] == 1
    assert "re-judged" in rec["source"]
    code, rec = run_json(capsys, ["evidence", "--from", str(run_file), "--min-accuracy", "0"])
    assert code == 0 and rec["verdict"] == "pass"


def test_evidence_from_a_file_that_is_not_utf8_json_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{")
    assert main(["evidence", "--from", str(bad)]) == 2
    assert f"--from '{bad}': not JSON (" in capsys.readouterr().err
