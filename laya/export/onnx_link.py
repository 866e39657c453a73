"""Point an ONNX graph's weights at the checkpoint's own model.safetensors instead of copying them.

A graph exported from a checkpoint repeats every weight (laya-mini: 91 MB of fp32 beside a 46 MB fp16
safetensors). ONNX external data can name any file, offset and length, and a safetensors file is a JSON
header followed by raw little-endian tensors: so each initializer equal to a checkpoint tensor becomes
a reference into that file, in the checkpoint's dtype, followed by a Cast (and a Transpose where the
exporter stored W^T). ONNX Runtime folds those nodes when it builds the session, so the session holds
the same fp32 weights as before and answers exactly as the copied graph.

The graph records the sha256 of the safetensors header (names, dtypes, shapes and offsets): any
checkpoint with that header fits the graph, values included; `check_linked` refuses any other.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any

import numpy as np

HEADER_KEY = "laya.linked.header_sha256"
FILE_KEY = "laya.linked.weights"
# safetensors dtypes the graph can reference -> ONNX TensorProto data type (bf16 weights stay in the graph)
ONNX_TYPES = {"F32": 1, "F16": 10}


def read_header(path: str) -> tuple[dict, int, bytes]:
    """(tensor entries, offset of the data section, the header's bytes) of a safetensors file."""
    with open(path, "rb") as f:
        raw_len = f.read(8)
        if len(raw_len) != 8:
            raise ValueError(f"{path!r} is not a safetensors file (shorter than its 8-byte header length)")
        (n,) = struct.unpack("<Q", raw_len)
        header = f.read(n)
    if len(header) != n:
        raise ValueError(f"{path!r} is truncated: its header says {n} bytes, the file holds fewer")
    entries = {k: v for k, v in json.loads(header).items() if k != "__metadata__"}
    return entries, 8 + n, raw_len + header


def header_sha256(path: str) -> str:
    return hashlib.sha256(read_header(path)[2]).hexdigest()


def _checkpoint_arrays(path: str) -> dict[str, tuple[np.ndarray, dict]]:
    """name -> (values as float32, header entry with its file offset), for the tensors a graph can reference."""
    from safetensors.numpy import load_file

    entries, data_start, _ = read_header(path)
    arrays = load_file(path)
    return {name: (arrays[name].astype(np.float32),
                   {**entry, "file_offset": data_start + entry["data_offsets"][0],
                    "length": entry["data_offsets"][1] - entry["data_offsets"][0]})
            for name, entry in entries.items() if entry["dtype"] in ONNX_TYPES}


def _fingerprint(values: np.ndarray) -> tuple:
    return values.shape, hashlib.sha1(np.ascontiguousarray(values, dtype=np.float32).tobytes()).hexdigest()


def link_weights(graph_path: str, weights_path: str, out_path: str | None = None) -> dict:
    """Rewrite the graph at `graph_path` (written to `out_path`, default in place) so that every fp32
    initializer equal to a tensor of `weights_path`, or to its transpose, is read from that file.
    The weights file must sit in the output graph's directory (ONNX resolves external data there).
    Returns {"linked": n, "embedded": n, "embedded_bytes": b, "graph_bytes": b}."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    out_path = out_path or graph_path
    if os.path.dirname(os.path.abspath(out_path)) != os.path.dirname(os.path.abspath(weights_path)):
        raise ValueError(f"the graph {out_path!r} and the weights {weights_path!r} must share a directory: "
                         "ONNX reads external data relative to the graph")
    model = onnx.load(graph_path)
    graph = model.graph
    index: dict[tuple, tuple[dict, bool]] = {}  # fingerprint -> (header entry, stored transposed)
    for values, entry in _checkpoint_arrays(weights_path).values():
        index.setdefault(_fingerprint(values), (entry, False))
        if values.ndim == 2:
            index.setdefault(_fingerprint(values.T), (entry, True))
    location = os.path.basename(weights_path)
    kept, prologue, linked, embedded_bytes = [], [], 0, 0
    for init in graph.initializer:
        values = numpy_helper.to_array(init) if init.data_type == TensorProto.FLOAT else None
        hit = index.get(_fingerprint(values)) if values is not None and values.size > 1 else None
        if hit is None:
            kept.append(init)
            embedded_bytes += len(init.raw_data) if init.HasField("raw_data") else 0
            continue
        entry, transposed = hit
        ref = TensorProto(name=f"{init.name}__linked", data_type=ONNX_TYPES[entry["dtype"]], dims=entry["shape"],
                          data_location=TensorProto.EXTERNAL)
        for key, value in (("location", location), ("offset", str(entry["file_offset"])),
                           ("length", str(entry["length"]))):
            ref.external_data.add(key=key, value=value)
        kept.append(ref)
        cast_out = f"{init.name}__fp32" if transposed else init.name
        prologue.append(helper.make_node("Cast", [ref.name], [cast_out], to=TensorProto.FLOAT,
                                         name=f"link_cast_{linked}"))
        if transposed:
            prologue.append(helper.make_node("Transpose", [cast_out], [init.name], perm=[1, 0],
                                             name=f"link_transpose_{linked}"))
        linked += 1
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = prologue + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    props = {p.key: p.value for p in model.metadata_props}
    props.update({HEADER_KEY: header_sha256(weights_path), FILE_KEY: location})
    helper.set_model_props(model, props)
    onnx.save(model, out_path)
    return {"linked": linked, "embedded": len(kept) - linked, "embedded_bytes": embedded_bytes,
            "graph_bytes": os.path.getsize(out_path)}


def check_linked(graph_path: str, props: dict[str, str]) -> None:
    """Raise ValueError when a graph linked to a checkpoint's weights (its metadata `props`, e.g. an ORT
    session's custom_metadata_map) finds a weights file of another layout beside it."""
    digest = props.get(HEADER_KEY)
    if digest is None:
        return  # a self-contained graph
    name = props.get(FILE_KEY, "model.safetensors")
    weights = os.path.join(os.path.dirname(os.path.abspath(graph_path)), name)
    got = header_sha256(weights) if os.path.isfile(weights) else "missing"
    if got != digest:
        raise ValueError(f"the ONNX graph {graph_path!r} reads its weights from {name}, but the {name} beside it "
                         f"has another layout (header sha256 {digest[:12]}... expected, {got[:12]} found); "
                         f"re-link it: python scripts/export_onnx.py --model DIR --output {graph_path} --link")


def describe(stats: dict[str, Any]) -> str:
    return (f"{stats['linked']} weights read from the checkpoint, {stats['embedded']} small constants kept "
            f"({stats['embedded_bytes'] / 1e3:.0f} kB); graph {stats['graph_bytes'] / 1e6:.2f} MB")
