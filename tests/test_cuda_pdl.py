"""laya.cuda_pdl's choice of kernels (no GPU needed): only kernels whose compiled source waits for the
kernel before them may sit behind a programmatic edge."""

from __future__ import annotations

from laya.cuda_pdl import waiting_kernels


class Compiled:
    def __init__(self, source: str):
        self.source = source

    def get_kernel_source(self) -> str:
        return self.source


def kernel(name: str, waits: bool, bounds: bool = True) -> Compiled:
    launch = "__launch_bounds__(128, 1) " if bounds else ""
    body = "  cudaGridDependencySynchronize();\n  cudaTriggerProgrammaticLaunchCompletion();\n" if waits else ""
    return Compiled(f'extern "C" __global__ void {name}(float* A, int m);\n'
                    f'extern "C" __global__ void {launch}{name}(float* A, int m) {{\n{body}  A[0] = 1.f;\n}}\n')


def test_only_kernels_that_wait_are_chosen():
    chosen = waiting_kernels([kernel("gemm_kernel", True), kernel("rope_kernel", False),
                              kernel("add_ln_kernel", True, bounds=False)])
    assert chosen == {"gemm_kernel", "add_ln_kernel"}


def test_a_name_shared_with_a_kernel_that_does_not_wait_is_excluded():
    assert waiting_kernels([kernel("gemm_kernel", True), kernel("gemm_kernel", False)]) == set()


def test_no_kernels_no_names():
    assert waiting_kernels([]) == set()
