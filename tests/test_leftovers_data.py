"""Training-data loading, dry-run counts and eval metrics: the cases fuzzing found (bad bytes, nulls, BOMs,
non-object gold, generators, out-of-range confidences)."""

import collections
import json
import math
import re

import numpy as np
import pytest

pytest.importorskip("torch")

import laya.train as T  # noqa: E402
from laya.questions import check_question  # noqa: E402
from laya.train.data import Example, load_examples, load_gold_jsonl, load_text_label, text_label_rows  # noqa: E402

NOUL = {"type": "noul", "instructions": "Urgent?"}
NO_MODEL = "/nonexistent-checkpoint"  # dry_run reads budgets only; a missing directory gives the defaults


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_text_label_bad_json_and_bad_utf8_name_the_file_and_line(tmp_path):
    bad_json = tmp_path / "t.jsonl"
    bad_json.write_text('{"text": "a", "label": "x"}\n\n{"text": "b", "label": \n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{bad_json}:3: not valid JSON .*; fix or remove that line$"):
        load_examples(str(bad_json), text_column="text")
    bad_csv = tmp_path / "t.csv"
    bad_csv.write_bytes(b"text,label\nhi,x\n\xff\xfe,y\n")
    with pytest.raises(ValueError, match=rf"^{bad_csv}:3: byte 0xff is not valid UTF-8; save the file as UTF-8$"):
        load_examples(str(bad_csv))
    bad_gold = tmp_path / "g.jsonl"  # the gold form reads through the same lines
    bad_gold.write_bytes(json.dumps({"state": "x", "questions": {"u": NOUL}}).encode() + b"\n{\"state\": \"\xc3\"}\n")
    with pytest.raises(ValueError, match=rf"^{bad_gold}:2: byte 0xc3 is not valid UTF-8"):
        load_gold_jsonl(str(bad_gold))
    with pytest.raises(ValueError, match=rf"^{bad_gold}:2: byte 0xc3"):
        T.read_jsonl(str(bad_gold))
    huge = tmp_path / "huge.csv"
    huge.write_text("text,label\nhi,x\n" + "w" * 200000 + ",y\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{huge}:3: not valid CSV \(field larger than field limit"):
        load_examples(str(huge))
    listed = tmp_path / "l.jsonl"
    listed.write_text('{"text": "a", "label": "x"}\n["b", "y"]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{listed}:2: a text\+label row must be an object .* got list$"):
        load_examples(str(listed), text_column="text")


def test_null_or_empty_label_is_a_missing_label_not_the_string_none(tmp_path):
    path = _jsonl(tmp_path / "t.jsonl", [{"text": "a", "label": "x"}, {"text": "b", "label": None},
                                          {"text": "c", "label": "y"}, {"text": "d", "label": "  "}])
    examples = load_text_label(path)
    assert [e.state for e in examples] == ["a", "c"] and examples[0].question.labels == ("x", "y")
    skipped = collections.Counter()
    assert len(load_examples(path, text_column="text", skipped=skipped)) == 2 and skipped == {"no_target": 2}
    rows = text_label_rows(path)
    assert rows[1] == {"state": "b", "questions": rows[0]["questions"]} and "None" not in str(rows[0]["questions"])
    out = T.dry_run(path, NO_MODEL, T.TrainConfig(calib_frac=0.0))
    assert (out["rows_read"], out["valid_items"], out["skipped"]) == (4, 2, {"no_target": 2})
    csv_path = tmp_path / "t.csv"  # an empty cell and a short row: no label either
    csv_path.write_text("text,label\nhi,x\nyo,\nlonely\nbye,y\n", encoding="utf-8")
    assert [e.state for e in load_text_label(str(csv_path))] == ["hi", "bye"]
    # a null text is a row without a state: counted as bad_row, named without a counter
    nulls = _jsonl(tmp_path / "n.jsonl", [{"text": "a", "label": "x"}, {"text": None, "label": "x"}])
    assert T.dry_run(nulls, NO_MODEL)["skipped"] == {"bad_row": 1}
    with pytest.raises(ValueError, match=rf"^{nulls}:2: column 'text' is null; give the row a text or remove it$"):
        load_text_label(nulls)
    unlabelled = _jsonl(tmp_path / "u.jsonl", [{"text": "a", "label": None}])
    with pytest.raises(ValueError, match=rf"^{unlabelled}: no row has a label in column 'label'"):
        load_text_label(unlabelled)


def test_csv_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufefftext,label\nhi,x\nyo,y\n".encode("utf-8"))
    examples = load_text_label(str(path))
    assert [e.state for e in examples] == ["hi", "yo"] and examples[0].question.labels == ("x", "y")
    assert T.rows_from_csv(str(path))[0]["state"] == "hi"
    gold = tmp_path / "bom.jsonl"  # and a gold JSONL saved with one
    gold.write_bytes(("\ufeff" + json.dumps({"state": "s", "questions": {"u": NOUL}, "expected": {"u": True}}) + "\n")
                     .encode("utf-8"))
    assert len(load_examples(str(gold))) == 1 and len(T.read_jsonl(str(gold))) == 1
    from laya.evals.items import load_eval_items

    assert [it.qid for it in load_eval_items(str(gold))] == ["u"]


@pytest.mark.parametrize("gold", ["u", ["u"], 5, "oops"])
def test_gold_that_is_not_an_object_is_a_bad_row(tmp_path, gold):
    row = {"state": "s", "questions": {"u": NOUL}, "gold": gold}
    path = _jsonl(tmp_path / "g.jsonl", [{"state": "t", "questions": {"u": NOUL}, "expected": {"u": True}}, row])
    with pytest.raises(ValueError, match=rf"^{path}:2: 'gold' must be an object keyed by question id, got "):
        load_gold_jsonl(path)
    skipped = collections.Counter()
    assert len(load_gold_jsonl(path, skipped=skipped)) == 1 and skipped == {"bad_row": 1}
    assert T.items_from_rows(None, [row], 64, 48) == ([], {"bad_row": 1})
    assert T.dry_run(path, NO_MODEL)["skipped"] == {"bad_row": 1}
    huge = {"state": "s", "questions": {"u": NOUL}, "gold": {"u": {"probabilities": {"true": 10 ** 400}}}}
    assert T.items_from_rows(None, [huge], 64, 48) == ([], {"invalid_target": 1})


def test_dry_run_counts_generators_once_and_csv_records_not_lines(tmp_path):
    q = check_question("u", NOUL)
    gen = (Example(f"s{i}", q, np.array([0.5, 0.5])) for i in range(20))
    out = T.dry_run(gen, NO_MODEL)
    assert (out["rows_read"], out["valid_items"], out["train_items"] + out["calibration_items"]) == (20, 20, 20)
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    header = tmp_path / "header.csv"
    header.write_text("text,label\n\n", encoding="utf-8")
    for path in (empty, header):
        out = T.dry_run(str(path), NO_MODEL)
        assert (out["rows_read"], out["valid_items"], out["train_items"], out["skipped"]) == (0, 0, 0, {})
    multi = tmp_path / "multi.csv"
    multi.write_text('text,label\n"two\nlines",x\nb,y\n', encoding="utf-8")
    assert (T.dry_run(str(multi), NO_MODEL)["rows_read"], T.dry_run(str(multi), NO_MODEL)["valid_items"]) == (2, 2)


def test_gold_loader_and_items_from_rows_classify_rows_alike(tmp_path, tok):
    rows = [{"state": "ok", "questions": {"u": NOUL, "v": NOUL}, "expected": {"u": True}},
            {"state": "probs", "questions": {"u": NOUL}, "gold": {"u": {"probabilities": {"true": 3, "false": 1}}}},
            {"state": "bad q", "questions": {"u": {"type": "nope", "instructions": "?"}}, "expected": {"u": 1}},
            {"state": "bad t", "questions": {"u": NOUL}, "gold": {"u": {"probabilities": {"maybe": 1}}}},
            {"state": "bad e", "questions": {"u": NOUL}, "expected": {"u": "perhaps"}},
            {"questions": {"u": NOUL}}, [1, 2], {"state": "s", "questions": []},
            {"state": "s", "questions": {"u": NOUL}, "expected": "yes"}]
    path = _jsonl(tmp_path / "mixed.jsonl", rows)
    skipped = collections.Counter()
    examples = load_gold_jsonl(path, skipped=skipped)
    items, counts = T.items_from_rows(tok, rows, 64, 48)
    assert counts == dict(skipped) == {"no_target": 1, "invalid_question": 1, "invalid_target": 2, "bad_row": 4}
    assert [e.state for e in examples] == ["ok", "probs"] and len(items) == 2
    for e, item in zip(examples, items):
        np.testing.assert_allclose(e.target, item["target"])
    assert math.isclose(items[1]["target"][1], 0.75)
    with pytest.raises(ValueError, match=rf"^{path}:3: "):  # without a counter the first unusable row is named
        load_gold_jsonl(path)


def test_evaluate_skip_answers_a_failed_batch_one_by_one():
    # one bad example in a predict_batch chunk is recorded alone; its neighbours are still answered (R-EV-4 skip)
    from laya.evals import Dataset, Example, evaluate

    class Runner:
        def __init__(self):
            self.calls = []

        def predict(self, state, questions, **kw):
            raise AssertionError("a batch runner is called through predict_batch")

        def predict_batch(self, states, questions, model=None, batch_size=None, **kw):
            self.calls.append(len(states))
            if any(not isinstance(s, str) for s in states):
                raise TypeError("state must be a str, dict or list, not int")
            return [{"answers": {"u": {"answer": True, "probabilities": {"true": 0.9, "false": 0.1},
                                       "confidence": 0.9}}} for _ in states]

    q = {"u": {"type": "noul", "instructions": "Is it urgent?"}}
    examples = [Example(s, q, {"u": True}) for s in ("a", "b", 5, "c", "d")]
    runner = Runner()
    report = evaluate(runner, Dataset(examples), batch_size=8, on_error="skip")
    assert [e["index"] for e in report.config["errored"]] == [2]
    assert sorted(c["index"] for c in report.cases) == [0, 1, 3, 4]
    assert runner.calls == [5, 1, 1, 1, 1, 1]


def test_unreadable_states_are_bad_rows_and_bad_labels_name_the_file(tmp_path):
    # a state the model cannot read (a number, a lone surrogate) is a bad_row when counting, an error naming
    # the row otherwise; a label that cannot be an option names the file and column
    q = {"u": NOUL}
    for state in (5, "\ud800", None):
        row = {"state": state, "questions": q, "expected": {"u": True}}
        assert T.items_from_rows(None, [row], 64, 48) == ([], {"bad_row": 1})
    path = tmp_path / "labels.jsonl"
    path.write_text('{"text": "t", "label": "\\ud800"}\n{"text": "u", "label": "a"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: column 'label': question 'label': option"):
        load_text_label(str(path))
