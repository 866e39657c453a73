"""The `laya` command: route a text to a checkpoint, or answer a preset's (or a file's) questions about it.

    laya "Necesito ayuda con mi factura"                 # routing only: which checkpoint, and why (no download)
    laya "I was charged twice" --preset triage [--json]  # answer the triage questions (auto-routed)
    laya --batch texts.txt --preset email --json         # one text (or JSON state) per line -> JSONL
    laya                                                 # interactive: one text per line on stdin
    laya demo                                            # the triage preset with the bundled laya-mini
    laya serve --help                                    # the HTTP server (needs the serve extra)
Exit codes: 0 success, 2 bad arguments or input, 1 failure while loading or answering.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any, Iterable, Iterator

from .presets import PRESET_STATE_KEYS, PRESETS, state_field
from .registry import LAYA_MINI, canonical_name, looks_local

DEMO_TEXT = ("Hi, I was charged twice for my March invoice and nobody has answered my last two emails. "
             "Please refund the duplicate charge today or I will cancel my subscription.")
CUSTOM_MODEL = "custom"  # the Router name a --model path or Hub id is registered under
PROGRESS_MIN_LINES = 300  # batch files longer than this get a progress bar on stderr
CHUNK = 256  # requests per Router call in batch mode: results stream out and the bar moves


class UsageError(Exception):
    """Bad arguments or input: exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="laya", description="Typed decisions about a text, in one forward pass. "
                                "Without --predict/--preset/--questions it only shows which checkpoint would answer.")
    p.add_argument("text", nargs="?", help="the state text ('demo' runs the demo); omit for interactive mode")
    p.add_argument("--predict", action="store_true", help="answer questions (implied by --preset/--questions)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="a ready-made question set")
    p.add_argument("--questions", metavar="FILE", help="JSON question dict, or {\"state_key\": ..., \"questions\": {...}}")
    p.add_argument("--model", default=None,
                   help="english, multilingual, typed-decisions (or an alias), auto, a checkpoint directory or org/repo")
    p.add_argument("--task", default=None, help="route by task, e.g. typed-decisions")
    p.add_argument("--lang", default=None, help="language code of the text (routes, and selects language temperatures)")
    p.add_argument("--lang-guess", default=None, metavar="CODE", help="language to assume when --lang is not given")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N, mps or auto")
    p.add_argument("--backend", default=None, help="inference backend passed to laya.load (eager, compile, ...)")
    p.add_argument("--onnx-path", default=None, help="ONNX graph for --backend onnx (default laya.onnx)")
    p.add_argument("--aoti-path", default=None, help="AOTInductor package (.pt2) for --backend aoti")
    p.add_argument("--max-len", type=int, default=None)
    p.add_argument("--head-max-len", type=int, default=None)
    p.add_argument("--min-confidence", type=float, default=None, help="abstain below this answer confidence")
    p.add_argument("--batch", metavar="FILE", help="one text (or JSON state) per line; '-' reads stdin")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--sort-by-length", action="store_true")
    p.add_argument("--json", action="store_true", help="print JSON (JSONL with --batch)")
    p.add_argument("--explain", action="store_true", help="show the routing diagnostics")
    return p


# ---- inputs ---------------------------------------------------------------------------------------

def load_questions(args: argparse.Namespace) -> tuple[dict, str | None]:
    """(questions, state key) from --preset or --questions."""
    if args.preset:
        return PRESETS[args.preset](), PRESET_STATE_KEYS[args.preset]
    try:
        with open(args.questions, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"--questions {args.questions}: {e}") from None
    if isinstance(data, dict) and isinstance(data.get("questions"), dict):
        return data["questions"], data.get("state_key") or state_field(data["questions"])
    if not isinstance(data, dict):
        raise UsageError(f"--questions {args.questions} must hold a JSON object of questions")
    return data, state_field(data)


def make_state(text: str, state_key: str | None) -> Any:
    """A JSON line stays structured; plain text goes under the questions' state key."""
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            pass
    return {state_key: text} if state_key else text


def read_batch(path: str) -> list[str]:
    try:
        stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--batch {path}: {e}") from None
    with stream if path != "-" else contextlib.nullcontext(stream):  # never close stdin
        return [line.rstrip("\n") for line in stream if line.strip()]


def interactive_lines(err: Any) -> Iterator[str]:
    """Lines typed on stdin (a prompt when it is a terminal) until EOF, 'quit' or 'exit'."""
    tty = sys.stdin.isatty()
    while True:
        if tty:
            print("laya> ", end="", file=err, flush=True)
        line = sys.stdin.readline()
        if not line or line.strip() in ("quit", "exit"):
            return
        if line.strip():
            yield line.rstrip("\n")


def backend_kwargs(args: argparse.Namespace) -> dict | None:
    """laya.load keywords for --backend and the exported-graph paths (each path only with its backend)."""
    paths = {"onnx": ("onnx_path", args.onnx_path), "aoti": ("aoti_path", args.aoti_path)}
    for backend, (key, value) in paths.items():
        if value is not None and (args.backend or "").strip().lower() != backend:
            raise UsageError(f"--{key.replace('_', '-')} {value!r} needs --backend {backend} "
                             f"(got --backend {args.backend!r})")
    if not args.backend:
        return None
    kwargs = {"backend": args.backend}
    key, value = paths.get(args.backend.strip().lower(), (None, None))
    if value is not None:
        kwargs[key] = value
    return kwargs


def route_model(model: str | None) -> tuple[str | None, dict]:
    """(name to route to or None for auto, extra Router models) for --model."""
    if model is None or model.strip().lower() in ("", "auto"):
        return None, {}
    if canonical_name(model) is not None:
        return model, {}
    if not looks_local(model):
        raise UsageError(f"--model {model!r} is not a checkpoint name; use english, multilingual, typed-decisions "
                         "(or an alias), auto, a checkpoint directory or an org/repo Hub id")
    return CUSTOM_MODEL, {CUSTOM_MODEL: model}


# ---- output ---------------------------------------------------------------------------------------

def format_answer(answer: dict) -> str:
    kind = answer["type"]
    if kind == "choice":
        value = str(answer["choice"])
    elif kind == "score":
        value = f"{answer['score']:.2f} of {len(answer['probabilities']) - 1}"
    else:
        value = f"{'yes' if answer['noul'] >= 0.5 else 'no'} (P(true)={answer['noul']:.2f})"
    return value + ("  [low-confidence]" if answer.get("low_confidence") else "")


def print_rows(rows: list[tuple[str, ...]], out: Any, header: tuple[str, ...] | None = None) -> None:
    lines = [header, tuple("-" * len(h) for h in header), *rows] if header else rows
    widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
    if header:
        lines[1] = tuple("-" * w for w in widths)
    for r in lines:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)


