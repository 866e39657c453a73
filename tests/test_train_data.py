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
    """Per concept the training split has >= 7 label names, >= 5 descriptions, >= 13 evidence phrasings
    (few phrasings let a model memorise strings); bare-code labels appear only in training."""
    for spec in DOMAINS.values():
        for labels, descs, evidence, _ in spec["concepts"].values():
            assert len(split(labels, False)) >= 7 and len(split(descs, False)) >= 5
            assert len(split(evidence, False)) >= 13
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

# sha256 of the held-out files the generator wrote before the calib split existed (commit 5f3a6c0) and of the
# calib files it wrote before the training split was widened (commit 19f134d), for the H200 runs' sizes
# and for the defaults: neither change moved them (the training split has changed since, on purpose).
BEFORE_SHA256 = {("heldout", 3000): "7f0dcb26c6e38b44aa8fca3b4ce6f3224af7d30731b36cc7eeb96d0f5bee7a06",
                 ("heldout", 900): "69d452d6234781cdb257406e99637be5854f46843bca4e5389781146ca63e451",
                 ("calib", 6000): "b79630f43be116cb2414a4371071af3bc63b673ff9d7d4a5c993425f8e7894bc",
                 ("calib", 3000): "8ed7f1216c5322f13d6bda0301c50ef8e5ef26682f78663f9f14fa2d30303018"}


def test_heldout_and_calib_byte_identical_to_before(tmp_path):
    main([str(tmp_path / "a"), "--seed", "0", "--train", "30", "--heldout", "3000", "--calib", "6000"])
    main([str(tmp_path / "b"), "--seed", "0", "--train", "10", "--heldout", "900"])
    for (name, n), digest in BEFORE_SHA256.items():
        path = tmp_path / ("a" if n in (3000, 6000) and (name, n) != ("calib", 3000) else "b") / f"{name}.jsonl"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, (name, n)
    assert len((tmp_path / "a" / "calib.jsonl").read_text().splitlines()) == 6000
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


# ---- training diversity (training-only domains and phrasings) ------------------------------------------

def records_sha256(records) -> str:
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    return hashlib.sha256(text.encode()).hexdigest()


# sha256 of the held-out and calib records for two seeds, computed with the generator BEFORE the training
# split got its training-only domains, phrasings and many-option draw (commit 19f134d): every change to
# the training split must leave these alone (same concept pool, pools' held-out / calib items, rng calls).
HELD_CALIB_SHA256 = {
    0: ("9462c9f6062b69b2522cb7f5e4cbf04347c1bf6288e7ff5eeaddb4b8055cd94e",
        "a81da90260fa0c53b8b4d814905f7ea1ce791b6d97cd5a356fa6120ac50fdc9f"),
    7: ("ef6795803abba78e49e70b8c30fd0fa8d2fe36700e71c7be2b79325eff3a6988",
        "e97aa721e20a3ee5a7614baffd05813fc94312baabe58fe34996b2f2e104a36a"),
}


def test_heldout_and_calib_records_pinned():
    for seed, (held, calib) in HELD_CALIB_SHA256.items():
        splits = mtd.make_splits(seed, 5, 600, 600)
        assert records_sha256(splits["heldout"]) == held, seed
        assert records_sha256(splits["calib"]) == calib, seed


def training_strings() -> dict:
    """{kind: set of lower-cased training strings}: label names, descriptions, evidence, instructions,
    templates and distractor frames the training split can draw."""
    out = {"label": set(), "desc": set(), "evidence": set(), "instruction": set(), "frame": set()}
    for spec in DOMAINS.values():
        for pools in spec["concepts"].values():
            for kind, pool in zip(("label", "desc", "evidence"), pools):
                out[kind] |= {x.lower() for x in split(pool, False)}
    for spec in mtd.TRAIN_DOMAINS.values():
        out["instruction"] |= {x.lower() for x in spec["choice_q"]}
        for pools in spec["concepts"].values():
            for kind, pool in zip(("label", "desc", "evidence"), pools):
                out[kind] |= {x.lower() for x in pool}
    for pool in list(CHOICE_Q.values()) + [NOUL_Q] + [s["q"][0] for s in SCORES.values()]:
        out["instruction"] |= {x.lower() for x in split(pool, False)}
    out["frame"] |= {x.lower() for x in TEMPLATES[:-N_HELD_TEMPLATES]}
    for pool in mtd.DISTRACTORS + [mtd.NEGATED]:
        out["frame"] |= {x.lower() for x in split(pool, False)}
    return out


