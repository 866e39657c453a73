"""The `laya` command: route a text to a checkpoint, or answer a preset's (or a file's) questions about it.

    laya Necesito ayuda con mi factura                   # routing only: which checkpoint, and why (no download)
    laya I was charged twice --preset triage [--json]    # answer the triage questions (auto-routed)
    laya "some request" --predict                        # answer the router questions (state key `request`)
    laya --batch texts.txt --preset email --json         # one text per line -> JSONL
    laya                                                 # interactive: one text per line (laya> prompt)
    laya demo                                            # the triage preset with the bundled laya-mini
    laya serve|train|eval ...                            # the HTTP server, laya-train, laya-evals
    laya prebuild --model PATH [--backend tilelang|compile] [--cache-dir DIR]   # kernels for an image
Exit codes: 0 success, 2 bad arguments or input, or a failure while loading or answering.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from typing import Any

from .cli_output import batch_line, show_answers, show_decision, sort_note
from .cli_questions import load_questions
from .presets import PRESET_STATE_KEYS, PRESETS, router_questions
from .registry import ALIASES, CONFIG_FILE, DEFAULT_MODELS, LAYA_MINI, canonical_name

DEMO_TEXT = ("Hi, I was charged twice for my March invoice and nobody has answered my last two emails. "
             "Please refund the duplicate charge today or I will cancel my subscription.")
BUNDLED_GRAPH = "laya.onnx"  # laya-mini's graph, its weights read from its model.safetensors (onnx_link)
CUSTOM_MODEL = "custom"  # the Router name a checkpoint directory given to --model is registered under
ROUTER_STATE_KEY = "request"  # the state key of --predict alone (the router questions) and of --questions files
HELP_LINE = ("Check that laya's dependencies are installed (pip install laya) and that the Hugging Face Hub is "
             "reachable, or that the checkpoint is already in the local cache.")


# ---- argument types --------------------------------------------------------------------------------

def model_name(value: str) -> str | None:
    """--model: a checkpoint name or alias (any case) -> its canonical name; 'auto' -> None (routing decides).
    A directory holding a checkpoint is passed through (our extension, used by `laya demo`)."""
    text = str(value).strip()
    if text.lower() == "auto":
        return None
    name = canonical_name(text)
    if name is not None:
        return name
    path = os.path.expanduser(text)
    if text and os.path.isfile(os.path.join(path, CONFIG_FILE)):
        return path
    raise argparse.ArgumentTypeError(
        f"unknown model {value!r}; use a checkpoint ({', '.join(DEFAULT_MODELS)}), an alias "
        f"({', '.join(sorted(ALIASES))}) or 'auto'")


def min_confidence_value(value: str) -> float:
    """--min-confidence: checked by the library's check_min_confidence (0 and 1 are thresholds)."""
    from .confidence import check_min_confidence

    try:
        parsed: Any = float(value)
    except (TypeError, ValueError):
        parsed = value
    try:
        return check_min_confidence(parsed)
    except (TypeError, ValueError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="laya", description="Typed decisions about a text, in one forward pass. "
                                "Without --predict/--preset/--questions it only shows which checkpoint would answer.")
    p.add_argument("text", nargs="*", help="the state text (several words are joined); omit for interactive mode")
    p.add_argument("--predict", action="store_true",
                   help="answer questions (the router questions unless --preset/--questions chooses others)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="a ready-made question set")
    p.add_argument("--questions", metavar="FILE", help="JSON question dict, or {\"state_key\": ..., \"questions\": {...}}")
    p.add_argument("--model", type=model_name, default=None,
                   help=f"{', '.join(DEFAULT_MODELS)} (or an alias), or auto")
    p.add_argument("--task", default=None, help="route by task, e.g. typed-decisions")
    p.add_argument("--lang", default=None, help="language code of the text (routes, and selects language temperatures)")
    p.add_argument("--lang-guess", default=None, metavar="CODE", help="language to assume when --lang is not given")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N, mps or auto")
    p.add_argument("--backend", default=None, help="inference backend passed to laya.load (eager, compile, ...)")
    p.add_argument("--onnx-path", default=None, help="ONNX graph for --backend onnx (default laya.onnx)")
    p.add_argument("--aoti-path", default=None, help="AOTInductor package (.pt2) for --backend aoti")
    p.add_argument("--max-len", type=int, default=None)
    p.add_argument("--head-max-len", type=int, default=None)
    p.add_argument("--min-confidence", type=min_confidence_value, default=None, metavar="P",
                   help="abstain below this answer confidence (needs an answering mode)")
    p.add_argument("--batch", metavar="FILE", help="one request per line; '-' reads stdin")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--sort-by-length", action="store_true")
    p.add_argument("--json", action="store_true", help="print JSON (JSONL with --batch)")
    p.add_argument("--explain", action="store_true", help="show the routing diagnostics (routing mode only)")
    return p


# ---- the pieces every mode shares ------------------------------------------------------------------

def answering(args: argparse.Namespace) -> bool:
    return bool(args.predict or args.preset or args.questions)


def resolve_questions(args: argparse.Namespace) -> tuple[dict, str]:
    """(questions, state key): --preset, --questions FILE, or the router questions for --predict alone."""
    if args.preset:
        return PRESETS[args.preset](), PRESET_STATE_KEYS[args.preset]
    if args.questions:
        return load_questions(args.questions)
    return router_questions(), ROUTER_STATE_KEY


def budget_overrides(args: argparse.Namespace) -> dict:
    """max_len / head_max_len, only those given."""
    return {k: v for k, v in (("max_len", args.max_len), ("head_max_len", args.head_max_len)) if v is not None}


def abstention_override(args: argparse.Namespace) -> dict:
    """min_confidence, only when given."""
    return {} if args.min_confidence is None else {"min_confidence": args.min_confidence}


def routing_controls(args: argparse.Namespace) -> dict:
    """The four routing controls, None when unset (a --model directory is routed as CUSTOM_MODEL)."""
    model = args.model
    if model is not None and model not in DEFAULT_MODELS:
        model = CUSTOM_MODEL
    return {"model": model, "task": args.task, "lang": args.lang, "lang_guess": args.lang_guess}


def bundled_graph(args: argparse.Namespace) -> str | None:
    """laya-mini's shipped ONNX graph, when it answers this call: the bundled checkpoint on the CPU with no
    --backend chosen and onnxruntime installed (logits within 2e-5 of eager fp32, no torch to import)."""
    if args.backend or args.model is None or (args.device or "cpu").strip().lower() != "cpu":
        return None
    if os.path.realpath(os.path.expanduser(args.model)) != os.path.realpath(LAYA_MINI):
        return None
    graph = os.path.join(LAYA_MINI, BUNDLED_GRAPH)
    if not os.path.isfile(graph):
        return None
    import importlib.util

    return graph if importlib.util.find_spec("onnxruntime") is not None else None


def backend_kwargs(args: argparse.Namespace) -> dict | None:
    """laya.load keywords for --backend and the exported-graph paths (each path only with its backend)."""
    paths = {"onnx": ("onnx_path", args.onnx_path), "aoti": ("aoti_path", args.aoti_path)}
    for backend, (key, value) in paths.items():
        if value is not None and (args.backend or "").strip().lower() != backend:
            raise ValueError(f"--{key.replace('_', '-')} {value!r} needs --backend {backend} "
                             f"(got --backend {args.backend!r})")
    graph = bundled_graph(args)
    if graph is not None:
        return {"backend": "onnx", "onnx_path": graph}
    if not args.backend:
        return None
    kwargs = {"backend": args.backend}
    key, value = paths.get(args.backend.strip().lower(), (None, None))
    if value is not None:
        kwargs[key] = value
    return kwargs


def make_router(args: argparse.Namespace) -> Any:
    """The one place the CLI builds its Router (tests replace it)."""
    import laya

    extra: dict = {}
    if args.model is not None and args.model not in DEFAULT_MODELS:
        extra["models"] = {CUSTOM_MODEL: args.model}
    agent_kwargs = backend_kwargs(args)
    if agent_kwargs:
        extra["agent_kwargs"] = agent_kwargs
    return laya.Router(device=args.device, preload=False, **extra)


def takes_keyword(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def report_failure(error: BaseException) -> int:
    """The published error lines on stderr; every failure exits 2."""
    if isinstance(error, (ValueError, TypeError)):
        print(f"laya: {error}", file=sys.stderr)
    else:
        print(f"laya: could not run Laya ({error}).", file=sys.stderr)
        print(HELP_LINE, file=sys.stderr)
    return 2


FAILURES = (ValueError, TypeError, ImportError, OSError, RuntimeError)


# ---- modes -------------------------------------------------------------------------------------------

def run(text: str, args: argparse.Namespace, router: Any = None) -> int:
    """One text: its routing decision, or its answers."""
    try:
        router = router if router is not None else make_router(args)
        controls = routing_controls(args)
        if not answering(args):
            decision = router.route({"text": text}, **controls, **({"explain": True} if args.explain else {}))
            if args.json:
                print(json.dumps(dict(decision), indent=2))
            else:
                show_decision(decision)
            return 0
        questions, state_key = resolve_questions(args)
        result = router.predict({state_key: text}, questions, **controls, **budget_overrides(args),
                                **abstention_override(args))
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            show_answers(result)
        return 0
    except FAILURES as e:
        return report_failure(e)


def interactive(args: argparse.Namespace) -> int:
    """One text per line until quit/exit, an empty line or EOF; 2 when any line failed."""
    router, code = None, 0
    while True:
        try:
            line = input("laya> ")
        except EOFError:
            break
        text = line.strip()
        if not text or text in ("quit", "exit"):
            break
        if router is None:
            try:
                router = make_router(args)
            except FAILURES as e:
                return report_failure(e)
        code = max(code, run(text, args, router))
    return code


# ---- batch mode ----------------------------------------------------------------------------------------

def read_batch_lines(source: str) -> list[str]:
    """Stripped non-blank lines of a UTF-8 file ('-' = stdin)."""
    if source == "-":
        raw = getattr(sys.stdin, "buffer", None)  # UTF-8 whatever the locale (a replaced stdin may have no bytes)
        lines = raw.read().decode("utf-8").split("\n") if raw is not None else sys.stdin  # lines as a file has them
        return [line.strip() for line in lines if line.strip()]
    with open(source, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def run_batch(lines: list[str], args: argparse.Namespace, router: Any = None) -> int:
    """Every line in one Router call: route_batch for routing, predict_batch for answers."""
    try:
        router = router if router is not None else make_router(args)
        if answering(args):
            return answer_batch(lines, args, router)
        requests = [{"state": {"text": line}, "questions": {}, **routing_controls(args)} for line in lines]
        decisions = router.route_batch(requests, **({"explain": True} if args.explain else {}))
        for line, decision in zip(lines, decisions):
            if args.json:
                print(json.dumps(dict(decision)))
            elif args.explain:
                show_decision(decision)
                print()
            else:
                print(batch_line(decision, line))
        return 0
    except FAILURES as e:
        return report_failure(e)


def answer_batch(lines: list[str], args: argparse.Namespace, router: Any) -> int:
    questions, state_key = resolve_questions(args)
    per_request = {**routing_controls(args), **budget_overrides(args)}
    requests = [{"state": {state_key: line}, "questions": questions, **per_request} for line in lines]
    kwargs: dict = {"batch_size": args.batch_size, "min_confidence": args.min_confidence}
    diagnostics = None
    if args.sort_by_length:
        kwargs["sort_by_length"] = True
        if takes_keyword(router.predict_batch, "diagnostics"):
            diagnostics = kwargs["diagnostics"] = {}
    results = router.predict_batch(requests, **kwargs)
    for line, result in zip(lines, results):
        if args.json:
            print(json.dumps(result))
        else:
            print(f"# {line if len(line) <= 72 else line[:69] + '...'}")
            show_answers(result)
            print()
    if args.sort_by_length:
        note = sort_note(args.batch_size, len(lines), diagnostics)
        if note:
            print(note, file=sys.stderr)
    return 0


def refusal(args: argparse.Namespace, text: str) -> str | None:
    """The published refusals, checked before anything loads."""
    if args.explain and answering(args):
        return "laya: --explain is for routing only; omit --predict, --preset and --questions."
    if args.min_confidence is not None and not answering(args):
        return "laya: --min-confidence gates answers, so it needs --predict, --preset or --questions."
    if text and args.batch:
        return "laya: pass either a text or --batch FILE, not both."
    if args.questions and args.preset:
        return "laya: --questions and --preset choose different question sets; pass one"
    return None


def checked_inputs(args: argparse.Namespace, text: str) -> tuple[str | None, list[str] | None]:
    """(refusal message, batch lines): question files, backend flags and the batch file, read up front."""
    message = refusal(args, text)
    if message:
        return message, None
    try:
        backend_kwargs(args)
        if answering(args):
            resolve_questions(args)
    except ValueError as e:
        return f"laya: {e}", None
    if not args.batch:
        return None, None
    try:
        lines = read_batch_lines(args.batch)
    except (OSError, UnicodeDecodeError) as e:
        return f"laya: could not read {args.batch} ({e}).", None
    if not lines:
        return f"laya: no requests found in {args.batch}.", None
    return None, lines


def subcommand(argv: list[str]) -> int | None:
    """`laya serve|train|eval|prebuild ...`: the other entry points, with the remaining arguments."""
    head, rest = (argv[0], argv[1:]) if argv else (None, [])
    if head == "serve":
        from .serve import main as serve_main

        return serve_main(rest)
    if head == "train":
        from .train_cli import main as train_main

        return train_main(rest)
    if head == "eval":
        return evals_main()(rest)
    if head == "prebuild":
        from .prebuild import main as prebuild_main

        return prebuild_main(rest)
    return None


def evals_main() -> Any:
    """The `laya-evals` entry point (its module moved once; take whichever holds it)."""
    import importlib

    for module in ("laya.evals.cli", "laya.evals_cli", "laya.evals.checkpoint_cli"):
        try:
            return importlib.import_module(module).main
        except (ImportError, AttributeError):
            continue
    raise ImportError("laya-evals is not available in this install")


def demo(args: argparse.Namespace) -> int:
    args.preset, args.model = args.preset or "triage", args.model or LAYA_MINI
    try:  # a checkpoint that cannot load fails before the banner
        router = make_router(args)
        if hasattr(router, "load"):
            router.load(routing_controls(args)["model"])
    except FAILURES as e:
        return report_failure(e)
    print("laya demo: triage questions on a sample message, using the bundled laya-mini checkpoint "
          "(MiniLM fine-tuned on synthetic English data: good for short tickets and emails, not for "
          "decisions that matter; see the README's model card).\n")
    print(f"message: {DEMO_TEXT}\n")
    return run(DEMO_TEXT, args, router)


def precision_note(args: argparse.Namespace) -> str | None:
    """The CPU precision when LAYA_CPU_AMP asks for a choice (unset: float32, the default, no note)."""
    if not answering(args) or not os.environ.get("LAYA_CPU_AMP", "").strip():
        return None
    if (args.backend or "eager").strip().lower() not in ("eager", "auto", "compile"):
        return None  # an exported graph's precision is the graph's
    import warnings

    from .device import describe, precision_policy, resolve_device

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the agent itself warns (device, emulated bf16) once
        device = resolve_device(args.device)
        if device.type != "cpu":
            return None
        return f"laya: {describe(precision_policy(device, {}), device)}"


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("USE_TF", "0")
    argv = sys.argv[1:] if argv is None else list(argv)
    code = subcommand(argv)
    if code is not None:
        return code
    args = build_parser().parse_args(argv)
    text = " ".join(args.text).strip()
    if text == "demo" and not args.batch:
        return demo(args)
    message, lines = checked_inputs(args, text)
    if message:
        print(message, file=sys.stderr)
        return 2
    note = precision_note(args)
    if note:
        print(note, file=sys.stderr)
    try:
        if lines is not None:
            return run_batch(lines, args)
        if not text:
            return interactive(args)
        return run(text, args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
