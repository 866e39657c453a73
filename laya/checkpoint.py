"""Finding, verifying and reading a checkpoint in the published laya layout.

    rl_agent_config.json   decision-head + runtime config
    model.safetensors      all weights (fp16 on disk)
    tokenizer/             Hugging Face tokenizer files
    encoder/               the encoder's config.json
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import warnings
from typing import Any

from .parallel_layout import check_layout
from .registry import CONFIG_FILE
from .revisions import digests_from_env, file_sha256, is_model_keyed, resolve_revision, snapshot_revision, \
    verify_digests
from .sequence_names import uses_parallel_layout

WEIGHTS_FILE = "model.safetensors"
REQUIRED_CONFIG_KEYS = ("encoder", "head_layers")
REQUIRED_PREFIXES = ("encoder.", "type_emb.", "scorer.", "act_head.")
MAX_LISTED_MISMATCHES = 5


def hub_allow_patterns(subfolder: str | None) -> list[str]:
    prefix = f"{subfolder.strip('/')}/" if subfolder else ""
    return [prefix + CONFIG_FILE, prefix + WEIGHTS_FILE, prefix + "tokenizer/*", prefix + "encoder/*"]


def resolve_checkpoint_dir(model_id_or_path: str, subfolder: str | None = None, revision: str | None = None,
                           token: str | None = None, weights: bool = True) -> tuple[str, str | None]:
    """Local directory of the checkpoint (downloading from the Hub when needed) and its revision."""
    arg = os.path.expanduser(str(model_id_or_path))
    if os.path.exists(arg):
        root, sha = arg, snapshot_revision(arg) or _requested(revision)
    elif arg.startswith(("/", "./", "../")) or os.path.isabs(arg):
        raise FileNotFoundError(f"Local model path not found: {str(model_id_or_path)!r}. Check that the directory "
                                "exists and that training saved the model successfully.")
    else:
        root, sha = hub_snapshot(arg, subfolder, revision, token, weights)
    model_dir = os.path.join(root, subfolder) if subfolder else root
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"Subfolder {subfolder!r} not found in {str(model_id_or_path)!r}.")
    return model_dir, sha


def _requested(revision: str | None) -> str | None:
    """A local directory has no Hub revision to resolve: the caller's own, stripped, is what it reports."""
    return revision.strip() or None if isinstance(revision, str) else None


def hub_snapshot(repo_id: str, subfolder: str | None, revision: str | None, token: str | None,
                 weights: bool) -> tuple[str, str | None]:
    """(snapshot directory, its revision); `revision=` reaches snapshot_download only when one applies."""
    from huggingface_hub import snapshot_download

    wanted = resolve_revision(repo_id, revision)
    patterns = hub_allow_patterns(subfolder)
    if not weights:
        patterns = [p for p in patterns if not p.endswith(WEIGHTS_FILE)]
    pinned = {"revision": wanted} if wanted is not None else {}
    root = snapshot_download(repo_id=repo_id, token=token or os.environ.get("HF_TOKEN"), allow_patterns=patterns,
                             **pinned)
    return root, snapshot_revision(root) or wanted


def parse_digest_env(model: Any = None) -> dict | None:
    """LAYA_SHA256_DIGESTS for one load: a flat {relpath: hex} map as given; a model-keyed map (every value
    a map, the Router's form) gives the entry of `model`'s registry name or alias, else nothing to check."""
    digests = digests_from_env()
    if digests is None:
        return None
    if is_model_keyed(digests):
        from .registry import canonical_name

        name = canonical_name(model) if isinstance(model, str) else None
        by_name = {canonical_name(k) or k: v for k, v in digests.items() if isinstance(k, str)}
        return by_name.get(name) if name else None
    return digests


