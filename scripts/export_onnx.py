"""Export a laya checkpoint to an ONNX graph for ONNXAgent / laya.load(..., backend="onnx").

    python scripts/export_onnx.py --model PATH --output laya.onnx [--quantize] [--opset N]
        [--exporter dynamo|legacy] [--subfolder S] [--no-verify] [--no-fuse] [--link]

Loads the checkpoint with the torch Agent on the CPU in fp32, exports it with dynamic batch, sequence
and marker axes, and verifies the graph against eager at batches 1, 2 and 3 (other widths and marker
counts than the trace). --quantize also writes an INT8 copy (PATH.int8.onnx) and verifies it with the
looser INT8 tolerance. --link writes the graph inside the checkpoint directory with its weights read from
the checkpoint's model.safetensors (laya.export.onnx_link: a graph of a few hundred kB instead of a second
copy of every weight). Exits non-zero when a verification fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="checkpoint directory, Hub id or registry name")
    parser.add_argument("--subfolder", default=None)
    parser.add_argument("--revision", default=None)
    parser.add_argument("--output", default="laya.onnx", help="graph path (default laya.onnx)")
    parser.add_argument("--opset", type=int, default=None, help="ONNX opset (default: the exporter's)")
    parser.add_argument("--exporter", default="dynamo", choices=("dynamo", "legacy"))
    parser.add_argument("--quantize", action="store_true", help="also write and verify an INT8 copy")
    parser.add_argument("--no-verify", action="store_true", help="skip the graph-vs-eager check")
    parser.add_argument("--no-fuse", action="store_true",
                        help="keep ModernBERT attention as the exporter wrote it (default: fused into ORT's "
                        "RotaryEmbedding + MultiHeadAttention where it matches)")
    parser.add_argument("--link", action="store_true",
                        help="read the weights from the checkpoint's model.safetensors (--output is then a file "
                        "name inside the checkpoint directory)")
    args = parser.parse_args(argv)
    if args.link and args.quantize:
        parser.error("--link and --quantize do not combine: INT8 weights are not in the checkpoint")

    import laya
    from laya.export import onnx as export

    agent = laya.load(args.model, device="cpu", subfolder=args.subfolder, revision=args.revision)
    if args.link:
        args.output = os.path.join(agent.model_dir, os.path.basename(args.output))
    started = time.perf_counter()
    export.export_module(agent.model, args.output, opset=args.opset, exporter=args.exporter,
                         fuse=not args.no_fuse and "auto")
    print(f"wrote {args.output} ({os.path.getsize(args.output) / 1e6:.1f} MB, {args.exporter} exporter, "
          f"{time.perf_counter() - started:.1f} s)")
    if args.link:
        from laya.export.onnx_link import describe, link_weights

        print(f"linked {args.output}: "
              f"{describe(link_weights(args.output, os.path.join(agent.model_dir, 'model.safetensors')))}")
    outputs = [(args.output, export.FP32_PROB_ATOL, export.FP32_LOGITS_ATOL)]
    if args.quantize:
        int8 = export.quantize_model(args.output)
        print(f"wrote {int8} ({os.path.getsize(int8) / 1e6:.1f} MB, INT8 dynamic quantisation)")
        outputs.append((int8, export.INT8_PROB_ATOL, None))
    if args.no_verify:
        return 0
    for path, prob_atol, logits_atol in outputs:
        try:
            report = export.verify_batch_dynamic(agent.model, path, prob_atol=prob_atol, logits_atol=logits_atol)
        except export.ExportMismatch as e:
            print(f"FAIL {e}", file=sys.stderr)
            return 1
        worst = {key: max(s[key] for s in report["shapes"]) for key in
                 ("max_abs_logits", "max_abs_act_logits", "max_abs_prob", "max_abs_act_prob")}
        print(f"verified {path} at {[s['shape'] for s in report['shapes']]} (batch, seq, markers): "
              f"{json.dumps({k: float(f'{v:.3g}') for k, v in worst.items()})}, probability tolerance {prob_atol:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
