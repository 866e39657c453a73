"""The fused forward: the whole DecisionModel (encoder and decision head) from the TileLang kernels.

Activations are token rows ``[M, d]``: GEMMs, residual-add + LayerNorm and the head never see the
batch shape, so a batch can run in one of two layouts (``Plan``):

* dense:  rows x padded length (M = B * L).  Attention reads the QKV GEMM output in place.  Used when
  padding is cheap (one row, or rows of similar length).
* packed: only the batch's real tokens, one sequence after another (M = their count, bucketed up).
  Padded tokens are never computed: RoPE takes each row's position from a table and attention
  (``attn_varlen_kernel``) finds each sequence by its first row and length, and launches only the query
  blocks listed in a per-request block table (each sequence's ceil(length / bm) blocks, not max_len / bm
  of them).  The bucket's dummy rows belong to no sequence; they only need to stay finite.

A captured graph computes its plan's whole bucket (its shapes are fixed); an eager run (big plans, and
every run on the CPU) computes only the request's own token rows and sequences, so large ragged batches
spend nothing on the bucket's dummies.

The residual stream stays fp32 (ModernBERT-large activations reach ~3e4); GEMM operands are 16-bit
copies made once.  The scorer's and the act head's Linear layers run in plain torch on the gathered
marker rows, exactly as the eager model under autocast (`model.decide`); the masking and confidence
features between them are one kernel (``decide_features_kernel``).  A request is written into pinned host twins of the
plan's static buffers, goes to the device in copies that open the forward, and its logits come back in
one copy that closes it: the caller gets host tensors.  On CUDA each plan that recurs (CAPTURE_AFTER
runs) is captured once into a CUDA graph (encoder and head), with a small second graph per marker count
for the decision step, both replayed under a lock; outputs are copied out of the host buffer before the
lock is released.  Every kernel starts with a programmatic-dependent-launch wait
(``tl_kernels._Spec.chain``), so TileLang launches it with programmatic stream serialisation and a
captured graph joins the kernels with programmatic edges: each kernel's launch overlaps the end of the
one before it.

``fp8=True`` (bf16, sm_90+) runs the encoder's four Linears as e4m3 GEMMs (``laya.fp8``): their operands
come quantised from the kernels that make them (``add_ln_quant_kernel``, ``quant_rows_kernel``); the head
and the decision step stay 16-bit.

``cpu=True`` builds the same composition from the kernels' fp32 CPU specialisation: a correctness
path for tests on machines without a GPU, not a CPU backend (the scalar kernels are slow).
"""

from __future__ import annotations

import atexit
import contextlib
import sys
import threading
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from . import fp8 as FP8
from . import kernel_builder, kernel_cache
from . import tl_kernels as K
from .cublas_gemm import TorchGeglu, TorchGemm
from .backends.base import bucket_rows, bucket_tokens
from .fast_state import Plan, DecisionStep, GemmWeight, linears_in, NormWeight, PlanSlot  # noqa: F401
from .fast_tiles import GPU_TILES, M_CLASSES, TILE_KEYS, bucket_packed, m_class  # noqa: F401
from .model import N_FEATURES, head_heads
from .sequence import warmup_batch

HEAD_DH = 64  # the decision head partitions d into 64-wide heads (model.head_heads)
PACK_RATIO = 1.15  # pack when the dense layout would compute 15% more rows than the real tokens
# Bigger plans are compute-bound and rarely repeat: they run without a graph (benchmarks/RESULTS.md, fast path).
GRAPH_MAX_TOKENS = 4096
# A plan is captured on its CAPTURE_AFTER-th run: one-off plans under dynamic batching never pay a capture.
CAPTURE_AFTER = 3


FEATURES_WIDTH = 64  # option columns the decision step's features kernel is built for up front (wider: on need)
DEFAULT_WARMUP_SHAPES = ((1, 64, 3), (1, 128, 3), (4, 128, 5))


# Background kernel builds stop at interpreter exit after the class in flight: a compile thread still
# running while the interpreter finalises aborts the process ("terminate called without an active exception").
_BUILDERS: list = []
_CHILDREN: list = []  # kernel_builder processes: killed first, so no thread waits on one
_STOP_BUILDERS = threading.Event()


@atexit.register
def _stop_background_builds() -> None:
    _STOP_BUILDERS.set()
    for child in _CHILDREN:
        child.stop()
    for thread in _BUILDERS:
        thread.join()


def quant_threads(width: int) -> int:
    """Threads of a quant_rows block over rows `width` wide (they must divide it; FP8 widths are multiples of 16)."""
    return next(t for t in (128, 64, 32, 16) if width % t == 0)


