"""laya.shortlist's embedding shortlist (spec §1.12): shortlist_choice, predict_shortlist(_batch),
embed_fn_from_agent, cached_embed_fn."""

from __future__ import annotations

import numpy as np
import pytest

from laya.shortlist import (cached_embed_fn, embed_fn_from_agent, predict_shortlist, predict_shortlist_batch,
                            shortlist_choice)

WORDS = ("apple", "banana", "cherry", "durian", "elder", "fig")


class FakeEmbed:
    """Deterministic bag-of-words vectors over WORDS; records every call."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return np.array([[t.lower().split().count(w) for w in WORDS] for t in texts],
                        dtype=np.float64)


# ---- shortlist_choice -----------------------------------------------------------------------------------

def test_ranking_keeps_top_k_in_caller_order():
    embed = FakeEmbed()
    criteria = ["cherry", "banana", "durian", "apple"]
    kept = shortlist_choice("apple apple banana", criteria, embed, k=2)
    assert kept == ["banana", "apple"]  # apple ranks first, but the caller's order is kept
    assert len(embed.calls) == 1 and embed.calls[0][0] == "apple apple banana"


def test_dict_criteria_keep_descriptions_and_scores():
    criteria = {"x": "apple", "y": "cherry", "z": "banana banana"}
    kept, scores = shortlist_choice("apple banana", criteria, FakeEmbed(), k=2, return_scores=True)
    assert kept == {"x": "apple", "z": "banana banana"}
    assert list(scores) == ["x", "y", "z"]  # every option scored, caller order
    assert scores["y"] == 0.0
    assert scores["x"] == pytest.approx(scores["z"])  # "x: apple" vs "z: banana banana": both at 45 degrees


def test_option_text_is_label_plus_description():
    embed = FakeEmbed()
    shortlist_choice("a fig", {"fig": None, "b": "apple", "c": ""}, embed, k=1)
    assert embed.calls[0][1:] == ["fig", "b: apple", "c"]


def test_instructions_prefix_the_state():
    embed = FakeEmbed()
    kept = shortlist_choice("nothing here", ["apple", "banana", "cherry"], embed, k=1, instructions="cherry please")
    assert kept == ["cherry"]
    assert embed.calls[0][0] == "cherry please\n\nnothing here"


def test_ties_go_to_the_earlier_option():
    assert shortlist_choice("zzz", ["elder", "fig", "apple"], FakeEmbed(), k=2) == ["elder", "fig"]


def test_passthrough_skips_embedding():
    embed = FakeEmbed()
    criteria = {"a": "apple", "b": "banana"}
    assert shortlist_choice("apple", criteria, embed, k=2) == criteria
    assert shortlist_choice("apple", ("apple", "fig"), embed, k=5) == ["apple", "fig"]
    assert embed.calls == []
    kept, scores = shortlist_choice("apple", criteria, embed, k=2, return_scores=True)
    assert kept == criteria and scores["a"] > scores["b"] and len(embed.calls) == 1


def test_dict_and_list_states():
    kept = shortlist_choice({"msg": "apple"}, ["banana", "apple"], lambda ts: np.array(
        [[float('"apple"' in t or t == "apple"), 1.0] for t in ts]), k=1)
    assert kept == ["apple"]


def test_cosines_are_clipped():
    v = [0.9034701816518086, 0.09401229776087457, -0.7434992493538084]  # v.v / |v|^2 = 1.0000000000000002

    def embed(texts):
        return np.array([[-x for x in v] if t == "anti" else v for t in texts])

    _, scores = shortlist_choice("s", ["same", "anti"], embed, k=1, return_scores=True)
    assert scores == {"same": 1.0, "anti": -1.0}


def test_zero_vectors_score_zero():
    _, scores = shortlist_choice("s", ["a", "b"], lambda ts: np.array([[0.0, 0.0] if t == "a" else [1.0, 0.0]
                                                                        for t in ts]),
                                 k=1, return_scores=True)
    assert scores == {"a": 0.0, "b": 1.0}


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3", None])
def test_bad_k(k):
    with pytest.raises(ValueError, match=r"k must be a positive integer.*" + repr(k).replace(".", r"\.")):
        shortlist_choice("s", ["a", "b"], FakeEmbed(), k=k)


@pytest.mark.parametrize("output, message", [
    (lambda ts: np.ones((len(ts),)), r"shape \(3,\) for 3 texts"),
    (lambda ts: np.ones((len(ts) - 1, 4)), r"shape \(2, 4\) for 3 texts"),
    (lambda ts: np.ones((len(ts), 0)), r"shape \(3, 0\)"),
    (lambda ts: np.full((len(ts), 2), np.nan), "non-finite"),
    (lambda ts: [["a", "b"]] * len(ts), "numeric array"),
])
def test_bad_embed_output(output, message):
    with pytest.raises(ValueError, match=message):
        shortlist_choice("s", ["a", "b"], output, k=1)


def test_bad_inputs():
    with pytest.raises(TypeError, match="callable"):
        shortlist_choice("s", ["a", "b"], "not a function", k=1)
    with pytest.raises(TypeError, match="None"):
        shortlist_choice(None, ["a", "b"], FakeEmbed(), k=1)
    # laya's question validation, with its messages
    with pytest.raises(ValueError, match=r"^shortlist_choice: 'criteria' has no options"):
        shortlist_choice("s", [], FakeEmbed())
    with pytest.raises(ValueError, match="appears more than once"):
        shortlist_choice("s", ["a", "a"], FakeEmbed())
    with pytest.raises(ValueError, match="not hashable|must be a string"):
        shortlist_choice("s", [["a"]], FakeEmbed())


# ---- predict_shortlist on the tiny checkpoint ----------------------------------------------------------------

def _questions(n: int = 30) -> dict:
    return {
        "pick": {"type": "choice", "instructions": "Which fruit?",
                 "criteria": {f"{WORDS[i % len(WORDS)]}{i}": f"{WORDS[i % len(WORDS)]} kind {i}" for i in range(n)}},
        "yes": {"type": "noul", "instructions": "Is it ripe?"},
        "few": {"type": "choice", "instructions": "Colour?", "criteria": ["red", "green"]},
        "level": {"type": "score", "instructions": "How sweet?", "criteria": ["sour", "sweet"]},
    }


def test_predict_shortlist(agent):
    embed = FakeEmbed()
    questions = _questions()
    result = predict_shortlist(agent, "a ripe cherry", questions, embed, k=5)
    assert len(embed.calls) == 1  # one embedding call for all narrowed questions
    assert list(result["answers"]) == list(questions)
    block = result["shortlist"]
    assert set(block) == {"pick", "few"}  # every choice question, narrowed or not
    pick = block["pick"]
    assert set(pick) == {"kept", "scores", "k", "options", "passthrough"}
    assert pick["k"] == 5 and pick["options"] == 30 and pick["passthrough"] is False
    assert len(pick["kept"]) == 5 and all(label.startswith("cherry") for label in pick["kept"])
    labels = list(questions["pick"]["criteria"])
    assert pick["kept"] == [label for label in labels if label in pick["kept"]]  # caller order
    assert list(pick["scores"]) == labels and all(-1.0 <= s <= 1.0 for s in pick["scores"].values())
    probs = result["answers"]["pick"]["probabilities"]
    assert list(probs) == labels
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-3)
    assert all(probs[label] == 0.0 for label in labels if label not in pick["kept"])
    assert result["answers"]["pick"]["choice"] in pick["kept"]
    assert block["few"] == {"kept": ["red", "green"], "scores": {}, "k": 5, "options": 2, "passthrough": True}

    # the narrowed call is exactly a predict on the kept options
    narrowed = dict(questions, pick=dict(questions["pick"], criteria={
        label: questions["pick"]["criteria"][label] for label in pick["kept"]}))
    direct = agent.predict("a ripe cherry", narrowed)
    assert {k: v for k, v in result["answers"]["pick"]["probabilities"].items() if v} == \
        {k: v for k, v in direct["answers"]["pick"]["probabilities"].items() if v}
    assert result["answers"]["yes"] == direct["answers"]["yes"]
    assert result["usage"] == direct["usage"]


def test_predict_shortlist_passthrough_and_kwargs(agent):
    embed = FakeEmbed()
    questions = _questions(8)
    result = predict_shortlist(agent, "text", questions, embed, k=20, min_confidence=0.0)
    assert embed.calls == []
    assert result["shortlist"]["pick"]["passthrough"] is True
    plain = agent.predict("text", questions, min_confidence=0.0)
    assert result["answers"] == plain["answers"]
    assert result["answers"]["pick"]["abstention"] == "passed"


def test_predict_shortlist_option_order_dropped(agent):
    questions = _questions(6)
    questions["pick"]["option_order"] = [5, 4, 3, 2, 1, 0]
    result = predict_shortlist(agent, "apple", questions, FakeEmbed(), k=3)
    assert result["shortlist"]["pick"]["option_order_dropped"] is True


def test_predict_shortlist_errors(agent):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        predict_shortlist(agent, "s", _questions(), FakeEmbed(), k=0)
    with pytest.raises(ValueError, match=r"^question 'bad': "):
        predict_shortlist(agent, "s", {"bad": {"type": "choice", "instructions": "x", "criteria": []}}, FakeEmbed())
    with pytest.raises(TypeError):
        predict_shortlist(agent, None, _questions(), FakeEmbed())


def test_predict_shortlist_batch(agent):
    embed = FakeEmbed()
    states = ["a ripe cherry", "banana bread", "a ripe cherry"]
    results = predict_shortlist_batch(agent, states, _questions(), embed, k=4)
    assert len(embed.calls) == 1
    assert results[0] == results[2]
    assert results[0] == predict_shortlist(agent, states[0], _questions(), FakeEmbed(), k=4)
    assert all(label.startswith("banana") for label in results[1]["shortlist"]["pick"]["kept"])


# ---- embed_fn_from_agent and cached_embed_fn ---------------------------------------------------------

def test_embed_fn_from_agent(agent):
    embed = embed_fn_from_agent(agent, batch_size=2)
    texts = ["hello world", "a much longer text about fruit and apples", "", "hello world"]
    out = embed(texts)
    assert out.shape == (4, agent.model.encoder.config.hidden_size) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(out[0], out[3], atol=1e-5)
    np.testing.assert_allclose(embed(texts), out, atol=1e-6)  # deterministic
    np.testing.assert_allclose(embed(["hello world"])[0], out[0], atol=1e-4)  # padding does not leak in
    assert not np.allclose(out[0], out[1])
    assert embed([]).shape == (0, out.shape[1])
    with pytest.raises(TypeError, match="list of texts"):
        embed("hello")
    with pytest.raises(TypeError, match="text 1 is int"):
        embed(["a", 3])


def test_embed_fn_from_agent_truncates_and_validates(agent):
    short = embed_fn_from_agent(agent, max_length=4)
    long = " ".join(["apple"] * 50)
    np.testing.assert_allclose(short([long]), short(["apple apple apple"]), atol=1e-5)  # [CLS] 2 tokens [SEP]
    with pytest.raises(ValueError, match="max_length must be an integer >= 2, got 1"):
        embed_fn_from_agent(agent, max_length=1)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        embed_fn_from_agent(agent, batch_size=0)
    with pytest.raises(TypeError, match="needs a torch laya Agent"):
        embed_fn_from_agent(object())


def test_agent_embeddings_drive_predict_shortlist(agent):
    embed = cached_embed_fn(embed_fn_from_agent(agent))
    questions = _questions()
    first = predict_shortlist(agent, "a ripe cherry", questions, embed, k=5)
    info = embed.cache_info()
    assert info.misses == 31 and info.hits == 0  # the query and 30 options
    second = predict_shortlist(agent, "a ripe cherry", questions, embed, k=5)
    assert second == first
    assert embed.cache_info().hits == 31 and embed.cache_info().misses == 31


def test_cached_embed_fn_counts_and_lru():
    inner = FakeEmbed()
    embed = cached_embed_fn(inner, maxsize=3)
    out = embed(["apple", "banana", "apple"])
    assert inner.calls == [["apple", "banana"]]  # misses only, each once, in one call
    assert embed.cache_info() == (1, 2, 3, 2)
    np.testing.assert_array_equal(out, FakeEmbed()(["apple", "banana", "apple"]))
    embed(["banana", "cherry"])
    assert inner.calls[-1] == ["cherry"]
    assert embed.cache_info() == (2, 3, 3, 3)
    embed(["durian"])  # evicts the least recently used: apple
    assert embed.cache_info().currsize == 3
    embed(["apple", "banana"])
    assert inner.calls[-1] == ["apple"]
    assert embed.cache_info().hits == 3 and embed.cache_info().misses == 5
    embed.cache_clear()
    assert embed.cache_info() == (0, 0, 3, 0)
    embed(["apple"])
    assert inner.calls[-1] == ["apple"]
    unbounded = cached_embed_fn(FakeEmbed(), maxsize=None)
    unbounded([f"t{i}" for i in range(5000)])
    assert unbounded.cache_info().currsize == 5000 and unbounded.cache_info().maxsize is None


def test_cached_embed_fn_errors():
    with pytest.raises(TypeError, match="callable"):
        cached_embed_fn(None)
    with pytest.raises(ValueError, match="maxsize must be an integer >= 1, got 0"):
        cached_embed_fn(FakeEmbed(), maxsize=0)
    embed = cached_embed_fn(lambda ts: np.ones((len(ts) + 1, 2)))
    with pytest.raises(ValueError, match=r"shape \(2, 2\) for 1 texts"):
        embed(["a"])
    assert embed.cache_info().currsize == 0  # a failed call caches nothing
    with pytest.raises(TypeError, match="list of texts"):
        embed("a")
    sizes = iter([2, 3])
    changing = cached_embed_fn(lambda ts: np.ones((len(ts), next(sizes))))
    changing(["a"])
    with pytest.raises(ValueError, match="cache_clear"):
        changing(["a", "b"])


# ---- the abstention gate of a narrowed answer (spec §2.4: bucket from len(probabilities)) ----------------

GATE = {"choice:3-5": 0.0, "choice:11+": 0.99}


def test_predict_shortlist_gates_the_widened_answer(agent):
    from laya.confidence import apply_confidence_gate, resolve_min_confidence

    result = predict_shortlist(agent, "a ripe cherry", _questions(30), FakeEmbed(), k=4, min_confidence=GATE)
    pick = result["answers"]["pick"]
    assert len(pick["probabilities"]) == 30 and result["shortlist"]["pick"]["passthrough"] is False
    assert pick["abstention_threshold"] == 0.99 == resolve_min_confidence(pick, GATE)  # choice:11+, not 3-5
    assert pick["abstention"] == "abstained" and pick["low_confidence"] is True
    import copy
    regated = copy.deepcopy(result)
    apply_confidence_gate([regated], GATE)  # compat-0.4.15 R-CONF-1: a list of results, in place
    assert regated == result  # consistent with the gate run on the returned result
    # the other way round: a 3-5 threshold the narrowed predict applied does not leak in
    loose = predict_shortlist(agent, "a ripe cherry", _questions(30), FakeEmbed(), k=4,
                              min_confidence={"choice:3-5": 0.99, "choice:11+": 0.0})
    assert loose["answers"]["pick"]["abstention"] == "passed" and "low_confidence" not in loose["answers"]["pick"]
    assert loose["answers"]["pick"]["abstention_threshold"] == 0.0
    batch = predict_shortlist_batch(agent, ["a ripe cherry"], _questions(30), FakeEmbed(), k=4, min_confidence=GATE)
    assert batch[0] == result
    plain = predict_shortlist(agent, "a ripe cherry", _questions(30), FakeEmbed(), k=4)
    assert "abstention" not in plain["answers"]["pick"]  # no gate asked: nothing written


def test_a_refused_tournament_round_names_the_callers_question(agent):
    from laya.shortlist import predict_tournament_batch

    long = "a rather long description " * 3
    questions = {"refund_reason": {"type": "choice", "instructions": "pick",
                                   "criteria": {f"opt {i}": long for i in range(6)}}}
    with pytest.raises(ValueError) as e:
        predict_tournament_batch(agent, ["hello"], questions, group_size=5, max_len=16)
    assert str(e.value).startswith("question 'refund_reason' (a tournament round over 3 of its 6 options): ")
    assert "'t0." not in str(e.value)
