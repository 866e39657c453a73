"""scripts/make_training_data.py: regenerable from a seed, valid questions, held-out pools disjoint."""

from __future__ import annotations

import json

from make_training_data import CHOICE_Q, DOMAINS, NOUL_Q, SCORES, TEMPLATES, N_HELD_TEMPLATES, main, make_dataset, split

from laya.questions import check_questions
from laya.train.data import load_gold_jsonl


def test_same_seed_same_data_other_seed_other_data():
    a = make_dataset(3, 90, 30)
    assert a == make_dataset(3, 90, 30)
    assert a[0] != make_dataset(4, 90, 30)[0]


def test_records_valid_and_cover_types_and_sizes(tmp_path):
    main([str(tmp_path), "--seed", "1", "--train", "600", "--heldout", "150"])
    examples = load_gold_jsonl(str(tmp_path / "train.jsonl"))
    assert len(examples) == 600
    assert {e.question.qtype for e in examples} == {"choice", "score", "noul"}
    ks = {e.question.k for e in examples if e.question.qtype == "choice"}
    assert min(ks) == 2 and max(ks) == 20
    for line in open(tmp_path / "heldout.jsonl", encoding="utf-8"):
        check_questions(json.loads(line)["questions"])
    metas = [json.loads(line)["meta"] for line in open(tmp_path / "train.jsonl", encoding="utf-8")]
    assert any(m.get("distractor") for m in metas) and any(m.get("hard_negative") for m in metas)


def option_labels(records):
    out = set()
    for r in records:
        q = r["questions"]["q"]
        if q["type"] == "choice":
            out |= set(q["criteria"])
        elif q["type"] == "score":
            out |= {json.dumps(q["criteria"])}
    return out


def test_heldout_label_sets_instructions_and_templates_unseen():
    train, held = make_dataset(0, 900, 300)
    assert option_labels(train).isdisjoint(option_labels(held))
    assert {r["questions"]["q"]["instructions"] for r in train}.isdisjoint(
        {r["questions"]["q"]["instructions"] for r in held})
    # the string pools themselves: every "a|b|HELD" list gives its last item to the held-out split only
    pools = [c[i] for d in DOMAINS.values() for c in d["concepts"].values() for i in range(3)]
    pools += list(CHOICE_Q.values()) + [NOUL_Q] + [cue for s in SCORES.values() for cue in s["cues"]]
    for pool in pools:
        assert set(split(pool, True)).isdisjoint(split(pool, False)), pool
    held_frames = TEMPLATES[-N_HELD_TEMPLATES:]
    for r in held[:60]:  # held-out states start like a held-out frame, never like a training one
        text = next(iter(r["state"].values()))
        assert not any(text.startswith(f.split("{")[0]) and f.split("{")[0] for f in TEMPLATES[:-N_HELD_TEMPLATES]
                       if f not in held_frames)


def test_training_pools_are_richer_than_heldout_and_codes_stay_in_training():
    """Per concept the training split has >= 3 label names, >= 2 descriptions, >= 5 evidence phrasings
    (few phrasings let a model memorise strings); bare-code labels appear only in training."""
    for spec in DOMAINS.values():
        for labels, descs, evidence, _ in spec["concepts"].values():
            assert len(split(labels, False)) >= 3 and len(split(descs, False)) >= 2
            assert len(split(evidence, False)) >= 5
    train, held = make_dataset(0, 1500, 600)
    coded = [r for r in train if r["questions"]["q"]["type"] == "choice" and "A" in r["questions"]["q"]["criteria"]
             or "option_1" in r["questions"]["q"].get("criteria", {})]
    assert coded and all(isinstance(r["questions"]["q"]["criteria"], dict) for r in coded)  # codes come with descriptions
    assert not any(label in ("A", "option_1", "Q01", "team-a") for label in option_labels(held))


def test_lexical_hints_only_in_training():
    """Some training states name their right option (a bootstrap for the option markers); held-out never."""
    train, held = make_dataset(0, 900, 600)
    hinted = [r for r in train if r["meta"].get("lexical")]
    assert 0.05 < len(hinted) / len(train) < 0.2
    assert not any(r["meta"].get("lexical") for r in held)
    for r in hinted:
        q, text = r["questions"]["q"], next(iter(r["state"].values()))
        gold = max(r["gold"]["q"]["probabilities"], key=r["gold"]["q"]["probabilities"].get)
        if q["type"] == "score":
            assert q["criteria"][int(gold)] in text
        else:
            criteria = q["criteria"] if isinstance(q["criteria"], dict) else {c: None for c in q["criteria"]}
            assert gold.replace("_", " ") in text or (criteria[gold] and criteria[gold] in text)


# ---- the calibration split ---------------------------------------------------------------------------

import hashlib  # noqa: E402

import make_training_data as mtd  # noqa: E402

# sha256 of the files the generator wrote BEFORE the calib split existed (commit 5f3a6c0), for the H200
# run's held-out size and for the defaults: adding the calib split moved neither split.
BEFORE_SHA256 = {("heldout", 3000): "7f0dcb26c6e38b44aa8fca3b4ce6f3224af7d30731b36cc7eeb96d0f5bee7a06",
                 ("heldout", 900): "69d452d6234781cdb257406e99637be5854f46843bca4e5389781146ca63e451",
                 ("train", 3000): "c6ffc4b9e3f5322bee298701aa902092c33018370df546af17ecdd4badd3d640"}


