"""The `laya` command: answer a preset's (or a file's) questions about a text.

    laya "I was charged twice" --preset triage --model PATH [--json]
    laya demo            # the triage preset on a sample text, with the bundled demo checkpoint
Exit codes: 0 success, 2 bad arguments or input, 1 failure while loading or answering.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any

from .presets import PRESET_STATE_KEYS, PRESETS, state_field
from .registry import DEMO_CHECKPOINT

DEMO_TEXT = ("Hi, I was charged twice for my March invoice and nobody has answered my last two emails. "
             "Please refund the duplicate charge today or I will cancel my subscription.")


class UsageError(Exception):
    """Bad arguments or input: exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="laya", description="Typed decisions about a text, in one forward pass.")
    p.add_argument("text", nargs="?", help="the state text ('demo' runs the demo); omit with --batch")
    p.add_argument("--predict", action="store_true", help="answer questions (implied by --preset/--questions)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="a ready-made question set")
    p.add_argument("--questions", metavar="FILE", help="JSON question dict, or {\"state_key\": ..., \"questions\": {...}}")
    p.add_argument("--model", default=None, help="checkpoint directory, Hub id or registry name (english, multilingual, ...)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N, mps or auto")
    p.add_argument("--lang", default=None, help="language code of the text (selects language temperatures)")
    p.add_argument("--max-len", type=int, default=None)
    p.add_argument("--head-max-len", type=int, default=None)
    p.add_argument("--min-confidence", type=float, default=None, help="abstain below this answer confidence")
    p.add_argument("--batch", metavar="FILE", help="one text (or JSON state) per line; '-' reads stdin")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--sort-by-length", action="store_true")
    p.add_argument("--json", action="store_true", help="print the result dict as JSON (JSONL with --batch)")
    return p


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


def format_answer(answer: dict) -> str:
    kind = answer["type"]
    if kind == "choice":
        value = str(answer["choice"])
    elif kind == "score":
        value = f"{answer['score']:.2f} of {len(answer['probabilities']) - 1}"
    else:
        value = f"{'yes' if answer['noul'] >= 0.5 else 'no'} (P(true)={answer['noul']:.2f})"
    return value + ("  [low-confidence]" if answer.get("low_confidence") else "")


def print_table(result: dict, out: Any) -> None:
    rows = [(qid, a["type"], format_answer(a), f"{a.get('answer_confidence', a['confidence']):.3f}")
            for qid, a in result["answers"].items()]
    header = ("question", "type", "answer", "confidence")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for r in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
    usage = result["usage"]
    note = f"{usage['input_tokens']} input tokens"
    if usage.get("truncated"):
        note += f", {usage['state_tokens_dropped']} state tokens dropped"
    print(note, file=out)


def read_batch(path: str) -> list[str]:
    try:
        stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--batch {path}: {e}") from None
    with stream if path != "-" else contextlib.nullcontext(stream):  # never close stdin
        return [line.rstrip("\n") for line in stream if line.strip()]


def run(args: argparse.Namespace, out: Any) -> int:
    demo = args.text == "demo" and not args.batch
    if demo:
        args.text, args.preset = DEMO_TEXT, args.preset or "triage"
        args.model = args.model or DEMO_CHECKPOINT
    if not (args.preset or args.questions):
        raise UsageError("no questions: pass --preset NAME or --questions FILE (routing-only mode is not "
                         "available in this build)")
    if args.text is None and not args.batch:
        raise UsageError("give the text to answer about, or --batch FILE")
    questions, state_key = load_questions(args)
    texts = read_batch(args.batch) if args.batch else [args.text]
    states = [make_state(t, state_key) for t in texts]

    from .agent import load
    from .answers import check_min_confidence

    try:
        check_min_confidence(args.min_confidence)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if demo:
        print("laya demo: triage questions on a sample message, using the bundled DEMO checkpoint "
              "(random weights, not trained: the answers carry no meaning).\n", file=out)
        print(f"message: {DEMO_TEXT}\n", file=out)
    agent = load(args.model or "english", device=args.device)
    results = agent.predict_batch(states, questions, batch_size=args.batch_size, lang=args.lang,
                                  max_len=args.max_len, head_max_len=args.head_max_len,
                                  sort_by_length=args.sort_by_length, min_confidence=args.min_confidence)
    for result in results:
        if args.json:
            print(json.dumps(result, ensure_ascii=False), file=out)
        else:
            print_table(result, out)
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("USE_TF", "0")
    args = build_parser().parse_args(argv)
    try:
        return run(args, sys.stdout)
    except (UsageError, ValueError, TypeError) as e:
        print(f"laya: error: {e}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as e:
        print(f"laya: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
