"""The block pool is whole after every test: every `Engine` a test creates (not one an `AsyncEngine` thread drives, which a server
fixture may keep across tests) must pass `BlockManager.check_invariants()` with no unfinished request and no block in use when the
test ends. (Checked to fail when the block manager leaks one reference on free.)"""
import functools, os, shutil, weakref

import pytest
import torch

import xllm.engine as _engine

_made: list = []          # weak references to the Engines created during the current test


def _wrap_init(cls, hook):
    init = cls.__init__
    @functools.wraps(init)
    def __init__(self, *a, **kw):
        hook(self, a, kw); init(self, *a, **kw)
        if cls is _engine.Engine: _made.append(weakref.ref(self))
    cls.__init__ = __init__


_wrap_init(_engine.Engine, lambda self, a, kw: None)
_wrap_init(_engine.AsyncEngine, lambda self, a, kw: setattr(a[0] if a else kw["engine"], "_driven_by_thread", True))


@pytest.fixture(autouse=True)
def pool_is_whole_after_the_test():
    _made.clear()
    yield
    for ref in _made:
        eng = ref()
        if eng is None or getattr(eng, "_driven_by_thread", False): continue
        eng.block_manager.check_invariants()
        assert not eng.has_unfinished() and eng.block_manager.num_used_blocks == 0, f"test left an engine with work or blocks in use: {eng!r}"


@pytest.fixture(params=["cuda", "emulated"])
def dev(request):
    """Where xllm's CUDA kernels run in a test: torch.device('cuda') (skipped unless torch sees a GPU and CuPy imports), or the
    CPU inside xllm.cuda_emu.emulate() (skipped without a C++ compiler)."""
    import xllm.cuda_kernels as ck
    if request.param == "cuda":
        if not (torch.cuda.is_available() and ck.cupy_available()): pytest.skip("needs a CUDA device and CuPy")
        yield torch.device("cuda")
    else:
        if shutil.which(os.environ.get("CXX") or "g++") is None: pytest.skip("the CUDA emulator needs a C++ compiler (g++)")
        from xllm.cuda_emu import emulate
        with emulate(): yield torch.device("cpu")
