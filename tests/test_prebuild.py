"""`laya prebuild`: routed by the CLI, one clear line and exit 2 where it cannot build (no GPU here)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from laya import cli  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
def test_prebuild_without_a_gpu_is_one_line_and_exit_2(capsys, tiny_checkpoint):
    assert cli.main(["prebuild", "--model", str(tiny_checkpoint)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["laya prebuild: failed: RuntimeError: prebuild builds GPU kernels and this machine has no "
                   "CUDA device"]


def test_prebuild_rejects_an_unknown_backend(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["prebuild", "--model", "x", "--backend", "onnx"])
    assert e.value.code == 2
    assert "invalid choice: 'onnx'" in capsys.readouterr().err


def test_prebuild_refuses_a_kernel_store_it_cannot_write(tmp_path):
    from laya.prebuild import build_parser, kernel_store_root

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    target = str(blocker / "kernels")
    with pytest.raises(ValueError) as e:
        kernel_store_root(build_parser().parse_args(["--model", "m", "--cache-dir", target]))
    assert str(e.value).startswith(f"cannot write kernels to {target} (NotADirectoryError: ")
    assert str(e.value).endswith("); pass --cache-dir with a writable directory")
    writable = str(tmp_path / "kernels")
    assert kernel_store_root(build_parser().parse_args(["--model", "m", "--cache-dir", writable])) == writable
