"""The TileLang kernels of the fast path (the spec's five, their variants and the decision tail), with an
fp32 scalar CPU specialisation.

Each public factory is a pure function of shapes and options and returns a compiled callable that
writes into caller-owned tensors (nothing is allocated per call):

* ``gemm_kernel``      C[M,N] = act(A[M,K] @ W[N,K]^T (+ b[N]))          act: none | gelu (erf) | relu
* ``gemm_splitk_kernel`` P[s,M,N] = the s-th K slice of A @ W^T (fp32 partials, for few rows)
* ``gemm_geglu_kernel``  C[M,F] = gelu(A @ W[:F]^T) * (A @ W[F:]^T)       ModernBERT's GLU up-projection
* ``add_ln_kernel``    X += R in place (fp32 stream), Y = LayerNorm(X) * w (+ b)
* ``rope_kernel``      rotate-half RoPE on the q and k columns of a packed QKV buffer, in place
* ``attn_kernel``      flash-style bidirectional attention over the packed QKV buffer, key padding by
                       per-sequence length and an optional ``|i - j| <= window`` band
* ``add_ln_quant_kernel`` add + LayerNorm into e4m3 with per-row scales (the next FP8 GEMM's operand)
* ``quant_rows_kernel`` rows (or GEGLU of rows) to e4m3 with per-row scales, the FP8 GEMMs' operand
* ``decide_features_kernel`` the decision tail: masked option logits, their softmax's confidence features
                       and the act head's input row ``[CLS | top1, top1 - top2, entropy, k / 255]``

The row count M (batch x tokens) is a runtime symbol everywhere; tiles that run past M (or past N, K,
D, L) are predicated, so no shape has to be a tile multiple.

One source of truth per kernel.  Every kernel body is written once against a small set of building
blocks (``_Spec``): where tiles live (shared/fragment on the GPU, thread-local on the CPU), how
element-wise loops run (``T.Parallel`` on the GPU, serial ``T.grid`` on the CPU) and how row
reductions are done (``T.reduce_*`` over fragments on the GPU, serial loops over local buffers on the
CPU).  The blocked algorithms, padding predicates, masks and the online softmax are shared.  The CPU
specialisation exists because TileLang's C target (0.1.15) rejects fragments, fragment fill/reduce,
more than one shared buffer and bf16 (see tests/test_tl_cpu_diagnostic.py); it is a scalar fp32
correctness path, not a CPU backend.

``tilelang`` is imported lazily, inside functions, so that this module (and the signatures pinned by
tests/test_tl_kernels_api.py) can be imported where TileLang is not installed.
"""

# No `from __future__ import annotations`: TileLang evaluates string annotations of a prim_func
# only against the names its body uses, so shape names used in annotations alone would not resolve.

import functools
import inspect
import math
import os
import threading

from . import kernel_cache

__all__ = [
    "GPU_DTYPES",
    "DTYPES",
    "ACC",
    "gemm_kernel",
    "gemm_splitk_kernel",
    "gemm_geglu_kernel",
    "add_ln_kernel",
    "rope_kernel",
    "attn_kernel",
    "rope_positions_kernel",
    "attn_varlen_kernel",
    "decide_features_kernel",
    "add_ln_quant_kernel",
    "quant_rows_kernel",
    "varlen_blocks",
    "compile_cpu",
    "compile_many",
]

GPU_DTYPES = ("bfloat16", "float16")
CPU_DTYPE = "float32"
ACCUM = "float"  # every accumulation (GEMM, LayerNorm statistics, softmax) is fp32
DTYPES, ACC = GPU_DTYPES, ACCUM  # the published names (compat R-P2-5); FAST resolves in __getattr__

# Masked attention scores get this added rather than -inf: a row whose keys are all masked then
# stays finite (padding rows are read back by the caller, and NaN would poison later layers).
MASK_NEG = -1e9
FP8 = "float8_e4m3fn"  # the 8-bit GEMM operands (laya.fp8: torch.float8_e4m3fn)
FP8_MAX = 448.0
LOG2E = 1.4426950408889634
# Option columns that are not live get this logit (laya.model.MASKED_LOGIT; pinned equal by a test):
# finite, and low enough that its softmax probability underflows to exactly 0 next to any live logit above
# about -9.9e3 (as in the reference, which uses the same value).
MASKED_LOGIT = -1e4

# g++ defaults to -O0 under TileLang, which is ~60x slower for the scalar GEMM (toolchain.md).
# -ffast-math lets the compiler assume no infinities: running maxima therefore start from the lowest
# finite float (T.min_value), never -inf. They only ever take finite values, so the results are the same
# as from -inf, on the GPU too: exp2(lowest - m) is 0 as exp2(-inf) was.
CPU_COMPILE_FLAGS = ["-O3", "-march=native", "-ffast-math"]
_ACTS = ("none", "gelu", "relu")


def _gpu_pass_configs():
    from tilelang.transform import PassConfigKey

    return {PassConfigKey.TL_ENABLE_FAST_MATH: True}


def _cpu_pass_configs():
    # The C target cannot vectorise T.exp/erf over local buffers; a scalar loop is what we want anyway.
    return {"tirx.disable_vectorize": True}


def __getattr__(name):
    # FAST (the published name of the GPU pass configs) needs tilelang, which this module imports lazily
    if name == "FAST":
        return _gpu_pass_configs()
    raise AttributeError(f"module 'laya.tl_kernels' has no attribute {name!r}")


def _check_dtype(dtype: str, cpu: bool) -> None:
    allowed = GPU_DTYPES + ((CPU_DTYPE,) if cpu else ())
    if dtype not in allowed:
        hint = (
            " (float32 is only for the CPU specialisation: use compile_cpu(factory, ...) "
            "or pass cpu=True)"
            if dtype == CPU_DTYPE
            else ""
        )
        raise ValueError(f"dtype must be one of {allowed}, got {dtype!r}{hint}")


