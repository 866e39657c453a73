"""compat-0.4.15 §17: laya.train_cli and the published names of laya.train (R-TR-1, R-TR-3)."""

import inspect
import json
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import laya.train as T  # noqa: E402
from laya.questions import check_question  # noqa: E402


def test_train_cli_entry_point_and_flags(capsys):
    import laya.train_cli

    parser = laya.train_cli.build_parser()
    args = parser.parse_args(["--data", "d.jsonl"])
    assert args.base == "convaiinnovations/laya" and not args.dry_run
    for flags, dest, value in ((["--eval-data", "e"], "eval_data", "e"), (["--output-dir", "o"], "out", "o"),
                               (["--model", "m"], "base", "m"), (["--seed", "3"], "seed", 3)):
        assert getattr(parser.parse_args(["--data", "d", *flags]), dest) == value
    with pytest.raises(SystemExit) as e:
        laya.train_cli.main([])
    assert e.value.code == 2 and "--data" in capsys.readouterr().err


def test_train_config_fields_and_validate():
    c = T.TrainConfig()
    assert (c.shuffle_options, c.option_layout, c.max_len, c.head_max_len, c.amp, c.gradient_checkpointing) == \
        ((), None, None, None, None, None)
    assert (c.log_every, c.label_smoothing, c.text_column, c.label_column, c.question_id, c.instructions,
            c.eval_data, c.target_error, c.min_abstain_n) == (100, 0.0, "text", "label", "label", None, None, 0.1, 10)
    assert (c.epochs, c.micro_batch, c.grad_accum, c.loss, c.calib_max, c.calib_frac, c.calib_seed) == \
        (4, 8, 8, "rlcd", 400, 0.1, 20260922)
    assert c.validate() is c
    for bad in (dict(loss="mse"), dict(shuffle_options=("choice", "bogus")), dict(option_layout="diagonal"),
                dict(epochs=0), dict(micro_batch=-1), dict(grad_accum=0), dict(calib_frac=1.0),
                dict(calib_frac=-0.1)):
        with pytest.raises(ValueError):
            T.TrainConfig(**bad).validate()
    assert T.LOSSES == ("soft-ce", "rlcd")
    assert (T.CALIB_WARN_N, T.COLLAPSE_LOGIT_RANGE, T.COLLAPSE_CE_REL) == (50, 0.05, 0.02)


def test_targets_and_questions():
    q = T.to_internal("team", {"type": "choice", "instructions": "Which?", "criteria": ["a", "b"]})
    assert q == check_question("team", {"type": "choice", "instructions": "Which?", "criteria": ["a", "b"]})
    np.testing.assert_allclose(T.target_from_gold(q, {"probabilities": {"a": 3, "b": 1}}), [0.75, 0.25])
    np.testing.assert_allclose(T.target_from_expected(q, "b", label_smoothing=0.2), [0.1, 0.9])
    order = T.draw_option_order(T.Example("s", q, np.array([1.0, 0.0])), random.Random(0), ("choice",))
    assert sorted(order) == [0, 1]
    assert T.draw_option_order(T.Example("s", q, np.array([1.0, 0.0])), random.Random(0), ("noul",)) is None


