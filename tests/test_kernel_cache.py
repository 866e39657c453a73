"""The persistent kernel cache (laya.kernel_cache): keys, warm loads, corrupt entries, racing processes.

Runs on the CPU specialisation (TileLang's C target), which goes through the same store as the GPU kernels.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang")
if shutil.which("g++") is None and shutil.which("c++") is None:
    pytest.skip("TileLang's C target needs a C++ compiler", allow_module_level=True)

from laya import kernel_cache, tl_kernels as K  # noqa: E402

pytestmark = pytest.mark.fast_extra
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = (48, 32)  # gemm N, K: small, compiles in about a second


@pytest.fixture
def store(tmp_path):
    previous = kernel_cache.active()
    yield kernel_cache.use(str(tmp_path / "kernels"))
    kernel_cache.use(previous.root if previous is not None else None)
    K.gemm_kernel.cache_clear()


def run_gemm(kernel, shape=SHAPE):
    g = torch.Generator().manual_seed(7)
    a, w, b = torch.randn(5, shape[1], generator=g), torch.randn(*shape, generator=g), torch.randn(shape[0], generator=g)
    out = torch.empty(5, shape[0])
    kernel(a, w, b, out)
    torch.testing.assert_close(out.double(), torch.relu(a.double() @ w.double().T + b.double()), atol=1e-4, rtol=1e-5)
    return out


def entry_files(store):
    return [os.path.join(d, f) for d, _, files in os.walk(store.root) for f in files
            if f.endswith(".json") and os.path.basename(d).startswith("v")]


def test_request_key_changes_with_every_argument_and_pass_config():
    base = (("N", 48), ("K", 32), ("act", "relu"), ("dtype", "float32"))
    key = kernel_cache.request_key("_gemm_kernel", base, {"a": True})
    assert kernel_cache.request_key("_gemm_kernel", base, {"a": True}) == key
    assert kernel_cache.request_key("_gemm_splitk_kernel", base, {"a": True}) != key
    assert kernel_cache.request_key("_gemm_kernel", base, {"a": False}) != key
    for i, (name, value) in enumerate(base):
        changed = base[:i] + ((name, value * 2 if isinstance(value, int) else value + "x"),) + base[i + 1:]
        assert kernel_cache.request_key("_gemm_kernel", changed, {"a": True}) != key, name


def test_namespace_changes_with_every_stamp_input():
    stamp = kernel_cache.environment_stamp("c", ["-O3"])
    ns = kernel_cache.namespace_of(stamp)
    assert kernel_cache.namespace_of(dict(stamp)) == ns
    for field in ("kernel_source", "tilelang", "target", "compile_flags", "cpu_flags", "machine"):
        assert kernel_cache.namespace_of({**stamp, field: "other"}) != ns, field
    cuda = {**stamp, "target": "cuda", "arch": "sm_90", "torch_cuda": "13.0", "nvcc": "13.0.1"}
    for field, other in (("arch", "sm_89"), ("torch_cuda", "12.8"), ("nvcc", "12.9.0")):
        assert kernel_cache.namespace_of({**cuda, field: other}) != kernel_cache.namespace_of(cuda), field
    assert kernel_cache.environment_stamp("c", ["-O2"])["compile_flags"] == ["-O2"]


def test_kernel_source_hash_is_the_file_hash():
    import hashlib

    with open(K.__file__, "rb") as f:
        assert kernel_cache.kernel_source_hash() == hashlib.sha256(f.read()).hexdigest()


def test_root_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LAYA_KERNEL_CACHE", str(tmp_path / "k"))
    assert kernel_cache.default_root() == str(tmp_path / "k")
    for off in ("off", "0", "false", ""):
        monkeypatch.setenv("LAYA_KERNEL_CACHE", off)
        assert kernel_cache.default_root() is None
    monkeypatch.delenv("LAYA_KERNEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.default_root() == str(tmp_path / "xdg" / "laya" / "kernels")


def test_warm_store_skips_the_trace_and_gives_the_same_kernel(store, monkeypatch):
    cold = run_gemm(K.compile_cpu(K.gemm_kernel, *SHAPE, bias=True, act="relu"))
    assert (store.hits, store.misses) == (0, 1) and len(entry_files(store)) == 1
    assert os.path.isdir(os.path.join(store.root, "tilelang"))  # TileLang's binaries live under the same root

    K.gemm_kernel.cache_clear()  # a new process, as far as the factory knows
    from tilelang.jit import JITKernel

    def no_compile(*a, **kw):
        raise AssertionError("a warm store must not compile")
    monkeypatch.setattr(JITKernel, "_compile_and_create_adapter", no_compile)
    warm = run_gemm(K.compile_cpu(K.gemm_kernel, *SHAPE, bias=True, act="relu"))
    assert store.hits == 1
    assert torch.equal(cold, warm)


def test_an_unusable_store_warns_once_and_the_kernel_still_builds(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a store root below a regular file can be neither read nor written
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tilelang-own"))
    previous = kernel_cache.active()
    store = kernel_cache.use(str(blocker / "kernels"))
    K.gemm_kernel.cache_clear()
    try:
        with pytest.warns(RuntimeWarning) as caught:
            run_gemm(K.compile_cpu(K.gemm_kernel, *SHAPE, bias=True, act="relu"))
            K.gemm_kernel.cache_clear()
            run_gemm(K.compile_cpu(K.gemm_kernel, *SHAPE, bias=True, act="relu"))  # a second build: no second warning
        mine = [str(w.message) for w in caught if "kernel store" in str(w.message)]
        assert len(mine) == 1 and mine[0].startswith(f"laya: the kernel store {store.root} cannot be written (")
        assert mine[0].endswith("Point LAYA_KERNEL_CACHE at a writable directory (or 'off'), or prebuild that "
                                "store completely.")
        assert (store.hits, store.misses, store.writable) == (0, 2, False)
        assert os.environ["TILELANG_CACHE_DIR"] == str(tmp_path / "tilelang-own")  # not moved where it cannot write
    finally:
        kernel_cache.use(previous.root if previous is not None else None)
        K.gemm_kernel.cache_clear()


def test_a_read_only_complete_store_serves_its_binaries_silently(tmp_path, monkeypatch, recwarn):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tilelang-own"))
    previous = kernel_cache.active()
    root = str(tmp_path / "image-store")
    try:
        kernel_cache.use(root)
        K.gemm_kernel.cache_clear()
        cold = run_gemm(K.compile_cpu(K.gemm_kernel, *SHAPE, bias=True, act="relu"))  # the prebuild
        K.gemm_kernel.cache_clear()
        own = tmp_path / "tilelang-own"
        monkeypatch.setenv("TILELANG_CACHE_DIR", str(own))  # a new process on the image, whose layer is read-only
        store = kernel_cache.use(root)
        monkeypatch.setattr(store, "write_error", lambda: "PermissionError: Read-only file system")
        warm = run_gemm(K.compile_cpu(K.gemm_kernel, *SHAPE, bias=True, act="relu"))
        assert torch.equal(cold, warm) and (store.hits, store.misses) == (1, 0)
        assert os.environ["TILELANG_CACHE_DIR"] == store.tilelang_dir  # TileLang reads the image's binaries
        assert not [w for w in recwarn if "kernel store" in str(w.message)]

        with pytest.warns(RuntimeWarning, match="lacks kernels this forward needs"):
            run_gemm(K.compile_cpu(K.gemm_kernel, 40, 32, bias=True, act="relu"), shape=(40, 32))  # not prebuilt
        assert os.environ["TILELANG_CACHE_DIR"] == str(own) and any(own.rglob("*"))  # compiled and saved there
    finally:
        kernel_cache.use(previous.root if previous is not None else None)
        K.gemm_kernel.cache_clear()


@pytest.mark.parametrize("damage", ["garbage", "wrong_hash", "truncated"])
def test_a_corrupt_entry_is_rebuilt(store, damage):
    run_gemm(K.compile_cpu(K.gemm_kernel, *SHAPE, bias=True, act="relu"))
    (path,) = entry_files(store)
    with open(path) as f:
        text = f.read()
    if damage == "garbage":
        text = "not json at all"
    elif damage == "wrong_hash":
        entry = json.loads(text)
        entry["prim"] = entry["prim"].replace("48", "49", 1)
        text = json.dumps(entry)
    else:
        text = text[: len(text) // 2]
    with open(path, "w") as f:
        f.write(text)
    K.gemm_kernel.cache_clear()
    run_gemm(K.compile_cpu(K.gemm_kernel, *SHAPE, bias=True, act="relu"))
    assert store.rebuilt == 1
    with open(path) as f:
        entry = json.load(f)  # rewritten whole
    assert kernel_cache.KernelStore(store.root).load(os.path.basename(path)[:-5], "c", K.CPU_COMPILE_FLAGS) is not None
    assert entry["request"]["factory"] == "_gemm_kernel"


def test_two_processes_racing_on_one_entry_both_succeed(tmp_path):
    root = tmp_path / "kernels"
    script = textwrap.dedent(f"""
        import sys, time, torch
        sys.path.insert(0, {REPO!r})
        from laya import kernel_cache, tl_kernels as K
        kernel_cache.use({str(root)!r})
        while time.time() < float(sys.argv[1]):
            time.sleep(0.005)
        k = K.compile_cpu(K.gemm_kernel, {SHAPE[0]}, {SHAPE[1]}, bias=True, act="relu")
        a, w, b = torch.ones(3, {SHAPE[1]}), torch.ones({SHAPE[0]}, {SHAPE[1]}), torch.zeros({SHAPE[0]})
        out = torch.empty(3, {SHAPE[0]})
        k(a, w, b, out)
        assert torch.all(out == {SHAPE[1]}), out
        print("ok", kernel_cache.active().hits, kernel_cache.active().misses)
    """)
    import time

    start_at = str(time.time() + 6.0)  # both past their imports, then build at once
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    procs = [subprocess.Popen([sys.executable, "-c", script, start_at], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert out.strip().splitlines()[-1].startswith("ok"), out  # TileLang logs to stdout too
    store = kernel_cache.KernelStore(str(root))
    (path,) = entry_files(store)
    assert store.load(os.path.basename(path)[:-5], "c", K.CPU_COMPILE_FLAGS) is not None
    assert not [f for f in os.listdir(os.path.dirname(path)) if f.endswith(".tmp")]


def test_a_freshly_compiled_kernel_calls_its_exported_host_library(tmp_path, monkeypatch):
    """_linked: a TVM-FFI kernel compiled in this process swaps its unlinked Executable (which links again at its
    first call, seconds on the H200) for the library its TileLang cache entry exported; anything else is kept."""
    pytest.importorskip("tilelang")
    from tilelang import tvm

    loaded = []
    monkeypatch.setattr(tvm.runtime, "load_module", lambda path: loaded.append(path) or ("module", path))

    def kernel(entry, executable):
        return types.SimpleNamespace(adapter=types.SimpleNamespace(executable=executable), _tilelang_cache_path=entry)

    unlinked = tvm.runtime.Executable.__new__(tvm.runtime.Executable)
    (tmp_path / "executable.so").write_bytes(b"\x7fELF")
    fresh = K._linked(kernel(str(tmp_path), unlinked))
    assert fresh.adapter.executable == ("module", str(tmp_path / "executable.so"))
    assert K._linked(kernel(str(tmp_path / "gone"), unlinked)).adapter.executable is unlinked  # no library: as it was
    assert K._linked(kernel(None, unlinked)).adapter.executable is unlinked  # not from TileLang's cache
    from_cache = ("module", "already loaded")
    assert K._linked(kernel(str(tmp_path), from_cache)).adapter.executable is from_cache
    assert loaded == [str(tmp_path / "executable.so")]