def load_config(model_dir: str, name: str | None = None) -> dict:
    """rl_agent_config.json, checked; `name` (the id the caller loaded) is what the errors show."""
    shown = str(name) if name is not None else model_dir
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"Incompatible model: {shown!r} does not contain {CONFIG_FILE!r}. That file ships with the weights "
            "of a Laya checkpoint, so load one of those (e.g. 'convaiinnovations/laya') or a directory your own "
            "training run wrote.")
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except (ValueError, RecursionError) as e:  # (JSON and UTF-8 errors are ValueErrors)
        raise ValueError(f"Incompatible model: {path} is not valid UTF-8 JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"Incompatible model: {path} must hold a JSON object, got {type(cfg).__name__}")
    missing = [k for k in REQUIRED_CONFIG_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"Incompatible model: {path} lacks required keys {missing}")
    check_temperature_list(cfg.get("temperature", [1.0, 1.0, 1.0]), shown)
    uses_parallel_layout(cfg)  # raises the published text for an unknown layout, before our fuller check
    check_layout(cfg.get("option_layout"), path)
    return cfg


def check_temperature_list(value: Any, shown: str) -> None:
    """A config `temperature` is a list/tuple of 3 entries, one per question type (entries that are not usable
    numbers are clamped to 1.0 with the load warning, §3.8)."""
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ValueError(f"Incompatible model: {shown!r} temperature must be a list of 3 floats, got {value!r}")


def check_weights_file(model_dir: str, name: str | None = None) -> str:
    """The path of model.safetensors, or the published FileNotFoundError."""
    path = os.path.join(model_dir, WEIGHTS_FILE)
    if not os.path.isfile(path):
        shown = str(name) if name is not None else model_dir
        raise FileNotFoundError(f"Incompatible model: {WEIGHTS_FILE!r} not found in {shown!r}.")
    return path


def fixed_tokenizer_config(config: dict) -> dict | None:
    """The tokenizer_config.json that transformers 4.x and 5.x both load, or None when no fix is needed."""
    fixed = dict(config)
    changed = False
    if fixed.get("tokenizer_class") in (None, "TokenizersBackend"):
        fixed["tokenizer_class"] = "PreTrainedTokenizerFast"
        fixed.pop("backend", None)
        fixed.pop("is_local", None)
        changed = True
    extra = fixed.get("extra_special_tokens")
    if isinstance(extra, list):
        fixed["extra_special_tokens"] = {f"extra_{i}": t for i, t in enumerate(extra)}
        changed = True
    return fixed if changed else None


def usable_tokenizer_dir(tokenizer_dir: str) -> str:
    """A directory to load the tokenizer from; a fixed private copy when the config needs the fix-up.

    The caller's files (often read-only Hub-cache symlinks) are never rewritten.
    """
    path = os.path.join(tokenizer_dir, "tokenizer_config.json")
    if not os.path.isfile(path):
        return tokenizer_dir
    with open(path, encoding="utf-8") as f:
        fixed = fixed_tokenizer_config(json.load(f))
    if fixed is None:
        return tokenizer_dir
    stamp = f"{os.path.realpath(tokenizer_dir)}:{os.path.getmtime(path)}"
    cache_root = os.path.join(tempfile.gettempdir(), "laya-tokenizers")
    target = os.path.join(cache_root, hashlib.sha256(stamp.encode()).hexdigest()[:16])
    if os.path.isfile(os.path.join(target, "tokenizer_config.json")):
        return target
    staging = tempfile.mkdtemp(dir=_ensure_dir(cache_root))
    for name in os.listdir(tokenizer_dir):
        src = os.path.join(tokenizer_dir, name)
        if os.path.isfile(src) and name != "tokenizer_config.json":
            shutil.copyfile(src, os.path.join(staging, name))
    with open(os.path.join(staging, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(fixed, f, ensure_ascii=False, indent=2)
    try:
        os.replace(staging, target)
    except OSError:  # another process won the race: use its copy
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _ensure_dir(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    return path


_tokenizers: dict[tuple[str, float], Any] = {}
_tokenizers_lock = threading.Lock()


def load_tokenizer(model_dir: str, encoder_name: str) -> Any:
    """The checkpoint's tokenizer, cached per (directory, config mtime)."""
    from transformers import AutoTokenizer

    tokenizer_dir = os.path.join(model_dir, "tokenizer")
    if not os.path.isdir(tokenizer_dir):
        return AutoTokenizer.from_pretrained(encoder_name)
    config_path = os.path.join(tokenizer_dir, "tokenizer_config.json")
    key = (os.path.realpath(tokenizer_dir), os.path.getmtime(config_path) if os.path.exists(config_path) else 0.0)
    with _tokenizers_lock:
        if key not in _tokenizers:
            try:
                source = usable_tokenizer_dir(tokenizer_dir)
            except OSError as e:
                warnings.warn(f"laya: could not prepare a fixed tokenizer config ({e}); loading it as is",
                              RuntimeWarning, stacklevel=2)
                source = tokenizer_dir
            _tokenizers[key] = AutoTokenizer.from_pretrained(source)
        return _tokenizers[key]


def check_state_dict(model: Any, state: dict) -> None:
    """Refuse a weight file that does not match the model, naming the bad keys."""
    missing_prefixes = [p for p in REQUIRED_PREFIXES if not any(k.startswith(p) for k in state)]
    if missing_prefixes:
        raise ValueError(f"Incompatible checkpoint: no weights with prefixes {missing_prefixes}; "
                         "this is not a laya DecisionModel weight file")
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    shapes = [f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
              for k in expected if k in state and tuple(state[k].shape) != tuple(expected[k].shape)]
    problems = []
    for title, items in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", shapes)):
        if items:
            shown = ", ".join(items[:MAX_LISTED_MISMATCHES])
            more = f" (+{len(items) - MAX_LISTED_MISMATCHES} more)" if len(items) > MAX_LISTED_MISMATCHES else ""
            problems.append(f"{len(items)} {title}: {shown}{more}")
    if problems:
        raise ValueError("Incompatible checkpoint: the weights do not match rl_agent_config.json and "
                         "encoder/config.json; " + "; ".join(problems))


def load_weights(model: Any, model_dir: str, device: Any = "cpu", assign: bool = False) -> None:
    """model.safetensors into `model`, read onto `device`. assign=True: the read tensors, cast one by one to the
    model's dtypes, become its parameters and persistent buffers (its other buffers stay where the build made them,
    for `model.to` to move); else they are copied into the model's own."""
    from safetensors.torch import load_file

    state = load_file(check_weights_file(model_dir), device=str(device))
    check_state_dict(model, state)
    if not assign:
        model.load_state_dict(state, strict=True)
        return
    expected = model.state_dict()
    for name in list(state):  # in place: each 16-bit tensor is freed once its cast exists
        state[name] = state[name].to(expected[name].dtype)
    del expected
    model.load_state_dict(state, strict=True, assign=True)
