"""Which MatMul/Gemm nodes of an exported graph an INT8 recipe quantises.

The dynamo exporter records each node's module path (`pkg.torch.onnx.name_scopes`), e.g.
`encoder.encoder.layer.5.output.dense` (BERT) or `encoder.layers.21.mlp.Wo` (ModernBERT): the encoder
layer of a weight MatMul is read from there. Graphs without that metadata (legacy exporter) have no
layers to select.
"""

from __future__ import annotations

import re

# BERT `encoder.layer.N.` and ModernBERT `layers.N.`; the decision heads (scorer, act_head) match neither.
_LAYER = re.compile(r"(?:^|\.)layers?\.(\d+)(?:\.|$)")


def name_scopes(node) -> list[str]:
    """The module path the exporter recorded for `node`, outermost first ([] without metadata)."""
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            return re.findall(r"'([^']*)'", prop.value)
    return []


def encoder_layer(node) -> int | None:
    """The encoder layer index of `node` (None: outside the encoder layers, or no metadata)."""
    for scope in reversed(name_scopes(node)):
        found = _LAYER.search(scope)
        if found:
            return int(found.group(1))
    return None


def weight_matmuls(graph) -> list:
    """MatMul/Gemm nodes whose B input is an initializer (attention's activation x activation MatMuls
    are left out, as quantize_dynamic does)."""
    inits = {t.name for t in graph.initializer}
    return [n for n in graph.node if n.op_type in ("MatMul", "Gemm") and len(n.input) > 1 and n.input[1] in inits]


def last_layer_matmuls(path: str, last_layers: int) -> list[str]:
    """Names of the weight MatMuls in the last `last_layers` encoder layers of the graph at `path`."""
    import onnx

    if last_layers < 1:
        raise ValueError(f"last_layers={last_layers}; give 1 or more")
    nodes = weight_matmuls(onnx.load(path, load_external_data=False).graph)
    layers = {n.name: encoder_layer(n) for n in nodes}
    found = [i for i in layers.values() if i is not None]
    if not found:
        raise ValueError(f"{path}: no encoder layers named in the node metadata (a dynamo export is needed "
                         "to select layers)")
    first = max(found) + 1 - last_layers
    return [name for name, i in layers.items() if i is not None and i >= first]
