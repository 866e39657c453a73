"""Training-data edges: a CSV quote left open at the end of the file, and dry_run on rows given in memory."""

import json
import re

import numpy as np
import pytest

pytest.importorskip("torch")

import laya.train as T  # noqa: E402
from laya.questions import check_question  # noqa: E402
from laya.train.data import Example, csv_records, load_examples  # noqa: E402

NOUL = {"type": "noul", "instructions": "Urgent?"}
NO_MODEL = "/nonexistent-checkpoint"  # dry_run reads budgets only; a missing directory gives the defaults


def _open_quote(path, line):
    return (rf"^{re.escape(str(path))}:{line}: not valid CSV \(a quoted field starts on this line and is never "
            r"closed, so it runs to the end of the file\); close the quote$")


@pytest.mark.parametrize("text, line", [
    ('text,label\nhi,x\n"oops,y\nbye,z\nlast,w\n', 3),  # without the check: 2 rows, the rest one text
    ('text,label\nhi,x\n"oops,y\nbye,z\nlast,w', 3),  # no final line break
    ('text,label\nhi,"x\n', 2),
    ('text,label\nhi,x\n"', 3),
    ('text,label\r\nhi,x\r\n"two\r\nlines",x\r\nz,"oops\r\nmore\r\n', 5),  # the field's line, not its record's
    ('text,label\nhi,"ab""c\n\nd""\n', 2),  # a doubled quote does not close it
    ('"text,label\nhi,x\n', 1),  # the header
])
def test_csv_quote_left_open_at_the_end_is_named(tmp_path, text, line):
    path = tmp_path / "open.csv"
    path.write_bytes(text.encode("utf-8"))
    for read in (csv_records, load_examples, T.rows_from_csv, lambda p: T.dry_run(p, NO_MODEL)):
        with pytest.raises(ValueError, match=_open_quote(path, line)):
            read(str(path))
    from laya.train import cli

    assert cli.main(["--data", str(path), "--dry-run"]) == 2


def test_csv_quotes_accepted_today_still_are(tmp_path):
    path = tmp_path / "ok.csv"  # a quote after text, text after a closing quote, closed multi-line fields
    path.write_text('text,label\n"abc"def,x\na"b,y\n"two\nlines","x"\n\n"last",y', encoding="utf-8")
    assert [(line, row["text"]) for line, row in csv_records(str(path))] == [
        (2, "abcdef"), (3, 'a"b'), (5, "two\nlines"), (7, "last")]
    assert T.dry_run(str(path), NO_MODEL)["rows_read"] == 4


def _rows():
    return [None,
            {"state": "ok", "questions": {"u": NOUL, "v": NOUL}, "expected": {"u": True}},
            {"state": "probs", "questions": {"u": NOUL}, "gold": {"u": {"probabilities": {"true": 3, "false": 1}}}},
            {"state": "bad q", "questions": {"u": {"type": "nope", "instructions": "?"}}, "expected": {"u": 1}},
            {"state": "bad t", "questions": {"u": NOUL}, "gold": {"u": {"probabilities": {"maybe": 1}}}},
            {"questions": {"u": NOUL}}, [1, 2], {"state": "s", "questions": []}, 5,
            {"state": "s", "questions": {"u": NOUL}, "gold": ["u"]},
            {"state": 7, "questions": {"u": NOUL}, "expected": {"u": True}}]


def test_dry_run_counts_rows_in_memory_as_it_counts_a_file(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    config = T.TrainConfig(calib_frac=0.0)
    from_file, from_list = T.dry_run(str(path), NO_MODEL, config), T.dry_run(_rows(), NO_MODEL, config)
    assert from_file["skipped"] == {"bad_row": 7, "no_target": 1, "invalid_question": 1, "invalid_target": 1}
    assert (from_file["rows_read"], from_file["valid_items"]) == (11, 2)
    assert {**from_file, "data": None} == from_list and list(from_list) == list(from_file)
    assert T.dry_run(iter(_rows()), NO_MODEL, config) == from_list  # a generator: the same counts


def test_dry_run_of_nones_counts_bad_rows_and_examples_pass_as_they_are():
    out = T.dry_run([None, None, None], NO_MODEL)
    assert (out["rows_read"], out["valid_items"], out["train_items"], out["skipped"]) == (3, 0, 0, {"bad_row": 3})
    q = check_question("u", NOUL)
    mixed = [Example("s", q, np.array([0.5, 0.5])), None, {"state": "t", "questions": {"u": NOUL},
                                                          "expected": {"u": False}}]
    out = T.dry_run(mixed, NO_MODEL, T.TrainConfig(calib_frac=0.0))
    assert (out["rows_read"], out["valid_items"], out["skipped"]) == (3, 2, {"bad_row": 1})


def test_an_open_quote_as_long_as_the_field_limit_is_named(tmp_path):
    import csv

    from laya.train.data import csv_records

    path = tmp_path / "long.csv"
    path.write_text('text,label\n"' + "x" * csv.field_size_limit(), encoding="utf-8", newline="")
    with pytest.raises(ValueError, match=r"long\.csv:2: not valid CSV \(a quoted field starts on this line"):
        csv_records(str(path))


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"])
def test_a_bad_byte_is_named_by_its_line_whatever_the_line_ends(tmp_path, end):
    from laya.train.data import csv_records

    path = tmp_path / "bad.csv"
    path.write_bytes(end.join(["text,label", "hi,yes", "ok,\xff"]).encode("latin-1") + end.encode())
    with pytest.raises(ValueError, match=r"bad\.csv:3: byte 0xff is not valid UTF-8"):
        csv_records(str(path))
