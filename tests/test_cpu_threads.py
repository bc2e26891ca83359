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
    from xllm.model import Llama, PagedBatch
    from xllm.kv_pool import PagedKVPool
    from xllm.cpu_kernels import CpuRunner
    torch.set_num_threads(2)
    cfg = tiny_config(); m = Llama.from_weights(cfg, random_weights(cfg))
    ids, table = list(range(3, 40)), [0, 1, 2]
    pool, ref = PagedKVPool(cfg, 4, 16), PagedKVPool(cfg, 4, 16)
    run = CpuRunner(m, pool)
    prompt, step = (PagedBatch.build([(i, s, table)], 16, pool.null_slot, "all") for i, s in ((ids, 0), ([5], len(ids))))
    with torch.inference_mode():
        y, y1 = run(prompt), run(step)                            # the compiled plan
        r, r1 = m(prompt, ref), m(step, ref)                      # the torch forward
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