def test_read_jsonl_split_and_budget(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n[2]\n')
    assert T.read_jsonl(str(path)) == [{"a": 1}, [2]]
    path.write_text("{bad\n")
    with pytest.raises(ValueError, match="line 1"):
        T.read_jsonl(str(path))
    train, calib = T.split_calibration(list(range(100)), 400, 0.1, 7)
    assert len(calib) == 10 and sorted(train + calib) == list(range(100))
    assert T.split_calibration(list(range(100)), 400, 0.1, 7) == (train, calib)
    assert len(T.split_calibration(list(range(100)), 3, 0.5, 7)[1]) == 3
    assert T.optimizer_updates(130, 8, 8, 4) == 12 and T.optimizer_updates(1, 8, 8, 0.1) == 1
    assert T.update_budget_message(10_000, T.TrainConfig()) is None
    assert "optimizer updates" in T.update_budget_message(100, T.TrainConfig())


def test_objectives_signatures():
    assert list(inspect.signature(T.rlcd_loss).parameters)[:8] == ["logits", "target", "mask", "qtype", "sigma",
                                                                   "samples", "w_sph", "w_rps"]
    params = inspect.signature(T.rlcd_loss).parameters
    assert (params["samples"].default, params["w_sph"].default, params["w_rps"].default) == (4, 0.75, 1.0)
    assert T.sigma_at(0, 4, 0.4, 0.1) == pytest.approx(0.4) and T.sigma_at(3, 4, 0.4, 0.1) == pytest.approx(0.1)
    assert T.sigma_at(0, 1) == pytest.approx(0.4)
    assert T.resolve_device("AUTO").type in ("cpu", "cuda") and T.resolve_device("cpu").type == "cpu"


def test_collapse_stats_and_message():
    flat = [(0, np.zeros(3), np.array([1.0, 0.0, 0.0]), 3)] * 4
    assert T.collapse_stats(flat)["mean_logit_range"] == 0.0
    assert T.prior_collapse_message(flat).startswith("prior collapse")
    sharp = [(0, np.array([5.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0]), 3)] * 4
    assert T.prior_collapse_message(sharp) is None and T.prior_collapse_message([]) is None
    notes = T.calibration_warnings(sharp)
    assert notes == ["thin calibration: only 4 choice items (< 50); its temperature is a rough fit"]


def test_dry_run_keys(tiny_checkpoint, tmp_path):
    rows = [{"state": f"ticket {i}", "questions": {"urgent": {"type": "noul", "instructions": "Urgent?"}},
             "expected": {"urgent": bool(i % 2)}} for i in range(30)]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = T.dry_run(str(path), tiny_checkpoint)
    assert set(out) == {"data", "rows_read", "valid_items", "train_items", "calibration_items", "effective_batch",
                        "optimizer_updates", "skipped", "max_len", "head_max_len"}
    assert (out["rows_read"], out["valid_items"], out["train_items"], out["calibration_items"]) == (30, 30, 27, 3)
    assert out["effective_batch"] == 64 and out["optimizer_updates"] == 4 and out["skipped"] == {}
    # rows and questions that cannot be used are counted under skipped (the keys of items_from_rows), not fatal
    bad = rows + [{"state": "no answer", "questions": {"urgent": {"type": "noul", "instructions": "Urgent?"}}},
                  {"state": "odd", "questions": {"u": {"type": "nope", "instructions": "?"}}, "expected": {"u": 1}},
                  {"state": "off", "questions": {"u": {"type": "noul", "instructions": "?"}}, "expected": {"u": "x"}},
                  {"questions": {}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in bad))
    out = T.dry_run(str(path), tiny_checkpoint)
    assert (out["rows_read"], out["valid_items"]) == (34, 30)
    assert out["skipped"] == {"no_target": 1, "invalid_question": 1, "invalid_target": 1, "bad_row": 1}
    sig = inspect.signature(T.finetune)
    assert list(sig.parameters) == ["data", "model_dir", "output_dir", "config", "device"]
    assert sig.parameters["device"].default == "auto"


def test_finetune_summary_keys(tiny_checkpoint, tmp_path):
    rows = [{"state": f"ticket {i}", "questions": {"urgent": {"type": "noul", "instructions": "Urgent?"}},
             "expected": {"urgent": bool(i % 2)}} for i in range(24)]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = T.TrainConfig(max_steps=2, micro_batch=4, grad_accum=1, calib_min_bucket_n=5, progress=False,
                           max_len=128, head_max_len=96, amp="off", log_every=0)
    with pytest.warns(RuntimeWarning):  # 2 calibration items: thin calibration
        out = T.finetune(str(path), tiny_checkpoint, str(tmp_path / "run"), config, device="cpu")
    assert set(out) == {"train_items", "calibration_items", "eval_items", "skipped", "epoch_loss", "temperature",
                        "temperature_by_options", "n_by_bucket", "calibration", "abstention_thresholds",
                        "train_report", "output_dir"}
    assert (out["train_items"], out["calibration_items"], out["eval_items"]) == (22, 2, 0)
    assert len(out["temperature"]) == 3 and len(out["epoch_loss"]) == 1 and out["output_dir"] == str(tmp_path / "run")
    # the run leaves the calibration record laya-evals evidence reads (R-EV-8): 2 noul records, too thin
    from laya import evidence

    saved = json.loads((tmp_path / "run" / "rl_agent_config.json").read_text())
    block = saved["training"]["laya_train_calibration"]
    assert block["types"] == {"noul": {"n": 2}} and block["n"] == 2
    assert evidence.inspect_calibration(saved)["state"] == evidence.INSUFFICIENT
    # a run on top of it without calibration drops the record: it described the temperatures that were reset
    import dataclasses
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        T.finetune(str(path), str(tmp_path / "run"), str(tmp_path / "run2"), dataclasses.replace(config, calib_frac=0.0),
                   device="cpu")
    again = json.loads((tmp_path / "run2" / "rl_agent_config.json").read_text())
    assert "laya_train_calibration" not in again["training"]
    assert evidence.inspect_calibration(again)["state"] == evidence.MISSING


def test_rows_items_and_encoding(tok, tmp_path):
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("text,label\nmy card was charged twice,billing\nthe app crashes,tech\n")
    rows = T.rows_from_csv(str(csv_path), question_id="team")
    assert rows[0]["expected"] == {"team": "billing"} and rows[0]["questions"]["team"]["criteria"] == ["billing", "tech"]
    assert T.read_data(str(csv_path), question_id="team") == rows
    rows.append({"state": "x", "questions": {"team": {"type": "nope", "instructions": "?"}}})
    rows.append({"state": "y", "questions": {"u": {"type": "noul", "instructions": "Urgent?"}}})
    rows.append("not a row")
    items, skipped = T.items_from_rows(tok, rows, 64, 48, label_smoothing=0.1)
    assert len(items) == 2 and skipped == {"invalid_question": 1, "no_target": 1, "bad_row": 1}
    np.testing.assert_allclose(items[0]["target"], [0.95, 0.05])
    assert len(T.encode_state(tok, "word " * 100, 10)) == 10
    enc = T.encode_item(tok, items[0], 64, 48)
    swapped = T.encode_item(tok, items[0], 64, 48, option_order=[1, 0], parallel=True)
    np.testing.assert_allclose(enc["target"], [0.95, 0.05])
    np.testing.assert_allclose(swapped["target"], [0.05, 0.95])
    assert len(swapped["position_ids"]) == len(swapped["input_ids"]) and len(enc["marker_pos"]) == 2
    item = T.make_item(tok, items[0]["question"], [1.0, 0.0], [5, 6], 48)
    assert item["k"] == 2 and item["state_ids"] == [5, 6]


def test_evaluate_records_and_report():
    records = [(0, [2.0, 0.0], [1.0, 0.0], 2), (2, [0.0, 1.0], [0.0, 1.0], 2), (2, [1.0, 0.0], [0.0, 1.0], 2)]
    out = T.evaluate_records(records)
    assert out["n"] == 3 and out["accuracy"] == pytest.approx(0.6667, abs=1e-4)
    assert set(out["by_type"]) == {"choice", "noul"} and out["by_type"]["choice"]["accuracy"] == 1.0
    report = T.calibration_report(records, [2.0, 1.0, 2.0])
    assert report["n"] == 3 and report["ece_after"] is not None and report["temperature"] == [2.0, 1.0, 2.0]


def test_train_model_on_items(tiny_checkpoint):
    model, tok, cfg = T.load_checkpoint(tiny_checkpoint)
    rows = [{"state": f"ticket {i}", "questions": {"team": {"type": "choice", "instructions": "Team?",
                                                             "criteria": ["billing", "tech", "sales"]}},
             "expected": {"team": ["billing", "tech", "sales"][i % 3]}} for i in range(12)]
    items, skipped = T.items_from_rows(tok, rows, 64, 48)
    assert skipped == {} and len(items) == 12
    seen = []
    config = T.TrainConfig(epochs=2, micro_batch=4, grad_accum=1, amp="off", shuffle_options=("choice",),
                           loss="soft-ce")
    losses = T.train_model(model, tok, items, config, "cpu", 64, 48, on_epoch_end=lambda e, loss: seen.append(e))
    assert len(losses) == 2 and all(np.isfinite(losses)) and seen == [0, 1]


def test_published_parameter_names():
    assert list(inspect.signature(T.target_from_expected).parameters) == ["q", "expected_val", "label_smoothing"]
    assert list(inspect.signature(T.save_checkpoint).parameters) == ["model", "tok", "cfg", "path"]
    q = T.to_internal("q", {"type": "choice", "instructions": "i", "criteria": {"a": "A", "b": "B"}})
    np.testing.assert_allclose(T.target_from_expected(q, expected_val="a"), [1.0, 0.0])


@pytest.mark.parametrize("field,value,text", [
    ("max_steps", float("nan"), "max_steps must be a positive integer"), ("max_steps", 1.5, "max_steps must be a positive integer"),
    ("micro_batch", float("inf"), "micro_batch must be a positive integer"), ("save_every", 0, "save_every must be a positive integer"),
    ("epochs", float("inf"), "epochs must be a positive number"), ("head_lr", float("nan"), "head_lr must be a finite number >= 0"),
    ("grad_clip", -1.0, "grad_clip must be a finite number >= 0"), ("freeze_layers", -1, "freeze_layers must be a finite"),
    ("label_smoothing", 1.5, "label_smoothing must be in"), ("target_error", 2, "target_error must be in"),
    ("min_abstain_n", "5", "min_abstain_n must be a positive integer")])
def test_config_refuses_values_that_would_train_on_nonsense(field, value, text):
    import dataclasses

    with pytest.raises(ValueError, match=text):
        dataclasses.replace(T.TrainConfig(), **{field: value}).validate()


def test_train_cli_dry_run_validates_the_config_and_bad_files_are_named(tmp_path, capsys):
    from laya.checkpoint import load_config
    from laya.train import cli

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"state": "x", "questions": {"u": {"type": "noul", "instructions": "?"}},
                                "expected": {"u": True}}) + "\n")
    assert cli.main(["--data", str(data), "--dry-run", "--micro-batch", "0"]) == 2
    assert "micro_batch must be a positive integer, got 0" in capsys.readouterr().err
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100000 + "\n")
    assert cli.main(["--data", str(deep), "--dry-run"]) == 2
    broken = tmp_path / "ckpt"
    broken.mkdir()
    (broken / "rl_agent_config.json").write_text("{\n")
    with pytest.raises(ValueError, match=r"^Incompatible model: .*rl_agent_config.json is not valid UTF-8 JSON"):
        load_config(str(broken))
