"""The block pool is whole after every test: every `Engine` a test creates (not one an `AsyncEngine` thread drives, which a server
fixture may keep across tests) must pass `BlockManager.check_invariants()` with no unfinished request and no block in use when the
test ends. (Checked to fail when the block manager leaks one reference on free.)"""
import functools, weakref

import pytest

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
