"""Fuse each ModernBERT attention block of an exported graph into ONNX Runtime's contrib ops.

The exporter writes attention as ~45 small ops per layer (reshape, three slices, transposes, the
rotate-half rotary, the decomposed SDPA with its NaN guard). On a 2-core CPU those single-threaded
copies cost ~25% of an INT8 call. This rewrite replaces them per layer with
Split -> RotaryEmbedding (q, k) -> MultiHeadAttention (com.microsoft), keeping the layer's own mask
(sliding window or global) as an additive bias. ORT's transformers optimizer finds nothing to fuse
in this graph (no bias on LayerNorm, rotary attention), hence a rewrite of our own.

The mask bias is finite (-1e30, not -inf): a fully masked padding row then averages instead of
producing NaN, and real rows are unchanged (exp underflows to exactly 0 either way). Check the
result with laya.export.onnx.verify_batch_dynamic at the fp32 tolerance.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

MASK_BIAS = -1e30
MS_DOMAIN = "com.microsoft"


class FusionError(ValueError):
    """The graph does not have the attention pattern this rewrite knows."""


def _index(graph: Any) -> tuple[dict, dict]:
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    return producer, consumers


def _only_consumer(consumers: dict, name: str, op: str) -> Any:
    nodes = [n for n in consumers.get(name, []) if n.op_type == op]
    if len(nodes) != 1:
        raise FusionError(f"expected one {op} consuming {name!r}, found {len(nodes)}")
    return nodes[0]


def _rope_caches(theta: float, head_dim: int, max_pos: int) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin caches [max_pos, head_dim / 2] of the default (unscaled) rotary embedding."""
    inv = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / head_dim))
    freqs = np.outer(np.arange(max_pos, dtype=np.float32), inv.astype(np.float32))
    return np.cos(freqs).astype(np.float32), np.sin(freqs).astype(np.float32)


def _layer_theta(cfg: Any, layer: int) -> float:
    """The rope theta of `layer`: transformers 5 names each layer's type (full / sliding attention)
    and keeps a rope_parameters entry per type; older configs have global_/local_rope_theta."""
    params, types = getattr(cfg, "rope_parameters", None), getattr(cfg, "layer_types", None)
    if isinstance(params, dict) and types:
        entry = params.get(types[layer], params)
        if entry.get("rope_type", "default") != "default":
            raise FusionError(f"layer {layer}: rope_type {entry.get('rope_type')!r} is not the default rotary")
        return float(entry["rope_theta"])
    every = int(getattr(cfg, "global_attn_every_n_layers", 1) or 1)
    theta = getattr(cfg, "global_rope_theta" if layer % every == 0 else "local_rope_theta", None)
    if theta is None:
        raise FusionError(f"layer {layer}: the config names no rope theta")
    return float(theta)