def print_routing(decision: dict, out: Any, explain: bool) -> None:
    rows = [("model", decision["model"]), ("repo", decision["repo"]), ("reason", decision["reason"])]
    if decision.get("workflow"):
        rows.append(("workflow", decision["workflow"]))
    detection = decision.get("detection")
    if explain and detection:
        for key in ("language", "script", "is_english", "language_undecided", "diacritic_rate",
                    "non_latin_fraction"):
            rows.append((key, str(detection[key])))
        profile = ", ".join(f"{k} {v:.2f}" for k, v in detection["script_profile"].items())
        rows.append(("script_profile", profile or "-"))
        if detection.get("mixed_segment"):
            rows.append(("mixed_segment", json.dumps(detection["mixed_segment"], ensure_ascii=False)))
        for key, value in (detection.get("diagnostic") or {}).items():
            if key != "thresholds":
                rows.append((key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)))
    elif explain:
        rows.append(("detection", "not consulted (the model was chosen explicitly)"))
    print_rows(rows, out)


def print_table(result: dict, out: Any, explain: bool) -> None:
    routing = result.get("routing")
    if routing and explain:
        print_routing(routing, out, True)
        print(file=out)
    elif routing:
        print(f"routed to {routing['model']} ({routing['reason']})", file=out)
    rows = [(str(qid), a["type"], format_answer(a), f"{a.get('answer_confidence', a['confidence']):.3f}")
            for qid, a in result["answers"].items()]
    print_rows(rows, out, ("question", "type", "answer", "confidence"))
    usage = result["usage"]
    note = f"{usage['input_tokens']} input tokens"
    if usage.get("truncated"):
        note += f", {usage['state_tokens_dropped']} state tokens dropped"
    print(note, file=out)