class FastLaya:
    """``FastLaya(model)(input_ids, attention_mask, marker_pos, marker_mask, qtype) -> (logits, act_logits)``."""

    def __init__(self, model, max_len: int = 1024, use_graphs: bool = True, verbose: bool = False,
                 dtype: torch.dtype = torch.bfloat16, *, cpu: bool = False, pad_id: int | None = None,
                 background: bool | None = None, fp8: bool = False):
        if cpu:
            dtype, use_graphs = torch.float32, False
        elif dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"FastLaya runs in torch.bfloat16 or torch.float16, got {dtype} "
                             "(cpu=True builds the fp32 CPU specialisation)")
        elif fp8 and dtype != torch.bfloat16:
            raise ValueError(f"fp8=True runs bf16 outside the 8-bit GEMMs, got dtype={dtype}; pass torch.bfloat16")
        encoder = model.encoder
        config = encoder.config
        if getattr(config, "model_type", None) != "modernbert":
            raise ValueError(f"FastLaya implements ModernBERT encoders, this one is {config.model_type!r}")
        if getattr(config, "mlp_bias", False):
            raise ValueError("FastLaya's GEGLU kernel has no bias; this encoder has mlp_bias=True")
        if getattr(config, "hidden_activation", "gelu") != "gelu":
            raise ValueError(f"FastLaya's GEGLU uses the exact (erf) GELU; this encoder uses "
                             f"{config.hidden_activation!r}")
        self.model = model
        self.device = next(model.parameters()).device
        if cpu != (self.device.type == "cpu"):
            raise ValueError(f"cpu={cpu} but the model is on {self.device}; move it or change cpu=")
        self.cpu, self.dtype, self.use_graphs, self.verbose = cpu, dtype, use_graphs, verbose
        self.fp8 = bool(fp8)
        why = FP8.supported(self.device) if fp8 and not cpu else None
        if why is not None:
            raise RuntimeError(f"fp8=True cannot run here: {why}")
        self.background = (not cpu) if background is None else background  # (CPU: tests of the mechanism)
        self.max_len = int(max_len)
        self.pad_id = int(config.pad_token_id if pad_id is None else pad_id)
        self.d = config.hidden_size
        self.heads = config.num_attention_heads
        self.dh = self.d // self.heads
        self.head_heads = head_heads(self.d)
        self.n_act = model.act_head[-1].out_features
        if self.head_heads * HEAD_DH != self.d:
            raise ValueError(f"FastLaya's head attention needs d to be a multiple of {HEAD_DH}, got {self.d}")
        self.window = int(getattr(config, "sliding_window", None) or config.local_attention // 2)
        self._lock = threading.RLock()
        self._features_lock = threading.Lock()  # one build per features width (see _features)
        self._slots: dict[Plan, PlanSlot] = {}
        self._pool = None
        self.captures = 0
        self.capture_after = CAPTURE_AFTER if self.use_graphs else 1
        with torch.no_grad():
            self._copy_weights(model, config)
            self._rope_tables(encoder, config)
        self._build_kernels()

    # ---- construction ----------------------------------------------------------------------------

    def _copy_weights(self, model, config) -> None:
        dt, enc = self.dtype, model.encoder
        # fp16 holds the published (fp16) embedding table losslessly; gathered rows are upcast to fp32.
        self.emb = enc.embeddings.tok_embeddings.weight.detach().to(torch.float32 if self.cpu else torch.float16)
        self.emb_norm = NormWeight(enc.embeddings.norm)
        self.layers = []
        types = list(getattr(config, "layer_types", None) or [])
        weight = FP8.Fp8Weight if self.fp8 else (lambda w, b: GemmWeight(w, b, dt))
        for i, layer in enumerate(enc.layers):
            nxt = enc.layers[i + 1].attn_norm if i + 1 < len(enc.layers) else enc.final_norm
            kind = types[i] if types else ("full_attention" if i % config.global_attn_every_n_layers == 0
                                           else "sliding_attention")
            self.layers.append(dict(
                qkv=weight(layer.attn.Wqkv.weight, layer.attn.Wqkv.bias),
                o=weight(layer.attn.Wo.weight, layer.attn.Wo.bias),
                up=weight(layer.mlp.Wi.weight, None),
                down=weight(layer.mlp.Wo.weight, None),
                mlp_norm=NormWeight(layer.mlp_norm), next_norm=NormWeight(nxt), kind=kind,
                window=self.window if kind == "sliding_attention" else 0))
        self.head = []
        for layer in (model.head.layers if model.head is not None else ()):
            attn = layer.self_attn
            self.head.append(dict(
                qkv=GemmWeight(attn.in_proj_weight, attn.in_proj_bias, dt),
                o=GemmWeight(attn.out_proj.weight, attn.out_proj.bias, dt),
                ffn1=GemmWeight(layer.linear1.weight, layer.linear1.bias, dt),
                ffn2=GemmWeight(layer.linear2.weight, layer.linear2.bias, dt),
                norm1=NormWeight(layer.norm1), norm2=NormWeight(layer.norm2)))
        self.type_emb = model.type_emb.weight.detach().float().contiguous()
        # The decision step's Linears in 16 bits once: under autocast they would cast their fp32 weights
        # on every replay (cast kernels in the graph) to the same 16-bit numbers.  LayerNorm keeps fp32,
        # as autocast runs it.
        self.decider = model if self.cpu else SimpleNamespace(
            scorer=linears_in(model.scorer, dt), act_head=linears_in(model.act_head, dt))
        self.ffn = enc.layers[0].mlp.Wo.weight.shape[1]

    def _rope_tables(self, encoder, config) -> None:
        """cos/sin [max_len, Dh/2] per layer type, from the encoder's own rotary module (so every RoPE
        variant transformers supports is honoured), rounded through the 16-bit dtype, stored fp32."""
        positions = torch.arange(self.max_len, device=self.device)[None]
        probe = torch.zeros(1, device=self.device, dtype=self.dtype)
        half = self.dh // 2
        self.rope = {}
        for kind in {layer["kind"] for layer in self.layers}:
            cos, sin = encoder.rotary_emb(probe, positions, layer_type=kind)
            self.rope[kind] = (cos[0, :, :half].float().contiguous(), sin[0, :, :half].float().contiguous())

    def _build_kernels(self) -> None:
        """One kernel set per token-row class: ``self.sets[c][name]``, each GEMM with its split-K factor
        (0: plain).  Classes whose tiles agree share one compiled kernel (the factories cache by arguments).
        The classes the warm-up shapes need are built here; on CUDA (``background=True``) the others are
        built in the background, smallest first (by a child process filling the kernel store where one is
        active, then loaded from it; else by a thread), and a request whose class is not built yet builds it
        (or waits for the thread's build of it) first: every class always runs its own kernels."""
        self.kernel_dtype = "float32" if self.cpu else {torch.bfloat16: "bfloat16", torch.float16: "float16"}[self.dtype]
        self._windows = sorted({layer["window"] for layer in self.layers})
        n = len(M_CLASSES)
        self.sets, self.splits, self.attn_bm = [None] * n, [None] * n, [None] * n
        self._class_locks = [threading.Lock() for _ in range(n)]
        self._builder = None
        # Whether a request of a class not built yet may go through built classes in parts (its rows' bits
        # then depend on build progress): only for callers whose answers already depend on batch company
        # (the server's dynamic batching); a direct predict builds the class and waits.
        self.split_while_building = False
        first = sorted({m_class(rows * tokens) for rows, tokens, _ in DEFAULT_WARMUP_SHAPES})
        start = time.perf_counter()
        self.features = {}  # width -> kernel; FEATURES_WIDTH's is built with the first classes
        self._build_classes(first if self.background else range(n),
                            {("features", None): self._features_request(FEATURES_WIDTH)})
        self.compile_s = time.perf_counter() - start
        rest = [c for c in range(n) if self.sets[c] is None]
        if rest:
            self._builder = threading.Thread(target=self._build_rest, args=(rest, self._start_child(rest)),
                                             name="laya-kernels", daemon=True)
            _BUILDERS[:] = [t for t in _BUILDERS if t.is_alive()] + [self._builder]
            self._builder.start()

    def _build_rest(self, classes: list, child) -> None:
        try:
            for c in classes:
                if child is not None:
                    child.wait_for(c)  # (a child that died: this thread compiles the rest itself)
                if _STOP_BUILDERS.is_set():
                    return
                try:
                    self._build_classes([c])  # from the store once the child has filled it
                except Exception as e:  # noqa: BLE001 - the request that needs class c builds it, raising there
                    self._log(f"background build of class {c} failed ({type(e).__name__}: {e})")
        finally:
            if child is not None:
                child.stop()

    def _start_child(self, classes: list):
        """The child process that traces and compiles `classes` into the kernel store (None: no store)."""
        store = kernel_cache.active()
        if store is None or not store.writable:  # a child could not publish what it builds
            return None
        work = {c: self._class_requests([c])[0] for c in classes}
        child = kernel_builder.BuilderProcess(kernel_builder.payload(work, self.cpu), store.root)
        _CHILDREN[:] = [c for c in _CHILDREN if c.proc.poll() is None] + [child]
        return child

    def build_all(self) -> float:
        """Build every class's kernels now (prebuild, benchmarks); returns the seconds it took."""
        start = time.perf_counter()
        self._build_classes([c for c in range(len(M_CLASSES)) if self.sets[c] is None])
        return time.perf_counter() - start

    @property
    def built(self) -> bool:
        return all(s is not None for s in self.sets)

    def _building(self) -> bool:
        return self._builder is not None and self._builder.is_alive()

    def _ensure_class(self, c: int) -> None:
        if self.sets[c] is None:
            self._build_classes([c])

    def _build_classes(self, classes, extra: dict | None = None) -> None:
        """Compile the kernels of token-row `classes` in one parallel compile and publish each class's set."""
        classes = sorted(classes)
        with contextlib.ExitStack() as held:
            for c in classes:  # always in ascending order: no two builders deadlock
                held.enter_context(self._class_locks[c])
            todo = [c for c in classes if self.sets[c] is None]
            requests, splits = self._class_requests(todo, extra)
            if not requests:
                return
            start = time.perf_counter()
            kernels = self._compile(requests)
            if ("features", None) in kernels:
                self.features[FEATURES_WIDTH] = kernels[("features", None)]
            for c in todo:
                self.attn_bm[c] = self._varlen_bm(c, self._windows, requests, kernels)
                self.splits[c] = {name: splits[(name, cc)] for name, cc in splits if cc == c}
                self.sets[c] = {**{name: kernels[(name, cc)] for name, cc in requests if cc == c},
                                **self._torch_gemms(c)}  # published last
            self._log(f"classes {todo}: {len({id(k) for k in kernels.values()})} kernels in "
                      f"{time.perf_counter() - start:.1f} s")

    def _class_requests(self, classes, extra: dict | None = None) -> tuple[dict, dict]:
        """(kernel requests {key: (factory, args, kwargs)}, split-K factors) of token-row `classes`."""
        requests: dict[Any, tuple] = dict(extra or {})
        splits: dict[Any, int] = {}
        for c in classes:
            self._gemm_requests(c, requests, splits)
            self._row_requests(c, self._windows, requests, splits)
        for _, _, kwargs in requests.values():
            kwargs["dtype"] = self.kernel_dtype
        return requests, splits

    def _tiles(self, kind: str, c: int) -> dict:
        """The table's tile of `kind` for class `c`; the CPU specialisation keeps the kernels' default tiles
        but the table's split-K factor and cuBLAS choice, so that its tests run the same composition as the GPU."""
        cfg = dict(GPU_TILES[kind][c])
        if self.cpu:
            return {key: cfg[key] for key in ("splits", "cublas") if cfg.get(key)}
        return cfg

    def _gemm_roles(self) -> tuple:
        """(name, table kind, N, K, bias, act) of every GEMM the table tiles: the head's, and the encoder's
        unless they run in FP8 (torch); "up" is the encoder's GEGLU."""
        d, f = self.d, self.ffn
        encoder: tuple = ()
        if not self.fp8:
            enc_bias = self.layers[0]["qkv"].has_bias if self.layers else False
            encoder = (("qkv", "wide", 3 * d, d, enc_bias, "none"), ("o", "o", d, d, enc_bias, "none"),
                       ("down", "down", d, f, False, "none"), ("up", "geglu", f, d, False, "geglu"))
        return encoder + (("h_qkv", "wide", 3 * d, d, True, "none"), ("h_o", "narrow", d, d, True, "none"),
                          ("h_ffn1", "wide", 4 * d, d, True, "relu"), ("h_ffn2", "narrow", d, 4 * d, True, "none"))

    def _gemm_requests(self, c: int, requests: dict, splits: dict) -> None:
        """The TileLang GEMMs of class `c` (those the table gives cuBLAS: `_torch_gemms`, without split-K)."""
        for name, kind, n, k, bias, act in self._gemm_roles():
            cfg = self._tiles(kind, c)
            if cfg.pop("cublas", False):
                splits[(name, c)] = 0  # cuBLAS writes the whole product: its add_ln sums no partials
                continue
            splits[(name, c)] = cfg.pop("splits", 0)
            if act == "geglu":
                requests[(name, c)] = (K.gemm_geglu_kernel, (n, k), cfg)
            elif splits[(name, c)]:
                requests[(name, c)] = (K.gemm_splitk_kernel, (n, k, splits[(name, c)]), dict(bias=bias, **cfg))
            else:
                requests[(name, c)] = (K.gemm_kernel, (n, k), dict(bias=bias, act=act, **cfg))

    def _torch_gemms(self, c: int) -> dict:
        """The GEMMs of class `c` the table gives cuBLAS, as callables with the kernels' signatures."""
        return {name: TorchGeglu(n) if act == "geglu" else TorchGemm(bias, act)
                for name, kind, n, k, bias, act in self._gemm_roles() if self._tiles(kind, c).get("cublas")}

    def _row_requests(self, c: int, windows: list, requests: dict, splits: dict) -> None:
        """add + LayerNorm (each summing its residual GEMM's partials), RoPE and attention of class `c`."""
        d = self.d
        ln_eps = self.layers[0]["mlp_norm"].eps if self.layers else 1e-5
        norm_bias = self.layers[0]["mlp_norm"].has_bias if self.layers else False
        head_eps = self.head[0]["norm1"].eps if self.head else 1e-5
        for name, gemm, residual, bias, eps in (("ln_o", "o", True, norm_bias, ln_eps),
                                                ("ln_down", "down", True, norm_bias, ln_eps),
                                                ("h_ln", None, False, True, head_eps),
                                                ("h_add_ln", "h_o", True, True, head_eps)):
            if self.fp8 and not self.cpu and name == "ln_o":
                continue  # (on the GPU the FP8 encoder's add_ln quantises: ln_o8; ln_down serves its last layer)
            requests[(name, c)] = (K.add_ln_kernel, (d,), dict(
                residual=residual, bias=bias, eps=eps, splits=splits.get((gemm, c), 0), **self._tiles("add_ln", c)))
        if self.fp8 and not self.cpu:  # (the C target has no e4m3: the CPU specialisation quantises in torch)
            for name in ("ln_o8", "ln_down8"):
                requests[(name, c)] = (K.add_ln_quant_kernel, (d,), dict(bias=norm_bias, eps=ln_eps,
                                                                         **self._tiles("add_ln", c)))
            for name, width, glu in (("quant", d, False), ("quant_glu", self.ffn, True)):
                requests[(name, c)] = (K.quant_rows_kernel, (width,), dict(glu=glu, bm=1, threads=quant_threads(width)))
        for name, factory in (("rope", K.rope_kernel), ("rope_at", K.rope_positions_kernel)):
            requests[(name, c)] = (factory, (self.heads, self.dh), self._tiles("rope", c))
        for window in windows:
            attn = self._tiles("attn_window" if window else "attn_full", c)
            requests[(("attn", window), c)] = (K.attn_kernel, (None, None, self.heads, self.dh),
                                               dict(window=window, **attn))
            # packed plans: attention over sequences found by (start, length)
            requests[(("attn_varlen", window), c)] = (K.attn_varlen_kernel, (self.max_len, self.heads, self.dh),
                                                      dict(window=window, **attn))
        attn = self._tiles("attn_full", c)
        requests[("h_attn", c)] = (K.attn_kernel, (None, None, self.head_heads, HEAD_DH), dict(window=0, **attn))
        requests[("h_attn_varlen", c)] = (K.attn_varlen_kernel, (self.max_len, self.head_heads, HEAD_DH),
                                          dict(window=0, **attn))

    def _varlen_bm(self, c: int, windows: list, requests: dict, kernels: dict) -> int:
        """The one query-block size of class `c`'s varlen attention kernels (packed attention's block table
        is built for one bm).  Read from the arguments each was compiled with (a tuned tile may have fallen
        back to the defaults); where they differ, all of them are recompiled with the default tiles."""
        varlen = [("attn_varlen", window) for window in windows] + ["h_attn_varlen"]
        bms = {self._bm_of(requests[(name, c)]) for name in varlen}
        if len(bms) > 1:
            self._log(f"class {c}: varlen attention tiles disagree on bm {sorted(bms)}; default tiles")
            for name in varlen:
                for t in TILE_KEYS:
                    requests[(name, c)][2].pop(t, None)
            kernels.update(self._compile({(name, c): requests[(name, c)] for name in varlen}))
            bms = {self._bm_of(requests[(name, c)]) for name in varlen}
        (bm,) = bms
        return bm

    @staticmethod
    def _bm_of(request: tuple) -> int:
        """The query-block size of an attention request (factory, args, kwargs), defaults applied."""
        factory, args, kwargs = request
        return dict(factory.key_of(args, kwargs)[0])["bm"]

    def _compile(self, requests: dict) -> dict:
        if self.cpu:
            return {key: K.compile_cpu(f, *a, **kw) for key, (f, a, kw) in requests.items()}
        try:
            K.compile_many(list(requests.values()))
        except Exception as e:  # noqa: BLE001 - compiled one by one below, with the failing one named
            self._log(f"parallel compile failed ({type(e).__name__}: {e}); compiling one by one")
        kernels = {}
        for key, (f, a, kw) in requests.items():
            try:
                kernels[key] = f(*a, **kw)
            except Exception as e:  # noqa: BLE001 - a tuned tile the compiler rejects: use the defaults
                tuned = {t: kw.pop(t) for t in TILE_KEYS if t in kw}
                if not tuned:
                    raise
                self._log(f"kernel {key} with tiles {tuned} failed ({type(e).__name__}); default tiles")
                kernels[key] = f(*a, **kw)
        return kernels

    def _log(self, message: str) -> None:
        if self.verbose:
            print(f"laya.fast: {message}", file=sys.stderr)

    # ---- planning ----------------------------------------------------------------------------------

    def plan(self, rows: int, length: int, lens: np.ndarray | None) -> Plan:
        """Dense or packed geometry for `rows` x `length` with real lengths `lens` (None = unknown)."""
        if length > self.max_len:
            raise ValueError(f"this request has rows of {length} tokens but the fast path was built for at "
                             f"most {self.max_len} (max_len); shorten the state or pass max_len<={self.max_len}")
        b, width = bucket_rows(rows), bucket_tokens(length, self.max_len)
        if lens is not None:
            real = bucket_packed(int(lens.sum()))
            if b * width > PACK_RATIO * real:
                return Plan(True, b, 0, real)  # packed rows need no padded length: one plan per (B, M)
        return Plan(False, b, width, b * width)

    def _slot(self, plan: Plan) -> PlanSlot:
        slot = self._slots.get(plan)
        if slot is None:
            # packed plans: the block table of the bm that _body's class for this plan uses (see _body)
            bm = self.attn_bm[m_class(plan.tokens)] if plan.packed else None
            slot = self._slots[plan] = PlanSlot(plan, self.device, bm)
        return slot

    def _head(self, plan: Plan, slot: PlanSlot, k: int) -> DecisionStep:
        head = slot.heads.get(k)
        if head is None:
            head = slot.heads[k] = DecisionStep(plan, k, self.n_act, self.device)
        return head

    # ---- the forward -------------------------------------------------------------------------------

    def __call__(self, input_ids, attention_mask, marker_pos, marker_mask, qtype):
        """-> (logits [N, K] fp32, act logits [N, n_act] fp32), both on the host: the request's one
        device-to-host copy is part of the forward.  Inputs are best on the host (the tilelang backend
        passes the collated CPU batch); device tensors work too, at the cost of a copy back first."""
        ids, mask, markers, live, types = (t.cpu().numpy() for t in (input_ids, attention_mask, marker_pos,
                                                                     marker_mask, qtype))
        n, length = ids.shape
        k = markers.shape[1]
        lens = mask.sum(1, dtype=np.int64)
        # a single row is always dense: its length does not choose the layout
        plan = self.plan(n, length, lens if n > 1 else None)
        # a graph computes plan.tokens rows, an eager run only the request's own (_fill's extent)
        needed = {m_class(m) for m in {plan.tokens, int(lens.sum()) if plan.packed else n * plan.length}}
        if n > 1 and self.split_while_building and self._building() and any(self.sets[c] is None for c in needed):
            # rows are independent: halves through classes already built answer now, where a compile of
            # this class would hold the request for seconds (serve_cold_h200_2026-12-02.json)
            inputs = (input_ids, attention_mask, marker_pos, marker_mask, qtype)
            parts = [self(*(t[:n // 2] for t in inputs)), self(*(t[n // 2:] for t in inputs))]
            return tuple(torch.cat(pair) for pair in zip(*parts))
        # like a features width, a class not built yet is built before the forward lock
        for c in needed:
            self._ensure_class(c)
        self._features(k)  # a width not built yet compiles here, before the lock: other requests go on meanwhile
        with self._lock, torch.no_grad():
            slot = self._slot(plan)
            head = self._head(plan, slot, k)
            extent = self._fill(plan, slot, head, ids, lens, markers, live, types)
            self._run(plan, slot, head, extent)
            # copied out under the lock: the next request reuses head.result
            b, result = plan.rows, head.host_result
            logits = result[:b * k].reshape(b, k)[:n].copy()
            act = result[b * k:].reshape(b, self.n_act)[:n].copy()
        return torch.from_numpy(logits), torch.from_numpy(act)

    def _fill(self, plan: Plan, slot: PlanSlot, head: DecisionStep, ids: np.ndarray, lens: np.ndarray,
              markers: np.ndarray, live: np.ndarray, types: np.ndarray) -> tuple[int, int, int]:
        """Write this request into the host twins of the plan's static inputs and of its head's gather
        index and marker mask, and return its extent (token rows, sequence rows, block-table entries):
        the leading part of the plan's buffers that it fills.  Rows, tokens and blocks the request does
        not use are reset: a previous request of the same plan may have written them, and a graph replay
        reads them all."""
        n, length = ids.shape
        tok_ids, tok_types, positions = slot.host_ids, slot.host_types, slot.host_positions
        seq_lens, starts = slot.host_lens, slot.host_starts
        tok_ids.fill(self.pad_id)
        seq_lens[:n] = lens
        seq_lens[n:] = 0
        if plan.packed:
            # token t of row r sits at packed row starts[r] + t; the bucket's dummy rows after the last
            # sequence hold pad tokens of type 0 at position 0
            starts[0] = 0
            starts[1:n] = np.cumsum(lens[:-1])
            starts[n:] = 0
            real = int(lens.sum())
            row_of = np.repeat(np.arange(n), lens)
            pos = np.arange(real) - starts[row_of]
            tok_ids[:real] = ids[row_of, pos]
            tok_types[:real] = types[row_of]
            tok_types[real:] = 0
            positions[:real] = pos
            positions[real:] = 0
            # the query blocks that hold queries; the rest of the table is no-op entries
            live_blocks = K.varlen_blocks(lens, self.max_len, slot.bm)
            nb = live_blocks.shape[0]
            slot.host_blocks[:nb] = live_blocks
            slot.host_blocks[nb:] = -1
            extent = (real, n, max(nb, 1))  # (a launch needs a non-empty grid: one no-op entry if none)
        else:  # dense: positions are the column (RoPE reads its table by column), starts fixed per plan
            grid = tok_ids.reshape(plan.rows, plan.length)
            grid[:n, :length] = ids
            grid_types = tok_types.reshape(plan.rows, plan.length)
            grid_types[:n] = types[:, None]
            grid_types[n:] = 0
            extent = (n * plan.length, n, 0)
        index, marker_live = head.host_index, head.host_live
        index[:n, 0] = 0
        index[:n, 1:] = np.maximum(markers, 0)
        index[:n] += starts[:n, None]
        index[n:] = 0
        marker_live[:n] = live
        marker_live[n:] = 0
        return extent

    def _run(self, plan: Plan, slot: PlanSlot, head: DecisionStep, extent: tuple[int, int, int]) -> None:
        """Copy the request in, run the encoder then the decision step (replayed from their graphs once
        captured), copy both outputs into head.result and wait for them.  A graph computes the whole
        plan; an eager run computes only the request's `extent` (from `_fill`), so the bucket's dummy
        token rows and sequences cost nothing where no graph needs the fixed shape.  The copies are calls of their
        own, not nodes of the graphs (which also works): on the H200 neither was measurably faster end to
        end (latency_host_path_h200_2026-11-30.json), and graphs of device work alone are simpler."""
        graphs = self.use_graphs and plan.tokens <= GRAPH_MAX_TOKENS
        if graphs and slot.graph is None:
            slot.runs += 1
            if slot.runs >= self.capture_after:  # (its eager warm-up runs read the last request's inputs)
                start = time.perf_counter()
                slot.graph, slot.out = self._capture(lambda: self._body(plan, slot))
                self.captures += 1
                self._log(f"captured {plan} in {1e3 * (time.perf_counter() - start):.0f} ms")
        if slot.graph is not None and head.graph is None:  # a few torch ops on the plan's output: at once
            head.graph, head.out = self._capture(lambda: self._decide(slot.out, head))
        pinned = not self.cpu  # (host twins are pinned on CUDA: asynchronous copies)
        slot.static.copy_(slot.host, non_blocking=pinned)
        head.static.copy_(head.host, non_blocking=pinned)
        if slot.graph is None:
            out = self._decide(self._body(plan, slot, extent), head)
        else:
            slot.graph.replay()
            head.graph.replay()
            out = head.out
        head.result.copy_(out, non_blocking=pinned)
        if pinned:
            torch.cuda.current_stream(self.device).synchronize()

    def _capture(self, run) -> tuple[Any, Any]:
        """(graph, output) of `run` captured into the shared pool (replays never overlap: the lock)."""
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # two eager runs first: lazy init must not happen during capture
            for _ in range(2):
                run()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # thread_local: other threads keep making CUDA calls outside the lock while a plan is captured
        # (decoding after it); the default "global" mode would fail them.
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            out = run()
        return graph, out

    def _decide(self, hidden: torch.Tensor, head: DecisionStep) -> torch.Tensor:
        """Scorer and act head on each bucket row's CLS and marker rows of `hidden`, as the eager model
        under the agent's autocast (`model.decide`): [logits B x k | act logits B x n_act] fp32.  The
        masking, the confidence features and the act head's input between the two are one kernel: in torch
        they were ~20 launches of a few microseconds each, ~40% of this step's GPU time at one question.
        Autocast is explicit (the same numbers whoever calls) and uncached (graph capture needs that)."""
        b, k = head.live.shape
        rows = hidden.index_select(0, head.index).view(b, k + 1, self.d)  # CLS, then marker j at row j
        logits = torch.empty(b, k, dtype=torch.float32, device=self.device)
        act_input = torch.empty(b, self.d + N_FEATURES, dtype=torch.float32, device=self.device)
        with torch.autocast(self.device.type, dtype=self.dtype, enabled=not self.cpu, cache_enabled=False):
            scores = self.decider.scorer(rows[:, 1:]).view(b, k)
            self._features(k)(scores, head.live, rows, logits, act_input)
            act = self.decider.act_head(act_input)
        return torch.cat([logits.reshape(-1), act.float().reshape(-1)])

    def _features(self, k: int):
        """The decide_features kernel for k option columns: one per power-of-two width (k is a run-time
        argument), the common width built with the others, a wider one on first need (by `__call__` before
        it takes the forward lock: a build takes seconds, and requests of other widths go on meanwhile)."""
        width = max(FEATURES_WIDTH, 1 << (k - 1).bit_length())
        kernel = self.features.get(width)
        if kernel is None:
            with self._features_lock:  # (requests of built widths never take this lock)
                kernel = self.features.get(width)
                if kernel is None:
                    (kernel,) = self._compile({width: self._features_request(width)}).values()
                    self.features[width] = kernel
        return kernel

    def _features_request(self, width: int) -> tuple:
        """The (factory, args, kwargs) compile request of the features kernel `width` columns wide."""
        return K.decide_features_kernel, (self.d,), dict(width=width, dtype=self.kernel_dtype)

    def _body(self, plan: Plan, slot: PlanSlot, extent: tuple[int, int, int] | None = None) -> torch.Tensor:
        """Encoder and decision head over the leading `extent` = (token rows m, sequence rows b, block-table
        entries nb) of the plan's buffers (None: all of them, as a graph captures): the fp32 head output
        rows [m, d]."""
        m, b, nb = extent or (plan.tokens, plan.rows, slot.blocks.shape[0])
        c = m_class(m)
        # The slot's table was built for the class of plan.tokens.  A packed request's token count is in
        # the same class (bucket_packed never crosses a power of two >= 16, the class bounds), but a table
        # for another bm would silently compute the wrong blocks: check.
        if plan.packed and self.attn_bm[c] != slot.bm:
            raise RuntimeError(f"block table built for bm={slot.bm}, class {c} attention uses {self.attn_bm[c]}")
        ks, d = self.sets[c], self.d
        ids, types, positions, lens, starts = slot.ids[:m], slot.types[:m], slot.positions[:m], \
            slot.lens[:b], slot.starts[:b]
        inputs = (positions, lens, starts, slot.blocks[:nb])

        def gemm(name: str, a: torch.Tensor, lin: GemmWeight) -> torch.Tensor:
            return self._gemm(ks[name], self.splits[c][name], a, lin)

        x = F.layer_norm(F.embedding(ids, self.emb).float(), (d,), self.emb_norm.w,
                         self.emb_norm.b if self.emb_norm.has_bias else None, self.emb_norm.eps)
        y = x.to(self.dtype)
        # Packed: one attention output for all layers (encoder and head are both d wide), zeroed once so
        # the dummy rows that attention never writes stay finite.
        attn_out = torch.zeros(m, d, dtype=self.dtype, device=self.device) if plan.packed else None
        if self.fp8:
            y = self._encoder_fp8(plan, inputs, ks, x, y, attn_out)
        else:
            for layer in self.layers:
                qkv = gemm("qkv", y, layer["qkv"])
                o = self._attend(plan, inputs, ks, qkv, attn_out, layer["window"], self.heads, self.dh,
                                 self._rope_of(plan, layer))
                y = self._add_ln(ks["ln_o"], x, gemm("o", o, layer["o"]), layer["mlp_norm"])
                g = torch.empty(m, self.ffn, dtype=self.dtype, device=self.device)
                ks["up"](y, layer["up"].w, g)
                y = self._add_ln(ks["ln_down"], x, gemm("down", g, layer["down"]), layer["next_norm"])
        x = y.float() + self.type_emb[types]
        for layer in self.head:
            y = self._add_ln(ks["h_ln"], x, None, layer["norm1"])
            qkv = gemm("h_qkv", y, layer["qkv"])
            o = self._attend(plan, inputs, ks, qkv, attn_out, None, self.head_heads, HEAD_DH, None)
            y = self._add_ln(ks["h_add_ln"], x, gemm("h_o", o, layer["o"]), layer["norm2"])
            f1 = gemm("h_ffn1", y, layer["ffn1"])
            x.add_(gemm("h_ffn2", f1, layer["ffn2"]))
        return x

    def _rope_of(self, plan: Plan, layer: dict) -> tuple:
        cos, sin = self.rope[layer["kind"]]
        return (cos, sin) if plan.packed else (cos[:plan.length], sin[:plan.length])

    def _encoder_fp8(self, plan: Plan, inputs: tuple, ks: dict, x: torch.Tensor, y: torch.Tensor,
                     attn_out) -> torch.Tensor:
        """The encoder with its four Linears as e4m3 GEMMs (torch._scaled_mm: per-token activation scales,
        per-channel weight scales, fp32 accumulation, bf16 out); every operand is quantised by the kernel
        that makes it (add_ln, attention's output, GEGLU), the residual stream and all else as in bf16.
        Returns the last layer's LayerNorm output in 16 bits (the head's input)."""
        a = self._quantize(ks, "quant", y)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            qkv = FP8.gemm(*a, layer["qkv"], self.dtype)
            o = self._attend(plan, inputs, ks, qkv, attn_out, layer["window"], self.heads, self.dh,
                             self._rope_of(plan, layer))
            a = self._add_ln_fp8(ks, "ln_o", x, FP8.gemm(*self._quantize(ks, "quant", o), layer["o"], self.dtype),
                                 layer["mlp_norm"])
            h = FP8.gemm(*a, layer["up"], self.dtype)  # [M, 2F]: GEGLU's input and gate halves
            down = FP8.gemm(*self._quantize(ks, "quant_glu", h), layer["down"], self.dtype)
            if i == last:
                return self._add_ln(ks["ln_down"], x, down, layer["next_norm"])
            a = self._add_ln_fp8(ks, "ln_down", x, down, layer["next_norm"])
        return y  # (no encoder layers)

    def _quantize(self, ks: dict, name: str, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(e4m3 rows, fp32 row scales) of `a` ("quant") or of GEGLU(`a`) ("quant_glu"), by laya.fp8's rule."""
        width = a.shape[1] // 2 if name == "quant_glu" else a.shape[1]
        if self.cpu:  # laya.fp8's reference: the C target has no e4m3
            if name == "quant_glu":
                a = F.gelu(a[:, :width]) * a[:, width:]
            return FP8.quantize_rows(a)
        q = torch.empty(a.shape[0], width, dtype=FP8.E4M3, device=self.device)
        scale = torch.empty(a.shape[0], dtype=torch.float32, device=self.device)
        ks[name](a, q, scale)
        return q, scale

    def _add_ln_fp8(self, ks: dict, name: str, x: torch.Tensor, residual: torch.Tensor,
                    norm: NormWeight) -> tuple[torch.Tensor, torch.Tensor]:
        """x += residual, then LayerNorm(x) as the next GEMM's (e4m3 rows, fp32 scales)."""
        if self.cpu:
            return FP8.quantize_rows(self._add_ln(ks[name], x, residual, norm))
        q = torch.empty(x.shape, dtype=FP8.E4M3, device=self.device)
        scale = torch.empty(x.shape[0], dtype=torch.float32, device=self.device)
        ks[name + "8"](x, residual, norm.w, norm.b, q, scale)
        return q, scale

    def _gemm(self, kernel, splits: int, a: torch.Tensor, lin: GemmWeight) -> torch.Tensor:
        """A @ W^T (+ b) in 16 bits [M, N], or with split-K (splits > 0) its fp32 partials [splits, M, N]
        for the add_ln kernel compiled with the same factor."""
        if splits:
            out = torch.empty(splits, a.shape[0], lin.w.shape[0], dtype=torch.float32, device=self.device)
        else:
            out = torch.empty(a.shape[0], lin.w.shape[0], dtype=self.dtype, device=self.device)
        kernel(a, lin.w, lin.b, out)
        return out

    def _add_ln(self, kernel, x: torch.Tensor, residual: torch.Tensor | None, norm: NormWeight) -> torch.Tensor:
        """x += residual (in place, fp32) then LayerNorm(x) in 16 bits; residual None = LayerNorm only."""
        y = torch.empty(x.shape, dtype=self.dtype, device=self.device)
        kernel(x, y if residual is None else residual, norm.w, norm.b, y)  # R is ignored without residual
        return y

    def _attend(self, plan: Plan, inputs: tuple, ks: dict, qkv: torch.Tensor, attn_out, window: int | None,
                heads: int, dh: int, rope) -> torch.Tensor:
        """RoPE (encoder layers) and attention for one layer; window None = the decision head's.
        `inputs` = (positions, lens, starts, blocks): the run's views of the slot's static inputs."""
        positions, lens, starts, blocks = inputs
        if plan.packed:
            if rope is not None:
                ks["rope_at"](qkv, *rope, positions)
            kernel = ks["h_attn_varlen"] if window is None else ks[("attn_varlen", window)]
            kernel(qkv.view(-1, 3, heads, dh), starts, lens, blocks, attn_out)
            return attn_out
        if rope is not None:
            ks["rope"](qkv, *rope)
        b, width = lens.shape[0], plan.length
        out = torch.empty(b * width, heads * dh, dtype=self.dtype, device=self.device)
        kernel = ks["h_attn"] if window is None else ks[("attn", window)]
        kernel(qkv.view(b, width, 3, heads, dh), lens, out.view(b, width, heads * dh))
        return out

    # ---- warm-up -----------------------------------------------------------------------------------

    def warmup(self, shapes: Any = None) -> float:
        """Run (rows, tokens, markers) shapes capture_after times each (capturing their CUDA graphs);
        returns seconds."""
        start = time.perf_counter()
        for rows, tokens, markers in [s for s in shapes or DEFAULT_WARMUP_SHAPES for _ in range(self.capture_after)]:
            self(*warmup_batch(rows, tokens, markers, self.pad_id + 1, self.max_len).tensors())
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start