def fuse_attention(src: str, dst: str, encoder_config: Any) -> dict:
    """Rewrite the graph at `src` into `dst`; returns {"layers": n, "nodes_before", "nodes_after"}."""
    import onnx
    from onnx import helper, numpy_helper

    if getattr(encoder_config, "model_type", None) != "modernbert":
        raise FusionError(f"attention fusion knows ModernBERT graphs only, not {getattr(encoder_config, 'model_type', None)!r}")
    heads = int(encoder_config.num_attention_heads)
    hidden = int(encoder_config.hidden_size)
    head_dim = hidden // heads
    max_pos = int(getattr(encoder_config, "max_position_embeddings", 8192))
    model = onnx.load(src)
    graph = model.graph
    producer, consumers = _index(graph)
    inits = {t.name for t in graph.initializer}
    softmaxes = [n for n in graph.node if n.op_type == "Softmax" and producer.get(n.input[0]) is not None
                 and producer[n.input[0]].op_type == "Add"]
    layers = int(encoder_config.num_hidden_layers)
    if len(softmaxes) < layers:
        raise FusionError(f"found {len(softmaxes)} masked softmaxes, expected at least {layers}")
    softmaxes = softmaxes[:layers]  # the encoder's come first; the decision head's attention (no rotary) stays
    new_nodes, new_inits, replaced = [], [], {}
    zero_pos = numpy_helper.from_array(np.zeros(1, dtype=np.int64), "laya_fuse_pos0")
    new_inits.append(zero_pos)
    caches: dict = {}
    biases: dict = {}
    for layer, soft in enumerate(softmaxes):
        add = producer[soft.input[0]]
        qk, mask = (producer.get(add.input[0]), add.input[1])
        if qk is None or qk.op_type != "MatMul":
            qk, mask = producer.get(add.input[1]), add.input[0]
        where = producer.get(mask)
        if qk is None or qk.op_type != "MatMul" or where is None or where.op_type != "Where":
            raise FusionError(f"layer {layer}: scores + mask pattern not found at {soft.name}")
        # softmax -> (IsNaN, Where guard) -> MatMul with V -> Transpose -> Reshape [B, S, hidden]
        nxt = [n for n in consumers.get(soft.output[0], []) if n.op_type in ("Where", "MatMul")]
        pv = nxt[0]
        if pv.op_type == "Where":
            pv = _only_consumer(consumers, pv.output[0], "MatMul")
        trans = _only_consumer(consumers, pv.output[0], "Transpose")
        out = _only_consumer(consumers, trans.output[0], "Reshape")
        # V back to the packed projection: Transpose <- Squeeze <- Slice <- Reshape <- MatMul (weights)
        node = producer.get(pv.input[1])
        while node is not None and not (node.op_type == "Reshape" and producer.get(node.input[0]) is not None
                                        and producer[node.input[0]].op_type == "MatMul"
                                        and producer[node.input[0]].input[1] in inits):
            node = producer.get(node.input[0])
        if node is None:
            raise FusionError(f"layer {layer}: the packed q/k/v projection was not found")
        qkv = node.input[0]
        theta = _layer_theta(encoder_config, layer)
        if theta not in caches:
            cos, sin = _rope_caches(theta, head_dim, max_pos)
            tag = f"laya_fuse_rope_{len(caches)}"
            new_inits += [numpy_helper.from_array(cos, f"{tag}_cos"), numpy_helper.from_array(sin, f"{tag}_sin")]
            caches[theta] = (f"{tag}_cos", f"{tag}_sin")
        cos_name, sin_name = caches[theta]
        cond = where.input[0]
        if cond not in biases:  # one additive bias per distinct mask (global / sliding window)
            tag = f"laya_fuse_bias_{len(biases)}"
            new_inits += [numpy_helper.from_array(np.zeros((), np.float32), f"{tag}_zero"),
                          numpy_helper.from_array(np.array(MASK_BIAS, np.float32), f"{tag}_neg")]
            # the exporter's Where(keep, 0, -inf) layout: keep-mask first
            zero_first = _is_zero(graph, where.input[1])
            args = [cond, f"{tag}_zero", f"{tag}_neg"] if zero_first else [cond, f"{tag}_neg", f"{tag}_zero"]
            new_nodes.append(helper.make_node("Where", args, [tag], name=f"{tag}_where"))
            biases[cond] = tag
        p = f"laya_fuse_l{layer}"
        new_nodes += [
            helper.make_node("Split", [qkv], [f"{p}_q", f"{p}_k", f"{p}_v"], name=f"{p}_split", axis=-1,
                             num_outputs=3) if _opset(model) >= 18 else
            helper.make_node("Split", [qkv, _split_sizes(new_inits, hidden)], [f"{p}_q", f"{p}_k", f"{p}_v"],
                             name=f"{p}_split", axis=-1),
            helper.make_node("RotaryEmbedding", [f"{p}_q", zero_pos.name, cos_name, sin_name], [f"{p}_qr"],
                             name=f"{p}_rope_q", domain=MS_DOMAIN, interleaved=0, num_heads=heads),
            helper.make_node("RotaryEmbedding", [f"{p}_k", zero_pos.name, cos_name, sin_name], [f"{p}_kr"],
                             name=f"{p}_rope_k", domain=MS_DOMAIN, interleaved=0, num_heads=heads),
            helper.make_node("MultiHeadAttention", [f"{p}_qr", f"{p}_kr", f"{p}_v", "", "", biases[cond]],
                             [out.output[0]], name=f"{p}_mha", domain=MS_DOMAIN, num_heads=heads,
                             scale=1.0 / math.sqrt(head_dim)),
        ]
        replaced[out.name] = True
    kept = [n for n in graph.node if n.name not in replaced]
    before = len(graph.node)
    # every fused output is produced twice until the old chains are pruned: place new nodes after their inputs
    ordered = _toposort(kept + new_nodes, [i.name for i in graph.input] + [t.name for t in graph.initializer]
                        + [t.name for t in new_inits])
    del graph.node[:]
    graph.node.extend(_prune(ordered, [o.name for o in graph.output]))
    graph.initializer.extend(new_inits)
    if not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    used = {i for n in graph.node for i in n.input}
    keep_inits = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep_inits)
    onnx.save(model, dst)
    return {"layers": layers, "nodes_before": before, "nodes_after": len(graph.node)}


def _opset(model: Any) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)


def _split_sizes(inits: list, hidden: int) -> str:
    from onnx import numpy_helper

    name = "laya_fuse_split_sizes"
    if not any(t.name == name for t in inits):
        inits.append(numpy_helper.from_array(np.array([hidden] * 3, np.int64), name))
    return name


def _is_zero(graph: Any, name: str) -> bool:
    from onnx import numpy_helper

    for t in graph.initializer:
        if t.name == name:
            return bool(np.all(numpy_helper.to_array(t) == 0))
    for n in graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return bool(np.all(numpy_helper.to_array(n.attribute[0].t) == 0))
    raise FusionError(f"mask value {name!r} is not a constant")


def _prune(nodes: list, outputs: list[str]) -> list:
    """Nodes the graph outputs depend on, in the given order."""
    producer = {o: n for n in nodes for o in n.output}
    need, stack = set(), list(outputs)
    while stack:
        node = producer.get(stack.pop())
        if node is None or id(node) in need:
            continue
        need.add(id(node))
        stack.extend(i for i in node.input if i)
    return [n for n in nodes if id(n) in need]


def _toposort(nodes: list, available: list[str]) -> list:
    """Kahn order; a name produced by two nodes (old chain and fused op) takes the fused one."""
    producer: dict = {}
    for n in nodes:  # later nodes (the fused ones) win
        for o in n.output:
            producer[o] = n
    live = [n for n in nodes if all(producer.get(o) is n for o in n.output if o)]
    ready = set(available) | {""}
    out, pending = [], list(live)
    while pending:
        progress = []
        rest = []
        for n in pending:
            if all(i in ready for i in n.input):
                progress.append(n)
                ready.update(n.output)
            else:
                rest.append(n)
        if not progress:
            raise FusionError(f"cannot order {len(rest)} nodes (first {rest[0].name!r})")
        out += progress
        pending = rest
    return out