class Progress:
    """A one-line bar on stderr, redrawn in place; silent for short inputs."""

    def __init__(self, total: int, err: Any):
        self.total, self.err, self.done = total, err, 0
        self.active = total > PROGRESS_MIN_LINES

    def advance(self, n: int) -> None:
        if not self.active:
            return
        self.done += n
        filled = int(30 * self.done / self.total)
        print(f"\rlaya: [{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}", end="", file=self.err,
              flush=True)
        if self.done >= self.total:
            print(file=self.err)


# ---- running --------------------------------------------------------------------------------------

def chunks(items: Iterable, size: int) -> Iterator[list]:
    part: list = []
    for item in items:
        part.append(item)
        if len(part) >= size:
            yield part
            part = []
    if part:
        yield part


def run(args: argparse.Namespace, out: Any, err: Any = None) -> int:
    err = err if err is not None else sys.stderr
    demo = args.text == "demo" and not args.batch
    if demo:
        args.text, args.preset = DEMO_TEXT, args.preset or "triage"
        args.model = args.model or LAYA_MINI
    predicting = bool(args.predict or args.preset or args.questions)
    if not predicting and args.min_confidence is not None:
        raise UsageError("--min-confidence needs an answering mode: add --predict with --preset NAME or "
                         "--questions FILE")
    if predicting and not (args.preset or args.questions):
        raise UsageError("no questions: pass --preset NAME or --questions FILE (or drop --predict to see routing only)")
    questions, state_key = load_questions(args) if predicting else (None, None)
    if predicting:
        from .answers import check_min_confidence

        check_min_confidence(args.min_confidence)

    from .router import Router

    model, extra = route_model(args.model)
    agent_kwargs = backend_kwargs(args) if predicting else None
    router = Router(models=extra, device=args.device, lang_guess=args.lang_guess, agent_kwargs=agent_kwargs)
    per_request = {k: v for k, v in (("model", model), ("task", args.task), ("lang", args.lang),
                                     ("max_len", args.max_len), ("head_max_len", args.head_max_len)) if v is not None}

    def handle(texts: list[str]) -> None:
        requests = [dict(per_request, state=make_state(t, state_key), questions=questions or {}) for t in texts]
        if predicting:
            outputs = router.predict_batch(requests, batch_size=args.batch_size, sort_by_length=args.sort_by_length,
                                           min_confidence=args.min_confidence, explain=args.explain)
        else:
            outputs = router.route_batch(requests, explain=args.explain)
        for item in outputs:
            if args.json:
                print(json.dumps(item, ensure_ascii=False), file=out)
            elif predicting:
                print_table(item, out, args.explain)
            else:
                print_routing(item, out, args.explain)
            if not args.json and len(texts) > 1:
                print(file=out)
        out.flush()

    if demo:
        print("laya demo: triage questions on a sample message, using the bundled laya-mini checkpoint "
              "(MiniLM fine-tuned on synthetic English data: good for short tickets and emails, not for "
              "decisions that matter; see the README's model card).\n", file=out)
        print(f"message: {DEMO_TEXT}\n", file=out)
    if args.batch:
        texts = read_batch(args.batch)
        progress = Progress(len(texts), err)
        size = max(CHUNK, args.batch_size or 0)
        for part in chunks(texts, size):
            handle(part)
            progress.advance(len(part))
    elif args.text is None:
        for line in interactive_lines(err):
            handle([line])
    else:
        handle([args.text])
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("USE_TF", "0")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serve"]:  # `laya serve ...`: the HTTP server (laya.serve), its own flags
        from .serve import main as serve_main

        return serve_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return run(args, sys.stdout, sys.stderr)
    except UsageError as e:
        print(f"laya: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # before ValueError: some Hub "not found" errors are both
        print(f"laya: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except (ValueError, TypeError) as e:
        print(f"laya: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - loading/answering failures: a message and exit code 1, no traceback
        print(f"laya: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
