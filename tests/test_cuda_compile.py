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


@pytest.mark.parametrize("key", ["base", ("pa2", 128, 4)])
def test_compile_one_part(key):
    """The parts `load_kernels` compiles for one model (`module_source`): the base part holds every kernel but paged_attention_v2's,
    a pa2 part exactly that head dim's and group's six (3 dtypes x float/int8 cache); together the parts hold every kernel once."""
    info = ck.compile_check("sm_90", key=key)
    assert set(info["usage"]) == {n for n in ck.KERNEL_NAMES if ck.module_key(n) == key} and info["kernels"] == (48 if key == "base" else 6)
    parts = {ck.module_key(n) for n in ck.KERNEL_NAMES}
    assert len(parts) == 1 + len(ck.PA2_HEAD_DIMS) * len(ck.PA2_GROUPS)


def test_load_kernels_compiles_only_the_parts_asked_for(monkeypatch):
    """`load_kernels` with a fake CuPy: each kernel is fetched from the compile of its own part (the preprocessed source of
    that part defines it), and a model's `model_kernel_names` compile the base part and its head dim's groups only."""
    import re, subprocess, sys, types
    from xllm.core import LlamaConfig
    if shutil.which("g++") is None: pytest.skip("needs g++ to preprocess the source")
    compiled = []
    class RawModule:
        def __init__(self, code):
            out = subprocess.run(["g++", "-E", "-x", "c++", "-"], input=code, capture_output=True, text=True, check=True).stdout
            self.names = set(re.findall(r'extern "C" __global__ void (\w+)\(', out)); compiled.append(self.names)
        def get_function(self, name):
            assert name in self.names, name
            return name
    class Device:
        def __init__(self, i): pass
        def __enter__(self): return self
        def __exit__(self, *a): return False
    fake = types.SimpleNamespace(RawModule=RawModule, cuda=types.SimpleNamespace(Device=Device))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(ck, "_modules", {}); monkeypatch.setattr(ck, "_functions", {})
    cfg = LlamaConfig(vocab_size=10, hidden_size=4096, intermediate_size=64, num_hidden_layers=1, num_attention_heads=32, num_key_value_heads=8)
    names = ck.model_kernel_names(cfg)                                  # Llama-3-8B-like: head dim 128, 4 heads per KV head
    assert ck.load_kernels("cuda:0", names) == len(names) == 48 + 2 * 6 and len(compiled) == 3   # base, (128, 4), (128, 8)
    assert {ck.module_key(n) for n in names} == {"base", ("pa2", 128, 4), ("pa2", 128, 8)}
    assert ck.load_kernels("cuda:0") == 144 and len(compiled) == 1 + 16 and set().union(*compiled) == set(ck.KERNEL_NAMES)