class _Spec:
    """The building blocks that differ between the GPU and the CPU specialisation.

    Everything else in a kernel body is common code.  Attributes are plain Python callables
    resolved while the PrimFunc is traced, so the choice costs nothing at run time.
    """

    def __init__(self, cpu: bool):
        import tilelang.language as T

        self.cpu = cpu
        # Operand tiles: shared memory on the GPU (feeds tensor cores / cp.async pipelining);
        # thread-local on the CPU, where only one dynamic shared buffer is allowed.
        self.tile = T.alloc_local if cpu else T.alloc_shared
        # Accumulators and per-row statistics: register fragments on the GPU, whose layout the
        # compiler infers; the C target cannot infer fragment layouts, so plain locals there.
        self.acc = T.alloc_local if cpu else T.alloc_fragment
        # Element-wise loops: thread-parallel on the GPU, serial (scalar) on the CPU, because the
        # C target forbids indexing a local buffer with a T.Parallel variable.
        self.par = T.grid if cpu else T.Parallel

        @T.macro
        def row_sum(src, dst, rows, cols):
            if cpu:
                for i in T.serial(rows):
                    dst[i] = T.cast(0, ACCUM)
                    for j in T.serial(cols):
                        dst[i] = dst[i] + src[i, j]
            else:
                T.reduce_sum(src, dst, dim=1)

        @T.macro
        def row_max(src, dst, rows, cols):
            # Running maximum: dst keeps its previous value (online softmax).
            if cpu:
                for i in T.serial(rows):
                    for j in T.serial(cols):
                        dst[i] = T.max(dst[i], src[i, j])
            else:
                T.reduce_max(src, dst, dim=1, clear=False)

        self.row_sum = row_sum
        self.row_max = row_max

    def chain(self, release: bool = False):
        """Open a GPU kernel body for programmatic dependent launch (PDL).

        ``griddepcontrol.wait`` first: nothing before it touches tensor memory, so the kernel may be
        launched before the kernel ahead of it in the stream has completed, and it waits here until that
        kernel has finished and its writes are visible.  TileLang's launcher gives a kernel that waits
        the programmatic-serialisation attribute, and CUDA-graph capture turns that into a programmatic
        edge: the launch latency between two kernels overlaps the end of the first.  Every kernel
        waits, so each one's predecessors are complete when it reads; launched without the attribute
        (or after a torch kernel) the wait returns at once.  By default no early ``launch_dependents``:
        blocks that would sit waiting on SMs made the 1 x 128 graph 5% slower than waiting only
        (benchmarks/results/replay_pdl_h200_2026-11-30.json), so the next kernel is released as each block
        exits.  ``release=True`` releases it at once, for a successor that prefetches its weights before its
        own wait (``_weight_prefetch``); the wait still orders every read after this kernel's writes.
        """
        import tilelang.language as T

        if not self.cpu:  # (a bare intrinsic call outside the parsed body emits nothing: T.evaluate does)
            T.evaluate(T.pdl_sync())
            if release:
                T.evaluate(T.pdl_trigger())

    def swizzle(self, panel: int = 10):
        """Block rasterisation for L2 reuse on the GPU; meaningless (and dropped) on the CPU."""
        import tilelang.language as T

        if not self.cpu:
            T.use_swizzle(panel_size=panel)


SM_REGISTERS = 65536  # 32-bit registers per SM (sm_80 / sm_90)
PRODUCER_REGISTERS = 24  # per thread of TileLang's TMA producer warpgroup after its setmaxnreg.dec
MIN_CONSUMER_REGISTERS = 64  # below this an attention tile's accumulators spill (and setmaxnreg needs >= 24)


