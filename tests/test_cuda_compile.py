"Every CUDA kernel source compiles with nvcc -cubin for sm_80 and sm_90 (no GPU needed). Skips when nvcc is not on PATH."
import shutil
import pytest
import xllm.cuda_kernels as ck

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compile(arch):
    info = ck.compile_check(arch)
    assert info["arch"] == arch and info["kernels"] == len(ck.KERNEL_NAMES) == 81


def test_compile_error_is_reported(monkeypatch):
    monkeypatch.setattr(ck, "CUDA_SOURCE", ck.CUDA_SOURCE + "\nextern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }\n")
    with pytest.raises(RuntimeError, match="nvcc failed for sm_80"):
        ck.compile_check("sm_80")
