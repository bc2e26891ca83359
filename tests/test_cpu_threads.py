"""The compiled CPU plan when OpenMP gives fewer threads than asked (OMP_THREAD_LIMIT, or a call from inside another parallel
region): its barrier must count the team it really got, not the threads it asked for, or the first barrier waits forever.
Checked to hang (timeout) before the fix."""
import os, subprocess, sys, textwrap
from pathlib import Path

import pytest

from xllm import cpu_kernels

SCRIPT = textwrap.dedent("""
    import sys, torch
    sys.path.insert(0, {tests!r})
    from _tiny import tiny_config, random_weights
    from xllm.model import Llama
    from xllm import cpu_kernels as ck
    torch.set_num_threads(2)
    cfg = tiny_config(); m = Llama.from_weights(cfg, random_weights(cfg))
    ids = torch.arange(3, 40)
    with torch.inference_mode():
        c = m.new_cache(64); y = m(ids, c); y1 = m(torch.tensor([5]), c)
        assert ck._PLANS[m].ok
        with ck.disabled():
            cr = m.new_cache(64); r = m(ids, cr); r1 = m(torch.tensor([5]), cr)
    err = max(((y - r).abs().max() / r.abs().max()).item(), ((y1 - r1).abs().max() / r1.abs().max()).item())
    assert err < 1e-4, err
    print("ok", err)
""")


@pytest.mark.skipif(not cpu_kernels.available(), reason="no C++ compiler: the compiled CPU kernels are not built")
def test_plan_runs_with_fewer_threads_than_asked():
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    p = subprocess.run([sys.executable, "-c", SCRIPT.format(tests=str(Path(__file__).parent))], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and "ok" in p.stdout, p.stderr[-2000:]
