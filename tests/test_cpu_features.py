"""laya.cpu_features: flags and physical cores from /proc/cpuinfo text, and the ONNX session's default."""

from __future__ import annotations

from laya import cpu_features


def block(cpu: int, core: int, flags: str, phys: int = 0) -> str:
    return (f"processor\t: {cpu}\nmodel name\t: Test CPU\nphysical id\t: {phys}\ncore id\t\t: {core}\n"
            f"flags\t\t: fpu sse2 {flags}\n\n")


AMX_SMT = "".join(block(c, c % 2, "avx2 fma avx512f avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8")
                  for c in range(4))  # 4 logical CPUs, 2 cores with 2 SMT threads each
AVX2 = "".join(block(c, c, "avx2 fma") for c in range(3))


def test_amx_box_with_smt():
    f = cpu_features.probe(AMX_SMT, allowed={0, 1, 2, 3})
    assert (f.logical_cores, f.physical_cores) == (4, 2)
    assert f.amx_bf16 and f.amx_int8 and f.native_bf16 and f.int8_dot
    assert f.best_isa == "amx" and f.source == "cpuinfo" and f.model == "Test CPU"


def test_avx2_box_and_affinity():
    f = cpu_features.probe(AVX2, allowed={1, 2})
    assert (f.logical_cores, f.physical_cores) == (2, 2)
    assert f.avx2 and not f.avx512f and not f.native_bf16 and not f.int8_dot
    assert f.best_isa == "avx2"
    assert f.as_dict()["best_isa"] == "avx2"


def test_smt_siblings_in_the_cpu_set_count_once():
    assert cpu_features.probe(AMX_SMT, allowed={0, 2}).physical_cores == 1


def test_no_cpuinfo_falls_back_to_torch_capability():
    f = cpu_features.probe("", allowed={0, 1}, torch_capability="AVX512")
    assert f.source == "torch" and f.avx512f and f.avx2 and not f.avx512_bf16


def test_this_machine_and_onnx_default_threads():
    from laya.backends import onnx

    f = cpu_features.features()
    assert 1 <= f.physical_cores <= f.logical_cores
    assert onnx.default_threads() == f.physical_cores
