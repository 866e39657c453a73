"""laya.train with TrainConfig.option_layout (spec 3.9, 7.2): training in, saving and fine-tuning the parallel
option layout; sequential runs save what they always did."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch
import transformers

from laya.questions import check_question
from laya.train import TrainConfig, train

pytestmark = pytest.mark.filterwarnings("ignore:laya-train:RuntimeWarning")  # thin calibration on tiny data
needs_v5 = pytest.mark.skipif(int(transformers.__version__.split(".")[0]) < 5,
                              reason="the parallel option layout needs transformers >= 5")

TEAM = {"type": "choice", "instructions": "Which team handles this?",
        "criteria": {"billing": "charges, refunds and invoices", "outage": "the service is down or slow",
                     "account": "login, password, profile", "other": None}}
STATE = "I was charged twice for my subscription this month and I cannot log in to fix it either."


def examples(n: int = 8):
    from laya.train.data import Example

    team = check_question("team", TEAM)
    urgent = check_question("urgent", {"type": "noul", "instructions": "Is it urgent?"})
    states = ["refund my invoice please", "the site is down again", "I forgot my password", "hello there"]
    out = []
    for i in range(n):
        target = np.zeros(4, dtype=np.float32)
        target[i % 4] = 1.0
        out.append(Example(states[i % 4], team, target))
        out.append(Example(states[i % 4], urgent, np.array([0.8, 0.2] if i % 2 else [0.2, 0.8], dtype=np.float32)))
    return out


def run(base: str, out_dir: str, **overrides) -> dict:
    fields = dict(max_steps=2, micro_batch=4, grad_accum=1, loss="soft-ce", calib_min_bucket_n=5, progress=False,
                  max_len=128, head_max_len=96, head_lr=1e-3)
    fields.update(overrides)
    data = examples()
    train(data, base=base, out_dir=out_dir, config=TrainConfig(**fields), calib_data=data[:6])
    return json.load(open(os.path.join(out_dir, "rl_agent_config.json")))


def with_layout(ckpt: str, out: str, layout: str | None) -> str:
    """A copy of `ckpt` (same weights) whose config says `layout` (None: no option_layout key)."""
    shutil.copytree(ckpt, out)
    path = os.path.join(out, "rl_agent_config.json")
    cfg = json.load(open(path))
    cfg.pop("option_layout", None)
    if layout is not None:
        cfg["option_layout"] = layout
    json.dump(cfg, open(path, "w"))
    return out


@pytest.fixture(scope="module")
def parallel_run(tiny_checkpoint, tmp_path_factory) -> dict:
    """A tiny run with option_layout="parallel", every model forward (training and calibration) recorded."""
    from laya.model import DecisionModel

    calls = []
    forward = DecisionModel.forward

    def spy(self, *args, **kwargs):
        calls.append((self.training, kwargs.get("position_ids"), kwargs.get("option_ids")))
        return forward(self, *args, **kwargs)

    out = str(tmp_path_factory.mktemp("train-parallel") / "run")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(DecisionModel, "forward", spy)
        cfg = run(tiny_checkpoint, out, option_layout="parallel")
    return {"out": out, "cfg": cfg, "calls": calls}


def test_bad_option_layout_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match=r"option_layout 'diagonal'.*'sequential' or 'parallel'"):
        train(str(tmp_path / "missing.jsonl"), out_dir=str(tmp_path / "run"),
              config=TrainConfig(option_layout="diagonal"))
    assert not os.path.exists(tmp_path / "run")


@needs_v5
def test_parallel_run_trains_and_saves_the_parallel_layout(parallel_run):
    import laya

    calls = parallel_run["calls"]
    assert parallel_run["cfg"]["option_layout"] == "parallel"
    assert parallel_run["cfg"]["training"]["laya_train"]["config"]["option_layout"] == "parallel"
    train_calls = [c for c in calls if c[0]]
    assert len(train_calls) == 2 and any(not c[0] for c in calls)  # two steps, then the calibration pass
    for _, positions, options in calls:  # training and calibration forwards both ran the parallel layout
        assert positions is not None and options is not None and positions.shape == options.shape
        assert int(options.max()) >= 2  # every question here has two or four options
    assert max(int(c[2].max()) for c in calls) == 4
    agent = laya.load(parallel_run["out"], device="cpu")
    assert agent.parallel_options and agent.model.option_layout == "parallel"
    answer = agent.predict(STATE, {"team": TEAM})["answers"]["team"]
    assert answer["choice"] in TEAM["criteria"] and abs(sum(answer["probabilities"].values()) - 1) < 1e-3


@needs_v5
def test_the_saved_layout_is_the_one_inference_runs(parallel_run, tmp_path):
    """The parallel-trained weights answer differently when read sequentially, and training's own scoring
    (predict_logits, used for the temperatures) gives the agent's parallel logits."""
    import laya
    from laya.train.loop import predict_logits

    parallel = laya.load(parallel_run["out"], device="cpu")
    sequential = laya.load(with_layout(parallel_run["out"], str(tmp_path / "seq"), "sequential"), device="cpu")
    p_par = parallel.predict(STATE, {"team": TEAM})["answers"]["team"]["probabilities"]
    p_seq = sequential.predict(STATE, {"team": TEAM})["answers"]["team"]["probabilities"]
    assert list(p_par.values()) != pytest.approx(list(p_seq.values()), abs=1e-3)
    from laya.train.data import Example

    team = [Example(STATE, check_question("team", TEAM), np.full(4, 0.25, dtype=np.float32))]
    z_par = predict_logits(parallel.model, parallel.tok, team, parallel.cfg)[0]
    z_seq = predict_logits(sequential.model, sequential.tok, team, sequential.cfg)[0]
    assert not np.allclose(z_par, z_seq, atol=1e-3)
    t = parallel.temperature_by_options.get("choice:3-5", parallel.temperature[0])
    assert list(p_par.values()) == pytest.approx(torch.softmax(torch.tensor(z_par) / t, -1).tolist(), abs=1e-3)


