"Shared by the server tests: waiting on a condition under a deadline instead of a fixed sleep, and engine steps slowed to a known pace."
import time


def wait_for(cond, timeout=60, what="condition"):
    "Poll `cond()` until it is true (returning its value); fail naming `what` after `timeout` s."
    t0 = time.time()
    while not (v := cond()):
        assert time.time() - t0 < timeout, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.01)
    return v


def slow_down(srv, monkeypatch, s=0.02):
    """Every engine step of the server `srv` sleeps `s` first, so a request of N tokens takes at least N*s seconds however fast
    the machine: a test that checks an abandoned (or running) request was cut short (or still runs) does not race the model's speed."""
    core = srv.app.state.xllm.core
    step = core.step
    def slow(): time.sleep(s); return step()
    monkeypatch.setattr(core, "step", slow)
    return core
