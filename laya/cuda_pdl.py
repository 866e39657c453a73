"""Programmatic dependent launch (PDL) inside captured CUDA graphs.

A captured stream is a chain of kernel nodes joined by full-completion edges: each kernel is launched
only after the previous one has finished and its writes are flushed, a gap of a few microseconds that
the fast path pays some 200 times per small forward.  A *programmatic* edge lets the next kernel be
launched as soon as every block of the previous one has called ``launch_dependents``; the next kernel
then waits inside itself (``griddepcontrol.wait``) until the previous one has completed.  The TileLang
kernels do both first thing (``tl_kernels._Spec.chain``), so the launch latency overlaps the previous
kernel's run and the numbers are unchanged.

This module rewrites the edges of a captured, not yet instantiated graph through the CUDA driver API:
an edge becomes programmatic only when both ends are kernel nodes and the downstream kernel is one
whose compiled source waits (named in ``waiting``); every other edge keeps full serialisation.  The
driver calls need CUDA 12.3 or newer; where anything is missing the graph is left as captured.
"""

from __future__ import annotations

import ctypes
import re

_KERNEL_NODE = 0  # CU_GRAPH_NODE_TYPE_KERNEL
_PORT_PROGRAMMATIC = 1  # CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC: all blocks triggered or exited
_TYPE_PROGRAMMATIC = 1  # CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
_WAIT_CALL = "cudaGridDependencySynchronize()"
_KERNEL_NAME = re.compile(r'extern "C" __global__ void(?: __launch_bounds__\([^)]*\))? (\w+)\(')


class _EdgeData(ctypes.Structure):
    """CUgraphEdgeData: from_port, to_port, type, 5 reserved bytes."""
    _fields_ = [("from_port", ctypes.c_ubyte), ("to_port", ctypes.c_ubyte), ("type", ctypes.c_ubyte),
                ("reserved", ctypes.c_ubyte * 5)]


class _KernelParams(ctypes.Structure):
    """The head of CUDA_KERNEL_NODE_PARAMS_v2 (func first), padded past its full size."""
    _fields_ = [("func", ctypes.c_void_p), ("rest", ctypes.c_byte * 120)]


_driver = None


def _cuda():
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
    return _driver


def _check(result: int, call: str) -> None:
    if result != 0:
        raise RuntimeError(f"{call} returned CUDA driver error {result}")


def waiting_kernels(kernels) -> set[str]:
    """Names of the compiled GPU kernels whose source waits for the kernel before them (PDL-safe)."""
    waits, other = set(), set()
    for kernel in kernels:
        source = kernel.get_kernel_source()
        (waits if _WAIT_CALL in source else other).update(_KERNEL_NAME.findall(source))
    return waits - other  # a name shared with a kernel that does not wait is never safe


def _kernel_name(node) -> str | None:
    cuda = _cuda()
    kind = ctypes.c_int()
    _check(cuda.cuGraphNodeGetType(node, ctypes.byref(kind)), "cuGraphNodeGetType")
    if kind.value != _KERNEL_NODE:
        return None
    params = _KernelParams()
    _check(cuda.cuGraphKernelNodeGetParams_v2(node, ctypes.byref(params)), "cuGraphKernelNodeGetParams")
    if not params.func:  # a library kernel handle (CUkernel): not one of ours
        return None
    name = ctypes.c_char_p()
    _check(cuda.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(params.func)), "cuFuncGetName")
    return name.value.decode() if name.value else None


def make_edges_programmatic(graph: int, waiting: set[str]) -> int:
    """Turn the full-completion edges of `graph` (a cudaGraph_t, before instantiation) that lead from a
    kernel node into a kernel named in `waiting` into programmatic edges; returns how many changed."""
    cuda = _cuda()
    graph = ctypes.c_void_p(graph)
    count = ctypes.c_size_t(0)
    _check(cuda.cuGraphGetEdges_v2(graph, None, None, None, ctypes.byref(count)), "cuGraphGetEdges")
    n = count.value
    if not n:
        return 0
    src, dst, data = (ctypes.c_void_p * n)(), (ctypes.c_void_p * n)(), (_EdgeData * n)()
    _check(cuda.cuGraphGetEdges_v2(graph, src, dst, data, ctypes.byref(count)), "cuGraphGetEdges")
    names: dict[int, str | None] = {}

    def name_of(node) -> str | None:
        if node not in names:
            names[node] = _kernel_name(ctypes.c_void_p(node))
        return names[node]

    chosen = [i for i in range(count.value)
              if data[i].type == 0 and data[i].from_port == 0
              and name_of(dst[i]) in waiting and name_of(src[i]) is not None]
    if not chosen:
        return 0
    k = len(chosen)
    old_src, old_dst = (ctypes.c_void_p * k)(*[src[i] for i in chosen]), (ctypes.c_void_p * k)(*[dst[i] for i in chosen])
    new = (_EdgeData * k)()
    for e in new:
        e.from_port, e.type = _PORT_PROGRAMMATIC, _TYPE_PROGRAMMATIC
    _check(cuda.cuGraphRemoveDependencies_v2(graph, old_src, old_dst, None, k), "cuGraphRemoveDependencies")
    result = cuda.cuGraphAddDependencies_v2(graph, old_src, old_dst, new, k)
    if result != 0:  # put the full-completion edges back: a graph missing them would race
        _check(cuda.cuGraphAddDependencies_v2(graph, old_src, old_dst, None, k), "cuGraphAddDependencies (restore)")
        _check(result, "cuGraphAddDependencies")
    return k