def test_sequential_runs_save_what_they_always_did(tiny_checkpoint, tmp_path):
    """No option_layout key appears in a sequential checkpoint (default or explicit), and batches carry no
    parallel ids."""
    from laya.train import loop

    base = json.load(open(os.path.join(tiny_checkpoint, "rl_agent_config.json")))
    assert "option_layout" not in base
    default = run(tiny_checkpoint, str(tmp_path / "default"))
    explicit = run(tiny_checkpoint, str(tmp_path / "explicit"), option_layout="sequential")
    for cfg in (default, explicit):
        assert "option_layout" not in cfg
        assert set(cfg) == set(base) | {"training"}
    model, tok, cfg = loop.init_model(str(tmp_path / "default"))
    assert model.option_layout == "sequential" and "option_layout" not in cfg
    batch, _ = loop.tensors(tok, loop.build_rows(tok, examples(2), cfg, None))
    assert batch.position_ids is None and batch.option_ids is None


@needs_v5
def test_finetuning_keeps_or_switches_the_layout(parallel_run, tmp_path):
    kept = run(parallel_run["out"], str(tmp_path / "kept"), max_steps=1)
    assert kept["option_layout"] == "parallel"
    switched = run(parallel_run["out"], str(tmp_path / "switched"), max_steps=1, option_layout="sequential")
    assert switched["option_layout"] == "sequential"  # recorded, so the load runs it sequentially
    from laya.train.loop import init_model

    model, _, cfg = init_model(str(tmp_path / "switched"))
    assert model.option_layout == cfg["option_layout"] == "sequential"


@needs_v5
def test_train_rows_and_rows_collate_the_same_parallel_ids(tiny_checkpoint):
    """Compact TrainRows and full Rows collate (sequence.collate) to the same parallel position/option ids."""
    from laya.train import loop

    model, tok, cfg = loop.init_model(tiny_checkpoint, max_len=128, head_max_len=96, option_layout="parallel")
    assert cfg["option_layout"] == model.option_layout == "parallel"
    data = examples(4)
    compact, _ = loop.tensors(tok, loop.build_rows(tok, data, cfg, None), parallel=True)
    full, _ = loop.tensors(tok, loop.make_rows(tok, data, cfg, None), parallel=True)
    assert torch.equal(compact.position_ids, full.position_ids) and torch.equal(compact.option_ids, full.option_ids)
    assert torch.equal(compact.input_ids, full.input_ids)


@needs_v5
def test_parallel_needs_a_modernbert_encoder(tmp_path):
    from laya.train import loop

    try:
        loop.minilm_dir()
    except FileNotFoundError:
        pytest.skip("no all-MiniLM-L6-v2 directory (a BERT encoder) here")
    with pytest.raises(ValueError, match="needs a ModernBERT encoder"):
        train(examples(), base="minilm", out_dir=str(tmp_path / "run"), config=TrainConfig(option_layout="parallel"))
    assert not os.path.exists(tmp_path / "run")


def test_cli_option_layout_flag(capsys, tmp_path):
    from laya.train.cli import build_parser, main

    p = build_parser()
    assert p.parse_args(["--data", "d"]).option_layout is None
    assert p.parse_args(["--data", "d", "--option-layout", "parallel"]).option_layout == "parallel"
    with pytest.raises(SystemExit):
        p.parse_args(["--data", "d", "--option-layout", "diagonal"])
    capsys.readouterr()
    data = tmp_path / "t.csv"
    data.write_text("text,label\na,x\nb,y\n")
    assert main(["--data", str(data), "--dry-run", "--option-layout", "parallel"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["option_layout"] == "parallel"