def consumer_registers(min_blocks: int, threads: int) -> int:
    """Registers per consumer thread that let `min_blocks` warp-specialised blocks (`threads` consumers and a
    128-thread producer) share an SM.  A block starts with the launch bound's registers per thread (in 8s);
    setmaxnreg.inc can only take what the producer's setmaxnreg.dec to 24 gave back to the block's pool, so
    asking for more would wait forever."""
    entry = SM_REGISTERS // (min_blocks * (threads + 128)) // 8 * 8
    return min(240, (entry * (threads + 128) - 128 * PRODUCER_REGISTERS) // threads // 8 * 8)


def _occupancy(min_blocks: int, threads: int, cpu: bool):
    """A kernel-body statement that builds the kernel for `min_blocks` resident blocks per SM (GPU only):
    ``__launch_bounds__(.., min_blocks)``, and a consumer register budget the SM can give every block; the
    default (one block) leaves TileLang's 240 registers, which admit one block of 256 threads or more."""
    if min_blocks < 1:
        raise ValueError(f"min_blocks must be >= 1, got {min_blocks}")
    registers = consumer_registers(min_blocks, threads)
    if not cpu and registers < MIN_CONSUMER_REGISTERS:
        raise ValueError(f"min_blocks={min_blocks} blocks of {threads} threads leave each consumer thread "
                         f"{registers} registers (< {MIN_CONSUMER_REGISTERS}); "
                         "use fewer blocks per SM or fewer threads")
    import tilelang.language as T

    annotate = not cpu and min_blocks > 1

    @T.macro
    def occupy():
        if annotate:
            T.annotate_min_blocks_per_sm(min_blocks)
            T.annotate_producer_reg_dealloc(PRODUCER_REGISTERS)
            T.annotate_consumer_reg_alloc(registers)

    return occupy


# laya_thread: threadIdx.x unseen by TileLang, which takes a warp-specialised kernel's pre-split statements to
# run on `threads` threads and would fold a `tid < threads` guard away (its producer warpgroup runs them too).
PREFETCH_L2_SOURCE = (
    "__device__ __forceinline__ void laya_prefetch_l2(const void* p, unsigned bytes) {\n"
    '  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p), "r"(bytes) : "memory");\n'
    "}\n"
    "__device__ __forceinline__ int laya_thread() { return (int)threadIdx.x; }\n"
)


def _weight_prefetch(rows: int, K: int, x_blocks: int, sharers: int, threads: int, cpu: bool, z: bool = False):
    """A kernel-body statement for the top of a GEMM, before its PDL wait: with ``sharers > 0`` (GPU) the
    grid's first ``sharers`` blocks (blockIdx.y = z = 0, x < sharers) ask L2 for every row of the 16-bit
    weight ``W[rows, K]``, one bulk prefetch per row.  Weights are never written, so this may run while the
    predecessor still does (it must be built with ``release=True`` to launch this kernel early); the main
    loop's loads then hit L2 instead of HBM.  ``x_blocks``: the grid's x extent (static)."""
    if sharers < 0:
        raise ValueError(f"prefetch must be >= 0 blocks, got {sharers}")
    on = sharers > 0 and not cpu
    row_bytes = K * 2
    if on and row_bytes % 16:
        raise ValueError(f"prefetch needs weight rows of a multiple of 16 bytes, got K={K} (16-bit)")
    import tilelang.language as T

    share = max(1, min(sharers, x_blocks))
    rounds = math.ceil(math.ceil(rows / share) / threads)  # per thread of each sharing block

    @T.macro
    def prefetch(W):
        if on:
            T.import_source(PREFETCH_L2_SOURCE)
            bx = T.get_block_binding(0)
            first = T.get_block_binding(1) == 0
            if z:
                first = first and T.get_block_binding(2) == 0
            tid = T.call_extern("int32", "laya_thread")
            if first and bx < share and tid < threads:
                for i in T.serial(rounds):
                    r = bx + share * (tid + i * threads)
                    if r < rows:
                        T.call_extern("void", "laya_prefetch_l2", T.address_of(W[r, 0]), row_bytes)

    return prefetch


def _gelu(x):
    import tilelang.language as T

    # Exact erf form, as ModernBERT's GELUActivation ("gelu") and torch.nn.functional.gelu use.
    return 0.5 * x * (1.0 + T.erf(x * (1.0 / math.sqrt(2.0))))


def _act(x, act: str):
    import tilelang.language as T

    if act == "gelu":
        return _gelu(x)
    if act == "relu":
        return T.max(x, T.cast(0, ACCUM))
    return x


def _k_loop(bk: int, stages: int):
    """The pipelined K loop of the plain GEMMs: ``acc = A[m0:, K steps] @ W[n0:, K steps]^T`` over
    ``steps`` bk-wide steps from step ``first`` (0 for a whole GEMM, a slice's first step for split-K).
    T.copy predicates each tile against the tensor bounds and zero-fills the rest, so ragged M/N/K
    tails contribute nothing to the dot products."""
    import tilelang.language as T

    @T.macro
    def k_loop(A, W, A_s, W_s, acc, m0, n0, first, steps):
        T.clear(acc)
        for ko in T.Pipelined(steps, num_stages=stages):
            T.copy(A[m0, (first + ko) * bk], A_s)
            T.copy(W[n0, (first + ko) * bk], W_s)
            T.gemm(A_s, W_s, acc, transpose_B=True)

    return k_loop


# ----------------------------------------------------------------------------------------------
# Factory plumbing: one builder -> PrimFunc; the factory compiles and caches it for the GPU,
# ``get_tir`` exposes the PrimFunc (compile_cpu and the diagnostics compile it for target "c").


_CACHE_LOCK = threading.Lock()


def _kernel_factory(build):
    sig = inspect.signature(build)
    cache: dict = {}

    def key_of(args, kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.arguments.items()), bound.arguments["cpu"]

    def traced(key, cpu, args, kwargs):
        """The request's PrimFunc: from the persistent store (laya.kernel_cache), else traced and stored."""
        store = kernel_cache.active()
        if store is None:
            return build(*args, **kwargs)
        target, flags = ("c", CPU_COMPILE_FLAGS) if cpu else ("cuda", None)
        try:
            store.namespace(target, flags)
        except Exception:  # noqa: BLE001 - no GPU to stamp (a CPU machine asking for a GPU kernel): no store
            return build(*args, **kwargs)
        name = kernel_cache.request_key(build.__name__, key, _pass_configs(cpu))
        prim = store.load(name, target, flags)
        if prim is None:
            prim = build(*args, **kwargs)
            store.save(name, target, prim, {"factory": build.__name__, "arguments": repr(key)}, flags)
        return prim

    @functools.wraps(build)
    def factory(*args, **kwargs):
        key, cpu = key_of(args, kwargs)
        kernel = cache.get(key)
        if kernel is None:
            # Compile outside the lock (seconds each); a rare duplicate compile is harmless.
            prim = traced(key, cpu, args, kwargs)
            _hold_binaries_in_store()
            kernel = _compile_one(prim, cpu)
            with _CACHE_LOCK:
                kernel = cache.setdefault(key, kernel)
        return kernel

    factory.get_tir = build
    factory.traced = traced  # (key, cpu, args, kwargs) -> PrimFunc, through the persistent store
    factory.cache_clear = cache.clear
    factory.key_of = key_of  # (args, kwargs) -> the build key with defaults applied, and the cpu flag
    factory._cache = cache
    return factory


def _pass_configs(cpu: bool) -> dict:
    return _cpu_pass_configs() if cpu else _gpu_pass_configs()


def _hold_binaries_in_store() -> None:
    """TileLang's compiled binaries go under the persistent store's root (where there is a store)."""
    store = kernel_cache.active()
    if store is not None:
        store.hold_tilelang_binaries()


def _compile_one(prim, cpu):
    if cpu:
        return _compile_for_cpu(prim)
    import tilelang

    return _linked(tilelang.compile(prim, target="cuda", pass_configs=_gpu_pass_configs()))


def _linked(kernel):
    """The kernel calling the host library its TileLang cache entry exported: compiled in this process, it would
    link its host module again at its first call (0.9-4.5 s per token-row class of the fast path,
    capture_h200_2026-12-02_fresh_lazy.json), which a kernel read back from the cache never does."""
    adapter = getattr(kernel, "adapter", None)
    entry = getattr(kernel, "_tilelang_cache_path", None)  # TileLang's tag of the entry it saved
    if entry is None or getattr(adapter, "executable", None) is None:
        return kernel
    from tilelang import tvm

    library = os.path.join(entry, "executable.so")
    if isinstance(adapter.executable, tvm.runtime.Executable) and os.path.isfile(library):
        adapter.executable = tvm.runtime.load_module(library)
    return kernel


def compile_many(requests, num_workers=None):
    """Compile several GPU kernels in parallel (nvcc dominates), filling the factories' caches.

    ``requests`` is an iterable of ``(factory, args, kwargs)``; already-compiled ones are skipped.
    Returns the kernels in request order.  Useful where many kernels are needed up front (the fast
    path's constructor, the GPU tests, the benchmarks).
    """
    from tilelang.jit import par_compile

    requests = [(f, tuple(a), dict(kw)) for f, a, kw in requests]
    todo, seen = [], set()
    for f, a, kw in requests:
        key, cpu = f.key_of(a, kw)
        if cpu:
            raise ValueError("compile_many is for GPU kernels; use compile_cpu for the CPU ones")
        if key not in f._cache and (f, key) not in seen:
            seen.add((f, key))
            todo.append((f, key, f.traced(key, cpu, a, kw)))
    if todo:
        _hold_binaries_in_store()
        kernels = par_compile(
            [prim for _, _, prim in todo],
            target="cuda",
            pass_configs=_gpu_pass_configs(),
            num_workers=num_workers,
            ignore_error=True,  # a failed kernel is compiled again below, raising its own error
        )
        kernels = [None if kern is None else _linked(kern) for kern in kernels]
        with _CACHE_LOCK:
            for (f, key, _), kern in zip(todo, kernels):
                if kern is not None:
                    f._cache.setdefault(key, kern)
    return [f(*a, **kw) for f, a, kw in requests]


def _compile_for_cpu(prim):
    import tilelang

    return tilelang.compile(
        prim,
        target="c",
        pass_configs=_cpu_pass_configs(),
        compile_flags=list(CPU_COMPILE_FLAGS),
    )


def compile_cpu(factory, *args, **kwargs):
    """Compile ``factory``'s CPU specialisation: fp32, target ``"c"``, no vectorisation, -O3.

    Takes the same shape/option arguments as the GPU factory (``dtype`` and ``cpu`` are forced).  The
    returned kernel is called with contiguous CPU float32 tensors (attention lengths int32) in the
    same argument order as on the GPU; in-place semantics (LayerNorm's residual, RoPE's q/k) are
    unchanged.  Compiled kernels are cached per argument set; keep the returned object to reuse it
    across dynamic shapes.
    """
    kwargs = dict(kwargs)
    kwargs["dtype"] = CPU_DTYPE
    kwargs["cpu"] = True
    return factory(*args, **kwargs)


# ----------------------------------------------------------------------------------------------
# 1. GEMM with bias / activation epilogue


def _gemm_kernel(
    N,
    K,
    bias=False,
    act="none",
    bm=64,
    bn=128,
    bk=64,
    stages=3,
    threads=128,
    dtype="bfloat16",
    prefetch=0,
    release=False,
    min_blocks=1,
    *,
    cpu=False,
):
    """``C[M,N] = act(A[M,K] @ W[N,K]^T (+ Bv[N]))``; kernel args ``(A, W, Bv, C)``.

    ``Bv`` (fp32) is always passed and ignored when ``bias=False``.  Pipelined over K.
    ``prefetch``/``release``: ``_weight_prefetch`` blocks and ``_Spec.chain``'s early release;
    ``min_blocks``: resident blocks per SM (``_occupancy``).
    """
    _check_dtype(dtype, cpu)
    if act not in _ACTS:
        raise ValueError(f"act must be one of {_ACTS}, got {act!r}")
    import tilelang.language as T

    S = _Spec(cpu)
    M = T.dynamic("m")
    k_loop = _k_loop(bk, stages)
    prefetch_w = _weight_prefetch(N, K, -(-N // bn), prefetch, threads, cpu)
    occupy = _occupancy(min_blocks, threads, cpu)

    @T.prim_func
    def gemm(
        A: T.Tensor((M, K), dtype),
        W: T.Tensor((N, K), dtype),
        Bv: T.Tensor((N,), "float32"),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            occupy()
            prefetch_w(W)
            S.chain(release)
            A_s = S.tile((bm, bk), dtype)
            W_s = S.tile((bn, bk), dtype)
            C_s = S.tile((bm, bn), dtype)
            acc = S.acc((bm, bn), ACCUM)
            S.swizzle()
            k_loop(A, W, A_s, W_s, acc, by * bm, bx * bn, 0, T.ceildiv(K, bk))
            for i, j in S.par(bm, bn):
                x = acc[i, j]
                if bias:
                    x = x + T.if_then_else(bx * bn + j < N, Bv[bx * bn + j], T.cast(0, ACCUM))
                C_s[i, j] = T.cast(_act(x, act), dtype)
            # Staging through a tile gives coalesced, bounds-checked stores.
            T.copy(C_s, C[by * bm, bx * bn])

    return gemm


gemm_kernel = _kernel_factory(_gemm_kernel)


def _gemm_splitk_kernel(
    N,
    K,
    splits,
    bias=False,
    bm=64,
    bn=64,
    bk=128,
    stages=3,
    threads=128,
    dtype="bfloat16",
    prefetch=0,
    release=False,
    min_blocks=1,
    *,
    cpu=False,
):
    """Split-K GEMM: ``P[s] = A[:, Ks] @ W[:, Ks]^T (+ Bv[N] in slice 0)`` for the ``splits`` K slices;
    kernel args ``(A, W, Bv, P[splits, M, N] fp32)``.

    For few rows a plain GEMM has too few thread blocks to keep the GPU busy (N=1024 at M=128: 64 with
    64x32 tiles); slicing K multiplies them.  The fp32 partials are summed, in slice order (so the result
    is deterministic), by their consumer: ``add_ln_kernel(splits=...)`` adds them to the residual stream.
    """
    _check_dtype(dtype, cpu)
    if splits < 1:
        raise ValueError(f"splits must be >= 1, got {splits}")
    import tilelang.language as T

    S = _Spec(cpu)
    M = T.dynamic("m")
    # Each slice covers a whole number of bk steps; the last may run past K, where T.copy zero-fills.
    steps = math.ceil(math.ceil(K / splits) / bk)
    k_loop = _k_loop(bk, stages)
    prefetch_w = _weight_prefetch(N, K, -(-N // bn), prefetch, threads, cpu, z=True)
    occupy = _occupancy(min_blocks, threads, cpu)

    @T.prim_func
    def gemm_splitk(
        A: T.Tensor((M, K), dtype),
        W: T.Tensor((N, K), dtype),
        Bv: T.Tensor((N,), "float32"),
        P: T.Tensor((splits, M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits, threads=threads) as (bx, by, bz):
            occupy()
            prefetch_w(W)
            S.chain(release)
            A_s = S.tile((bm, bk), dtype)
            W_s = S.tile((bn, bk), dtype)
            acc = S.acc((bm, bn), ACCUM)
            S.swizzle()
            k_loop(A, W, A_s, W_s, acc, by * bm, bx * bn, bz * steps, steps)
            for i, j in S.par(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    x = acc[i, j]
                    if bias:
                        x = x + T.if_then_else(bz == 0, Bv[bx * bn + j], T.cast(0, ACCUM))
                    P[bz, by * bm + i, bx * bn + j] = x

    return gemm_splitk


gemm_splitk_kernel = _kernel_factory(_gemm_splitk_kernel)


# ----------------------------------------------------------------------------------------------
# 2. GEGLU up-projection


def _gemm_geglu_kernel(
    F,
    K,
    bm=64,
    bn=64,
    bk=64,
    stages=2,
    threads=128,
    dtype="bfloat16",
    prefetch=0,
    release=False,
    min_blocks=1,
    *,
    cpu=False,
):
    """``C[M,F] = gelu(A @ W[:F]^T) * (A @ W[F:]^T)``; kernel args ``(A[M,K], W[2F,K], C[M,F])``.
    ``prefetch``/``release``/``min_blocks`` as ``gemm_kernel``'s."""
    _check_dtype(dtype, cpu)
    import tilelang.language as T

    S = _Spec(cpu)
    M = T.dynamic("m")
    prefetch_w = _weight_prefetch(2 * F, K, -(-F // bn), prefetch, threads, cpu)
    occupy = _occupancy(min_blocks, threads, cpu)

    @T.prim_func
    def gemm_geglu(
        A: T.Tensor((M, K), dtype),
        W: T.Tensor((2 * F, K), dtype),
        C: T.Tensor((M, F), dtype),
    ):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            occupy()
            prefetch_w(W)
            S.chain(release)
            A_s = S.tile((bm, bk), dtype)
            Wu_s = S.tile((bn, bk), dtype)  # rows of the activated half
            Wg_s = S.tile((bn, bk), dtype)  # matching rows of the gate half
            C_s = S.tile((bm, bn), dtype)
            acc_u = S.acc((bm, bn), ACCUM)
            acc_g = S.acc((bm, bn), ACCUM)
            S.swizzle()
            T.clear(acc_u)
            T.clear(acc_g)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                # A ragged last column tile of the first half reads gate rows; those columns are
                # >= F and never stored, so no extra predicate is needed.
                T.copy(W[bx * bn, ko * bk], Wu_s)
                T.copy(W[F + bx * bn, ko * bk], Wg_s)
                T.gemm(A_s, Wu_s, acc_u, transpose_B=True)
                T.gemm(A_s, Wg_s, acc_g, transpose_B=True)
            for i, j in S.par(bm, bn):
                C_s[i, j] = T.cast(_gelu(acc_u[i, j]) * acc_g[i, j], dtype)
            T.copy(C_s, C[by * bm, bx * bn])

    return gemm_geglu


gemm_geglu_kernel = _kernel_factory(_gemm_geglu_kernel)


# ----------------------------------------------------------------------------------------------
# 3. Residual add + LayerNorm


def _add_ln_kernel(
    D,
    residual=True,
    bias=False,
    eps=1e-5,
    bm=4,
    threads=32,
    dtype="bfloat16",
    splits=0,
    release=False,
    *,
    cpu=False,
):
    """``X += R`` (if ``residual``, in place, fp32), then ``Y = LN(X) * Wv (+ Bv)``.

    Kernel args ``(X[M,D] fp32, R[M,D], Wv[D] fp32, Bv[D] fp32, Y[M,D])``; ``R`` and ``Bv`` are
    always passed and ignored when the option is off.  Biased variance, two-pass (mean first), since
    the fp32 residual stream of ModernBERT-large reaches ~3e4 and E[x^2]-E[x]^2 would cancel.
    ``splits > 0``: ``R`` is the fp32 partials ``[splits, M, D]`` of ``gemm_splitk_kernel``, summed in
    slice order before they are added.
    ``quant=True`` (``add_ln_quant_kernel``, GPU only): ``Y`` is e4m3 with one more argument, its row
    scales ``Sy[M]`` fp32, by laya.fp8's rule applied to the fp32 LayerNorm output (the next GEMM's
    8-bit operand).  ``release``: ``_Spec.chain``'s early release of the next kernel.
    """
    return _add_ln(D, residual, bias, eps, bm, threads, dtype, splits, cpu, quant=False, release=release)


def _add_ln(D, residual, bias, eps, bm, threads, dtype, splits, cpu, quant, release=False):
    _check_dtype(dtype, cpu)
    _check_quant(quant, cpu)
    if splits < 0 or (splits and not residual):
        raise ValueError(f"splits must be >= 0 and needs residual=True, got splits={splits}, residual={residual}")
    import tilelang.language as T

    S = _Spec(cpu)
    M = T.dynamic("m")
    inv_d = 1.0 / D
    r_shape, r_dtype = ((splits, M, D), "float32") if splits else ((M, D), dtype)
    store_e4m3 = _store_e4m3(bm, D) if quant else None

    def residual_at(R, r, j):
        if not splits:
            return T.cast(R[r, j], ACCUM)
        total = R[0, r, j]
        for s in range(1, splits):
            total = total + R[s, r, j]
        return total

    @T.macro
    def body(X, R, Wv, Bv, Y, Sy):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            S.chain(release)
            x = S.acc((bm, D), ACCUM)
            sq = S.acc((bm, D), ACCUM)
            mean = S.acc((bm,), ACCUM)
            var = S.acc((bm,), ACCUM)
            for i, j in S.par(bm, D):
                r = bx * bm + i
                if residual:
                    # fp32 + (16-bit -> fp32): bit-identical to torch's X += R.float().
                    x[i, j] = T.if_then_else(r < M, X[r, j] + residual_at(R, r, j), T.cast(0, ACCUM))
                else:
                    x[i, j] = T.if_then_else(r < M, X[r, j], T.cast(0, ACCUM))
            if residual:
                for i, j in S.par(bm, D):
                    if bx * bm + i < M:
                        X[bx * bm + i, j] = x[i, j]
            S.row_sum(x, mean, bm, D)
            for i in S.par(bm):
                mean[i] = mean[i] * inv_d
            for i, j in S.par(bm, D):
                sq[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
            S.row_sum(sq, var, bm, D)
            for i in S.par(bm):
                var[i] = T.rsqrt(var[i] * inv_d + eps)  # var now holds 1/std
            if quant:
                amax = S.acc((bm,), ACCUM)
                for i, j in S.par(bm, D):
                    y = (x[i, j] - mean[i]) * var[i] * Wv[j]
                    if bias:
                        y = y + Bv[j]
                    sq[i, j] = y
                T.reduce_absmax(sq, amax, dim=1)
                store_e4m3(sq, amax, Y, Sy, bx * bm, M)
            else:
                for i, j in S.par(bm, D):
                    if bx * bm + i < M:
                        y = (x[i, j] - mean[i]) * var[i] * Wv[j]
                        if bias:
                            y = y + Bv[j]
                        Y[bx * bm + i, j] = T.cast(y, dtype)

    if quant:

        @T.prim_func
        def add_ln_quant(
            X: T.Tensor((M, D), "float32"),
            R: T.Tensor(r_shape, r_dtype),
            Wv: T.Tensor((D,), "float32"),
            Bv: T.Tensor((D,), "float32"),
            Y: T.Tensor((M, D), FP8),
            Sy: T.Tensor((M,), "float32"),
        ):
            body(X, R, Wv, Bv, Y, Sy)

        return add_ln_quant

    @T.prim_func
    def add_ln(
        X: T.Tensor((M, D), "float32"),
        R: T.Tensor(r_shape, r_dtype),
        Wv: T.Tensor((D,), "float32"),
        Bv: T.Tensor((D,), "float32"),
        Y: T.Tensor((M, D), dtype),
    ):
        body(X, R, Wv, Bv, Y, None)

    return add_ln


add_ln_kernel = _kernel_factory(_add_ln_kernel)


def _add_ln_quant_kernel(D, residual=True, bias=False, eps=1e-5, bm=4, threads=32, dtype="bfloat16", release=False, *,
                         cpu=False):
    """``add_ln_kernel`` whose output is the next FP8 GEMM's operand: kernel args
    ``(X, R, Wv, Bv, Y[M,D] e4m3, Sy[M] fp32)``; ``R`` is the 16-bit residual (no split-K)."""
    return _add_ln(D, residual, bias, eps, bm, threads, dtype, 0, cpu, quant=True, release=release)


add_ln_quant_kernel = _kernel_factory(_add_ln_quant_kernel)


def _check_quant(quant: bool, cpu: bool) -> None:
    if quant and cpu:
        raise ValueError("the e4m3 (quant=True) kernels are GPU-only: the C target has no 8-bit float type; "
                         "laya.fp8.quantize_rows is their CPU reference")


def _store_e4m3(bm: int, D: int):
    """Rows r0 .. r0+bm-1 of fp32 values ``v[bm, D]`` with row maxima ``amax`` into ``Q`` (e4m3) and their
    scales into ``Sc``: laya.fp8's rule (scale amax / 448, 1 for an all-zero row; values times 448 / amax,
    clamped, rounded to nearest even)."""
    import tilelang.language as T

    @T.macro
    def store(v, amax, Q, Sc, r0, M):
        for i in T.Parallel(bm):
            if r0 + i < M:
                Sc[r0 + i] = T.if_then_else(amax[i] > 0, amax[i] / FP8_MAX, T.cast(1, ACCUM))
        for i, j in T.Parallel(bm, D):
            if r0 + i < M:
                inverse = T.if_then_else(amax[i] > 0, FP8_MAX / amax[i], T.cast(1, ACCUM))
                Q[r0 + i, j] = T.cast(T.max(T.min(v[i, j] * inverse, FP8_MAX), -FP8_MAX), FP8)

    return store


def _quant_rows_kernel(D, glu=False, bm=1, threads=64, dtype="bfloat16", *, cpu=False):
    """``Q[M,D]`` e4m3 and ``Sc[M]`` fp32: laya.fp8's row quantisation of ``X[M,D]`` or, with ``glu``, of
    ``gelu(X[:, :D]) * X[:, D:]`` for ``X[M, 2D]`` (ModernBERT's GEGLU on its up-projection's output);
    kernel args ``(X, Q, Sc)``.  GPU only.  ``threads`` must divide D (the row is one fragment)."""
    _check_dtype(dtype, cpu)
    _check_quant(True, cpu)
    if D % threads:
        raise ValueError(f"threads ({threads}) must divide the row width D={D}")
    import tilelang.language as T

    S = _Spec(cpu)
    M = T.dynamic("m")
    store_e4m3 = _store_e4m3(bm, D)

    @T.prim_func
    def quant_rows(
        X: T.Tensor((M, 2 * D if glu else D), dtype),
        Q: T.Tensor((M, D), FP8),
        Sc: T.Tensor((M,), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            S.chain()
            v = S.acc((bm, D), ACCUM)
            amax = S.acc((bm,), ACCUM)
            for i, j in S.par(bm, D):
                r = bx * bm + i
                if glu:
                    v[i, j] = T.if_then_else(r < M, _gelu(T.cast(X[r, j], ACCUM)) * T.cast(X[r, D + j], ACCUM),
                                             T.cast(0, ACCUM))
                else:
                    v[i, j] = T.if_then_else(r < M, T.cast(X[r, j], ACCUM), T.cast(0, ACCUM))
            T.reduce_absmax(v, amax, dim=1)
            store_e4m3(v, amax, Q, Sc, bx * bm, M)

    return quant_rows


quant_rows_kernel = _kernel_factory(_quant_rows_kernel)


# ----------------------------------------------------------------------------------------------
# 4. Rotary position embedding (rotate-half), in place on the packed QKV buffer


def _rope_prim(H, Dh, bm, threads, dtype, cpu, positions):
    """Rotate-half RoPE in place on the q and k columns of ``QKV[M, 3*H*Dh]``; the position of row r is
    ``r % L`` (rows are batch x L) or, with ``positions``, ``Pos[r]`` (packed rows of any lengths)."""
    _check_dtype(dtype, cpu)
    if Dh % 2:
        raise ValueError(f"Dh must be even for rotate-half RoPE, got {Dh}")
    import tilelang.language as T

    S = _Spec(cpu)
    M = T.dynamic("m")
    L = T.dynamic("l")
    half = Dh // 2

    @T.macro
    def rotate(QKV, Cos, Sin, r, e, p):
        # e runs over the 2*H (q|k, head) blocks x Dh/2 pairs; each iteration owns one (d, d + Dh/2)
        # pair, so the in-place update has no cross-iteration hazard.  One flat loop rather than
        # (2H, Dh/2): TileLang 0.1.15 cannot lay out a 3-D parallel loop whose middle extent is not a
        # power of two (H=12: "Mapped indices are not independent").
        c = e // half
        d = e % half
        x0 = T.cast(QKV[r, c * Dh + d], ACCUM)
        x1 = T.cast(QKV[r, c * Dh + d + half], ACCUM)
        QKV[r, c * Dh + d] = T.cast(x0 * Cos[p, d] - x1 * Sin[p, d], dtype)
        QKV[r, c * Dh + d + half] = T.cast(x1 * Cos[p, d] + x0 * Sin[p, d], dtype)

    if positions:

        @T.prim_func
        def rope_at(
            QKV: T.Tensor((M, 3 * H * Dh), dtype),
            Cos: T.Tensor((L, half), "float32"),
            Sin: T.Tensor((L, half), "float32"),
            Pos: T.Tensor((M,), "int32"),
        ):
            with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
                S.chain()
                for i, e in S.par(bm, 2 * H * half):
                    if bx * bm + i < M:
                        rotate(QKV, Cos, Sin, bx * bm + i, e, Pos[bx * bm + i])

        return rope_at

    @T.prim_func
    def rope(
        QKV: T.Tensor((M, 3 * H * Dh), dtype),
        Cos: T.Tensor((L, half), "float32"),
        Sin: T.Tensor((L, half), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            S.chain()
            for i, e in S.par(bm, 2 * H * half):
                if bx * bm + i < M:
                    rotate(QKV, Cos, Sin, bx * bm + i, e, (bx * bm + i) % L)

    return rope


def _rope_kernel(H, Dh, bm=32, threads=128, dtype="bfloat16", *, cpu=False):
    """Rotate the q and k columns of ``QKV[M, 3*H*Dh]`` in place; kernel args ``(QKV, Cos, Sin)``.

    ``Cos``/``Sin`` are fp32 ``[L, Dh/2]``; row r uses position ``r % L`` (rows are batch x L).
    Column layout (q|k|v)(head)(dim); v is never touched.  Math in fp32.
    """
    return _rope_prim(H, Dh, bm, threads, dtype, cpu, positions=False)


def _rope_positions_kernel(H, Dh, bm=32, threads=128, dtype="bfloat16", *, cpu=False):
    """As ``rope_kernel`` with explicit positions; kernel args ``(QKV, Cos, Sin, Pos[M] int32)``.

    For packed rows (the real tokens of a batch, one sequence after another): row r uses ``Pos[r]``.
    """
    return _rope_prim(H, Dh, bm, threads, dtype, cpu, positions=True)


rope_kernel = _kernel_factory(_rope_kernel)
rope_positions_kernel = _kernel_factory(_rope_positions_kernel)


# ----------------------------------------------------------------------------------------------
# 5. Flash-style bidirectional attention on the packed QKV buffer


def _attn_prim(B, L, H, Dh, window, bm, bn, stages, threads, min_blocks, dtype, cpu, varlen, release=False):
    """The attention kernels' PrimFunc: one flash-style body (``attend``), two memory layouts.

    dense:  ``QKV[B, L, 3, H, Dh]``, ``Lens[B]``, ``O[B, L, H*Dh]``; every row < L of O is written
            (padding queries get zeros, so padding stays finite for the next layer).
    varlen: ``QKV[T, 3, H, Dh]`` packed rows, ``Starts[B]``, ``Lens[B]``, ``Blocks[NB]``, ``O[T, H*Dh]``;
            sequence b is rows ``Starts[b] .. Starts[b] + Lens[b] - 1``, ``L`` (static) bounds every
            length; rows that belong to no sequence are neither read as keys nor written.  The grid is
            ``(NB, H)``: entry ``b * ceil(L/bm) + q`` of ``Blocks`` is query block q of sequence b, a
            negative entry does nothing.
    """
    _check_dtype(dtype, cpu)
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    occupy = _occupancy(min_blocks, threads, cpu)
    import tilelang.language as T

    S = _Spec(cpu)
    Bs = T.dynamic("b") if B is None else B
    Ls = T.dynamic("l") if L is None else L
    scale = (Dh**-0.5) * LOG2E  # softmax in base 2: exp(x) = exp2(x * log2 e)
    # Each warp owns whole rows of both GEMMs, so the score tile's accumulator layout is the layout
    # the P @ V GEMM wants for its A operand and the softmax needs no cross-warp exchange (with the
    # default policy, bm=128/256 threads fails layout inference: "conflict between s and p").
    FULL_ROW = T.GemmWarpPolicy.FullRow

    @T.macro
    def attend(QKV, O, base, n, q0, by, store_limit):
        """Queries q0 .. q0+bm-1 of the sequence at flat rows base .. base+n-1, head `by`."""
        Q_s = S.tile((bm, Dh), dtype)
        K_s = S.tile((bn, Dh), dtype)
        V_s = S.tile((bn, Dh), dtype)
        s = S.acc((bm, bn), ACCUM)
        p = S.acc((bm, bn), dtype)  # probabilities in the GEMM input type (fp32 on the CPU)
        o = S.acc((bm, Dh), ACCUM)
        m = S.acc((bm,), ACCUM)
        m_prev = S.acc((bm,), ACCUM)
        rescale = S.acc((bm,), ACCUM)
        l_blk = S.acc((bm,), ACCUM)
        l_sum = S.acc((bm,), ACCUM)

        # Key blocks that can hold a visible key: [0, ceil(n/bn)), narrowed to the window band; none
        # when the whole query block lies past the sequence end.
        lo = T.max(q0 - window, 0) // bn if window > 0 else 0
        hi = T.min(T.ceildiv(n, bn), T.ceildiv(q0 + bm + window, bn)) if window > 0 else T.ceildiv(n, bn)
        hi = T.if_then_else(q0 < n, hi, lo)

        T.copy(QKV[base + q0 : base + q0 + bm, 0, by, :], Q_s)
        T.clear(o)
        T.clear(l_sum)
        T.fill(m, T.min_value(ACCUM))
        for kb in T.Pipelined(lo, T.max(hi, lo), num_stages=stages):
            T.copy(QKV[base + kb * bn : base + kb * bn + bn, 1, by, :], K_s)
            T.copy(QKV[base + kb * bn : base + kb * bn + bn, 2, by, :], V_s)
            T.clear(s)
            T.gemm(Q_s, K_s, s, transpose_B=True, policy=FULL_ROW)
            # Only blocks that straddle the sequence end or the band edge pay for the mask;
            # the test is uniform over the block, so it does not diverge.
            k0 = kb * bn
            if window > 0:
                interior = (k0 + bn <= n) and (q0 + bm - 1 - k0 <= window) and (k0 + bn - 1 - q0 <= window)
            else:
                interior = k0 + bn <= n
            if interior:
                for i, j in S.par(bm, bn):
                    s[i, j] = s[i, j] * scale
            else:
                for i, j in S.par(bm, bn):
                    k = k0 + j
                    if window > 0:
                        visible = (k < n) and (q0 + i - k <= window) and (k - q0 - i <= window)
                    else:
                        visible = k < n
                    s[i, j] = s[i, j] * scale + T.if_then_else(visible, T.cast(0, ACCUM), T.cast(MASK_NEG, ACCUM))
            for i in S.par(bm):
                m_prev[i] = m[i]
            S.row_max(s, m, bm, bn)
            for i in S.par(bm):
                rescale[i] = T.exp2(m_prev[i] - m[i])
            for i, j in S.par(bm, bn):
                s[i, j] = T.exp2(s[i, j] - m[i])
            S.row_sum(s, l_blk, bm, bn)
            for i in S.par(bm):
                l_sum[i] = l_sum[i] * rescale[i] + l_blk[i]
            for i, j in S.par(bm, Dh):
                o[i, j] = o[i, j] * rescale[i]
            for i, j in S.par(bm, bn):
                p[i, j] = T.cast(s[i, j], dtype)
            T.gemm(p, V_s, o, policy=FULL_ROW)
        # l_sum == 0 only when no key block was visited (empty sequence, padding query): zeros.
        for i, j in S.par(bm, Dh):
            if q0 + i < store_limit:
                O[base + q0 + i, by * Dh + j] = T.cast(o[i, j] / T.max(l_sum[i], 1e-30), dtype)

    if varlen:
        Ts = T.dynamic("t")
        NBs = T.dynamic("nb")
        QB = T.ceildiv(Ls, bm)  # query blocks per sequence: entry b * QB + q is block q of sequence b

        @T.prim_func
        def attn_varlen(
            QKV: T.Tensor((Ts, 3, H, Dh), dtype),
            Starts: T.Tensor((Bs,), "int32"),
            Lens: T.Tensor((Bs,), "int32"),
            Blocks: T.Tensor((NBs,), "int32"),
            O: T.Tensor((Ts, H * Dh), dtype),
        ):
            # One CTA per (table entry, head): only query blocks that hold queries are launched.
            with T.Kernel(NBs, H, threads=threads) as (bx, by):
                occupy()
                S.chain(release)
                entry = Blocks[bx]
                live = entry >= 0
                # A negative entry (padding of a graph's fixed-size table) runs as query block 0 of an
                # empty sequence at row 0: no key block is visited and no row is written.  The guarded
                # if_then_else never reads Starts/Lens for it (B may be 0).
                e = T.max(entry, 0)
                seq = e // QB
                n = T.if_then_else(live, T.min(Lens[seq], Ls), 0)
                attend(QKV, O, T.if_then_else(live, Starts[seq], 0), n, (e % QB) * bm, by, n)

        return attn_varlen

    @T.prim_func
    def attn(
        QKV: T.Tensor((Bs, Ls, 3, H, Dh), dtype),
        Lens: T.Tensor((Bs,), "int32"),
        O: T.Tensor((Bs, Ls, H * Dh), dtype),
    ):
        with T.Kernel(T.ceildiv(Ls, bm), H, Bs, threads=threads) as (bx, by, bz):
            occupy()
            S.chain(release)
            # One flat row axis (b * L + position): the body indexes dense and packed rows alike.
            attend(T.reshape(QKV, (Bs * Ls, 3, H, Dh)), T.reshape(O, (Bs * Ls, H * Dh)), bz * Ls,
                   T.min(Lens[bz], Ls), bx * bm, by, Ls)

    return attn


def _attn_kernel(
    B,
    L,
    H,
    Dh,
    window=0,
    bm=64,
    bn=64,
    stages=1,
    threads=128,
    min_blocks=1,
    dtype="bfloat16",
    release=False,
    *,
    cpu=False,
):
    """Attention over ``QKV[B, L, 3, H, Dh]``; kernel args ``(QKV, Lens[B] int32, O[B, L, H*Dh])``.

    Key j is visible to query i of sequence b iff ``j < Lens[b]`` and, when ``window > 0``,
    ``|i - j| <= window`` (inclusive, as transformers' bidirectional sliding-window overlay with
    ``sliding_window = local_attention // 2``).  ``B``/``L`` may be None: runtime symbols, one
    compile for every shape.  No score or mask tensor ever exists outside one (bm, bn) tile.
    ``min_blocks``: resident blocks per SM (``_occupancy``); ``release``: ``_Spec.chain``'s early release.
    """
    return _attn_prim(B, L, H, Dh, window, bm, bn, stages, threads, min_blocks, dtype, cpu, varlen=False,
                      release=release)


def _attn_varlen_kernel(
    L,
    H,
    Dh,
    window=0,
    bm=64,
    bn=64,
    stages=1,
    threads=128,
    min_blocks=1,
    dtype="bfloat16",
    release=False,
    *,
    cpu=False,
):
    """Attention over packed rows ``QKV[T, 3, H, Dh]``; kernel args
    ``(QKV, Starts[B], Lens[B], Blocks[NB], O[T, H*Dh])``, all indices int32.

    Sequence b owns rows ``Starts[b] .. Starts[b] + Lens[b] - 1``; ``L`` is the longest sequence the
    kernel serves; ``B``, ``T`` and ``NB`` are runtime symbols.  The launch is one thread block per
    (entry of ``Blocks``, head): entry ``b * ceil(L / bm) + q`` computes queries ``q*bm .. q*bm + bm - 1``
    of sequence b, a negative entry computes nothing (padding of a fixed-size table).  Only blocks
    listed are computed, so the caller lists each sequence's ``ceil(Lens[b] / bm)`` blocks (see
    ``varlen_blocks``); a block past its sequence's end is harmless.  Visibility as ``attn_kernel``.
    Rows outside every sequence must hold finite values (they may be read, then masked); they are
    not written.
    """
    return _attn_prim(None, L, H, Dh, window, bm, bn, stages, threads, min_blocks, dtype, cpu, varlen=True,
                      release=release)


attn_kernel = _kernel_factory(_attn_kernel)
attn_varlen_kernel = _kernel_factory(_attn_varlen_kernel)


def varlen_blocks(lens, L, bm):
    """``attn_varlen_kernel``'s block table for sequences of ``lens`` tokens (a kernel compiled for
    max length ``L`` and query block ``bm``): the live entries ``b * ceil(L/bm) + q`` for every
    ``q < ceil(lens[b] / bm)``, in order, as an int32 numpy array (empty sequences have none).
    Lengths are clipped to L, as the kernel clips them."""
    import numpy as np

    per_seq = -(-np.clip(np.asarray(lens, dtype=np.int64), 0, L) // bm)  # query blocks of each sequence
    seq = np.repeat(np.arange(per_seq.shape[0]), per_seq)
    first = np.cumsum(per_seq) - per_seq  # each sequence's first entry
    q = np.arange(seq.shape[0]) - first[seq]
    return (seq * -(-L // bm) + q).astype(np.int32)


# ----------------------------------------------------------------------------------------------
# 6. The decision tail: masked logits, confidence features and the act head's input


def _decide_features_kernel(d, width=64, threads=128, dtype="bfloat16", *, cpu=False):
    """The elementwise/reduction tail of ``laya.model.decide`` in one launch, one thread block per row.

    Kernel args ``(Sc[B, k], Live[B, k] int32, Rows[B, r, d] fp32, Logits[B, k] fp32 (out),
    ActIn[B, d + 4] fp32 (out))``; ``B``, the option-column count ``k`` (at most ``width``) and ``r`` are
    runtime symbols, so one compiled kernel serves every question shape.  The caller keeps 1 <= k <= width:
    nothing checks it at run time, and columns past ``width`` would be left unwritten.  ``Sc`` holds the raw scorer
    outputs, ``Live`` is 1 for a live option column and 0 for padding (any nonzero counts as live),
    ``Rows[:, 0]`` is the CLS row.  Writes ``Logits = Sc.float().masked_fill(~Live, MASKED_LOGIT)`` and
    ``ActIn = [Rows[:, 0] | top1, top1 - top2, entropy / log(kl), kl / 255]`` with ``p = softmax(Logits)``,
    ``kl = max(#live, 2)``, ``entropy = -sum p * log(max(p, 1e-9))``, top1/top2 the two largest p
    counting duplicates (a tie for the max gives top2 == top1) and top2 = 0 when ``k == 1``, as
    ``laya.model.confidence_features``.  All math in fp32.
    """
    _check_dtype(dtype, cpu)
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    if width < 2 or width & (width - 1):
        raise ValueError(f"width must be a power of two >= 2 (the widest k served), got {width}")
    import tilelang.language as T

    S = _Spec(cpu)
    M, Kc, R = T.dynamic("m"), T.dynamic("k"), T.dynamic("r")
    # The per-row tiles are `width` wide (a power of two: the GPU's fragment layouts need a width that
    # divides, or is a multiple of, the thread count) and cover the k live-or-masked columns.  Columns
    # from k on get a logit far below MASKED_LOGIT (finite: the CPU build is -ffast-math), hence p = 0
    # exactly: no weight in the softmax, the entropy or the live count, never top1 (> 0) and never above
    # a real top2 (>= 0).  With k == 1 they also make top2 = 0, the reference's single-column case
    # (width >= 2 guarantees one such column).
    kw = width
    zero, one = T.cast(0, ACCUM), T.cast(1, ACCUM)
    masked = T.cast(MASKED_LOGIT, ACCUM)
    pad = T.cast(-1e30, ACCUM)

    @T.prim_func
    def decide_features(
        Sc: T.Tensor((M, Kc), dtype),
        Live: T.Tensor((M, Kc), "int32"),
        Rows: T.Tensor((M, R, d), "float32"),
        Logits: T.Tensor((M, Kc), "float32"),
        ActIn: T.Tensor((M, d + 4), "float32"),
    ):
        with T.Kernel(M, threads=threads) as bx:
            S.chain()
            x = S.acc((1, kw), ACCUM)  # the logits, then exp(logit - max), then p
            t = S.acc((1, kw), ACCUM)  # scratch of the reductions
            live = S.acc((1, kw), ACCUM)
            mx = S.acc((1,), ACCUM)
            tot = S.acc((1,), ACCUM)
            ent = S.acc((1,), ACCUM)
            kl = S.acc((1,), ACCUM)
            top1 = S.acc((1,), ACCUM)
            top2 = S.acc((1,), ACCUM)
            n_top = S.acc((1,), ACCUM)
            # The CLS row, by every thread (vectorised on the GPU).
            for j in S.par(d):
                ActIn[bx, j] = Rows[bx, 0, j]
            for i, j in S.par(1, kw):
                # (if_then_else evaluates only the branch it selects: no read past column k)
                live[i, j] = T.if_then_else(j < Kc, T.if_then_else(Live[bx, j] != 0, one, zero), zero)
                x[i, j] = T.if_then_else(
                    j < Kc, T.if_then_else(Live[bx, j] != 0, T.cast(Sc[bx, j], ACCUM), masked), pad)
            for i, j in S.par(1, kw):
                if j < Kc:
                    Logits[bx, j] = x[i, j]
            S.row_sum(live, kl, 1, kw)
            # Softmax: masked columns give exp(MASKED_LOGIT - max) == 0 exactly next to a live one.
            T.fill(mx, T.min_value(ACCUM))
            S.row_max(x, mx, 1, kw)
            for i, j in S.par(1, kw):
                x[i, j] = T.exp(x[i, j] - mx[i])
            S.row_sum(x, tot, 1, kw)
            for i, j in S.par(1, kw):
                x[i, j] = x[i, j] / tot[i]
            for i, j in S.par(1, kw):
                t[i, j] = x[i, j] * T.log(T.max(x[i, j], T.cast(1e-9, ACCUM)))
            S.row_sum(t, ent, 1, kw)
            T.fill(top1, T.min_value(ACCUM))
            S.row_max(x, top1, 1, kw)
            # Second largest counting duplicates: top1 again when the max is shared, else the largest p
            # below it (p >= 0, so -1 stands for "excluded").
            for i, j in S.par(1, kw):
                t[i, j] = T.if_then_else(x[i, j] == top1[i], one, zero)
            S.row_sum(t, n_top, 1, kw)
            for i, j in S.par(1, kw):
                t[i, j] = T.if_then_else(x[i, j] == top1[i], -one, x[i, j])
            T.fill(top2, T.min_value(ACCUM))
            S.row_max(t, top2, 1, kw)
            for i in S.par(1):
                top2[i] = T.if_then_else(n_top[i] > 1.5, top1[i], top2[i])
            for i in S.par(1):
                kl[i] = T.max(kl[i], T.cast(2, ACCUM))
                ActIn[bx, d] = top1[i]
                ActIn[bx, d + 1] = top1[i] - top2[i]
                ActIn[bx, d + 2] = -ent[i] / T.log(kl[i])
                ActIn[bx, d + 3] = kl[i] / T.cast(255.0, ACCUM)

    return decide_features


decide_features_kernel = _kernel_factory(_decide_features_kernel)