def unseen_strings() -> set:
    """Lower-cased held-out (last) items of every pool and all calib strings."""
    out = set()
    for spec in DOMAINS.values():
        for pools in spec["concepts"].values():
            for pool in pools[:3]:
                out |= {x.lower() for x in split(pool, True)}
    for pool in list(CHOICE_Q.values()) + [NOUL_Q] + [s["q"][1] for s in SCORES.values()] + mtd.DISTRACTORS + [mtd.NEGATED]:
        out |= {x.lower() for x in split(pool, True)}
    out |= {x.lower() for x in TEMPLATES[-N_HELD_TEMPLATES:]}
    out |= {x.lower() for alts in mtd.CALIB_POOLS.values() for x in alts}
    out |= {x.lower() for con in mtd.CALIB_CONCEPTS.values() for x in con}
    return out


def test_no_training_string_is_a_heldout_or_calib_string():
    train, unseen = training_strings(), unseen_strings()
    for kind, strings in train.items():
        assert strings and strings.isdisjoint(unseen), (kind, sorted(strings & unseen)[:5])
    # and the drawn records: no training label / description / instruction is a held-out or calib one
    splits = mtd.make_splits(0, 1500, 600, 600)
    seen = {s.split(":", 1)[1].lower() for r in splits["train"] for s in strings_of(r)}
    unseen_drawn = {s.split(":", 1)[1].lower() for r in splits["heldout"] + splits["calib"] for s in strings_of(r)}
    assert seen.isdisjoint(unseen_drawn), sorted(seen & unseen_drawn)[:5]


def test_training_only_domains():
    """>= 8 training-only domains, >= 45 concepts, each with >= 4 names, >= 3 descriptions, >= 6 evidence
    phrasings, a noul statement, a state key and choice instructions; training uses them (as gold and as
    options), held-out and calib never do."""
    new = mtd.TRAIN_DOMAINS
    assert len(new) >= 8 and not set(new) & set(DOMAINS)
    assert sum(len(spec["concepts"]) for spec in new.values()) >= 45
    for spec in new.values():
        assert spec["key"] and len(spec["choice_q"]) >= 3 and all("{key}" in q for q in spec["choice_q"])
        for labels, descs, evidence, stmt in spec["concepts"].values():
            assert len(set(labels)) >= 4 and len(set(descs)) >= 3 and len(set(evidence)) >= 6 and stmt
    all_labels = [x.lower() for spec in new.values() for c in spec["concepts"].values() for x in c[0]]
    all_labels += [x.lower() for spec in DOMAINS.values() for c in spec["concepts"].values() for x in c[0].split("|")]
    assert len(all_labels) == len(set(all_labels))  # no label name stands for two concepts
    splits = mtd.make_splits(0, 1500, 600, 600)
    new_labels = {x for spec in new.values() for c in spec["concepts"].values() for x in c[0]}
    train_doms = {r["meta"]["domain"] for r in splits["train"]}
    assert set(new) <= train_doms and set(DOMAINS) <= train_doms
    assert any(set(r["questions"]["q"]["criteria"]) & new_labels for r in splits["train"]
               if r["meta"]["type"] == "choice" and r["meta"]["domain"] in DOMAINS)
    for r in splits["heldout"] + splits["calib"]:
        assert r["meta"]["domain"] in DOMAINS
        if r["meta"]["type"] == "choice":
            assert not set(r["questions"]["q"]["criteria"]) & new_labels


def test_more_many_option_questions_with_descriptions_in_training():
    splits = mtd.make_splits(0, 6000, 3000, 30)

    def share(records):
        choice = [r["questions"]["q"] for r in records if r["meta"]["type"] == "choice"]
        return sum(1 for q in choice if len(q["criteria"]) >= 11 and isinstance(q["criteria"], dict)) / len(choice)
    assert 0.22 < share(splits["train"]) < 0.35 and share(splits["heldout"]) < 0.15
    ks = [r["meta"]["k"] for r in splits["train"] if r["meta"]["type"] == "choice"]
    assert max(ks) == 20 and min(ks) == 2