def test_heldout_and_train_byte_identical_to_before_the_calib_split(tmp_path):
    main([str(tmp_path / "a"), "--seed", "0", "--train", "3000", "--heldout", "3000", "--calib", "60"])
    main([str(tmp_path / "b"), "--seed", "0", "--train", "10", "--heldout", "900"])
    for (name, n), digest in BEFORE_SHA256.items():
        path = tmp_path / ("a" if n == 3000 else "b") / f"{name}.jsonl"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, (name, n)
    assert len((tmp_path / "a" / "calib.jsonl").read_text().splitlines()) == 60
    assert len((tmp_path / "b" / "calib.jsonl").read_text().splitlines()) == 3000
    main([str(tmp_path / "c"), "--seed", "0", "--train", "10", "--heldout", "10", "--calib", "0"])
    assert not (tmp_path / "c" / "calib.jsonl").exists()


def strings_of(record) -> set:
    """Label names, descriptions, score level sets and the instruction of a record."""
    q = record["questions"]["q"]
    out = {"instr:" + q["instructions"]}
    crit = q.get("criteria")
    if q["type"] == "choice":
        out |= {"label:" + c for c in crit}
        if isinstance(crit, dict):
            out |= {"desc:" + v for v in crit.values() if v}
    elif q["type"] == "score":
        out |= {"levels:" + json.dumps(crit)} | {"level:" + c for c in crit}
    return out


def test_calib_split_disjoint_from_train_and_heldout():
    splits = mtd.make_splits(0, 1500, 900, 900)
    train, held, calib = splits["train"], splits["heldout"], splits["calib"]
    assert calib == mtd.make_splits(0, 3, 3, 900)["calib"] and calib != mtd.make_splits(1, 3, 3, 900)["calib"]
    assert {r["meta"]["type"] for r in calib} == {"choice", "score", "noul"}
    seen = {s for r in train + held for s in strings_of(r)}
    mine = {s for r in calib for s in strings_of(r)}
    assert mine and seen.isdisjoint(mine), sorted(seen & mine)[:5]
    # the pools themselves: no calib alternative is an item of any training / held-out pool
    everything = {x for pool in mtd.CALIB_POOLS for x in pool.split("\n" if "\n" in pool else "|")}
    calib_strings = {x for alts in mtd.CALIB_POOLS.values() for x in alts}
    assert calib_strings.isdisjoint(everything)
    calib_labels = {c[0] for c in mtd.CALIB_CONCEPTS.values()}
    levels = [v for spec in mtd.SCORES.values() for part in ("train", "held") for v in spec[part].values()]
    for r in calib:
        q, text = r["questions"]["q"], next(iter(r["state"].values()))
        if q["type"] == "choice":
            assert set(q["criteria"]) <= calib_labels
        if q["type"] == "score":
            assert q["criteria"] in [v for s in mtd.SCORES.values() for v in s["calib"].values()]
            assert q["criteria"] not in levels
        assert not r["meta"].get("lexical")
        assert "Hey there, " in text or "Ticket text: " in text, text  # the calib templates' openings
    for r in train + held:
        assert not any(o in next(iter(r["state"].values())) for o in ("Hey there, ", "Ticket text: "))
    # no calib evidence phrasing appears in a training or held-out state, and vice versa
    calib_ev = [c[2] for c in mtd.CALIB_CONCEPTS.values()]
    texts = [next(iter(r["state"].values())) for r in train + held]
    assert not any(ev in t for ev in calib_ev for t in texts)


def test_coded_label_share_moves_training_only():
    base = mtd.make_splits(0, 900, 300, 300)
    more = mtd.make_splits(0, 900, 300, 300, coded_label_p=0.4)
    assert more["heldout"] == base["heldout"] and more["calib"] == base["calib"]

    def coded(records):
        return sum(1 for r in records if r["questions"]["q"]["type"] == "choice"
                   and any(c in ("A", "option_1", "Q01", "team-a") for c in r["questions"]["q"]["criteria"]))
    assert coded(more["train"]) > 1.8 * coded(base["train"]) > 0


def test_calib_0_removes_a_stale_calib_file(tmp_path, capsys):
    """`--calib 0` into a directory an earlier run wrote: its calib.jsonl would be picked up by train_mini
    (calibrate / train) as if it belonged to this data; it is removed, with a message."""
    out = tmp_path / "d"
    main([str(out), "--seed", "3", "--train", "5", "--heldout", "5", "--calib", "20"])
    assert (out / "calib.jsonl").exists()
    capsys.readouterr()
    main([str(out), "--seed", "4", "--train", "5", "--heldout", "5", "--calib", "0"])
    assert not (out / "calib.jsonl").exists()
    assert "removed the stale" in capsys.readouterr().err
    main([str(out), "--seed", "4", "--train", "5", "--heldout", "5", "--calib", "0"])  # nothing to remove: quiet
    assert "removed" not in capsys.readouterr().err
