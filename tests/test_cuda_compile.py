"Every CUDA kernel source compiles with nvcc -cubin for sm_80 and sm_90 (no GPU needed), without register spills. Skips when nvcc is not on PATH."
import shutil
import pytest
import xllm.cuda_kernels as ck

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compile(arch):
    "Every kernel compiles, and none spills registers to local memory (ptxas -v)."
    info = ck.compile_check(arch)
    assert info["arch"] == arch and info["kernels"] == len(ck.KERNEL_NAMES) == 144
    assert set(info["usage"]) == set(ck.KERNEL_NAMES)
    spills = {k: u for k, u in info["usage"].items() if u["spill_stores"] or u["spill_loads"]}
    assert not spills, spills
    assert all(0 < u["registers"] <= 255 for u in info["usage"].values())


def test_compile_error_is_reported(monkeypatch):
    monkeypatch.setattr(ck, "CUDA_SOURCE", ck.CUDA_SOURCE + "\nextern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }\n")
    with pytest.raises(RuntimeError, match="nvcc failed for sm_80"):
        ck.compile_check("sm_80")


def test_ptxas_usage_parses():
    log = """ptxas info    : Compiling entry function 'k_a' for 'sm_90'
ptxas info    : Function properties for k_a
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 256 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'k_b' for 'sm_90'
ptxas info    : Function properties for k_b
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 20 registers, used 0 barriers, 380 bytes cmem[0]"""
    assert ck.ptxas_usage(log) == {"k_a": dict(stack=8, spill_stores=4, spill_loads=12, registers=40, smem=256),
                                   "k_b": dict(stack=0, spill_stores=0, spill_loads=0, registers=20, smem=0)}
    assert ck.resident_warps(64, 4) == 32 and ck.resident_warps(255, 4) == 8 and ck.resident_warps(32, 4, 40 * 1024) == 20
