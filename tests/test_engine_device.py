"""xllm.engine on every available device (CPU always, CUDA when present): the paged batched forward against a float64 CPU run of
the contiguous-cache model, and Engine greedy outputs (with preemption and prefix caching) against per-request greedy decoding.

14_engine.ipynb checks the same things on CPU in float32 against the float32 contiguous path (1e-5); here the reference is
float64 so that one tolerance (1e-4 relative to max|logit|, as tests/test_model_device.py) covers every device's kernels."""
import random
import pytest, torch
from xllm.model import Llama
from xllm.kv_cache import BlockManager
from xllm.scheduler import Scheduler
from xllm.sampling import SamplingParams
from xllm.engine import Engine
from xllm.kv_pool import PagedKVPool
from xllm.model import PagedBatch
from _tiny import tiny_config, random_weights, rel, greedy

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def random_model(seed=0):
    cfg = tiny_config()
    return cfg, random_weights(cfg, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_paged_forward_matches_float64(device):
    cfg, w = random_model()
    ref_m = Llama.from_weights(cfg, w, dtype=torch.float64)
    m = Llama.from_weights(cfg, {k: v.to(device) for k, v in w.items()}, dtype=torch.float32)
    rng = random.Random(0)
    bs, nb = 4, 14
    bm, pool = BlockManager(nb, bs), PagedKVPool(cfg, nb, bs, torch.float32, device)
    sched = Scheduler(bm, 6, 10, cfg.max_position_embeddings)
    shared = [rng.randrange(3, 384) for _ in range(9)]
    for i in range(12): sched.add_request(shared + [rng.randrange(3, 384) for _ in range(rng.randint(1, 25))], seq_id=i)
    seqs, rows, want = dict(sched.seqs), {i: [] for i in range(12)}, {i: rng.randint(1, 15) for i in range(12)}
    while sched.has_unfinished:
        out = sched.schedule()
        if not out.chunks: continue
        b = PagedBatch.build([(c.token_ids, c.start, bm.block_tables[c.seq.seq_id]) for c in out.chunks], bs, pool.null_slot, "all", m.device)
        logits = m(b, pool).cpu()
        assert logits.dtype == torch.float32
        new, fin = {}, {}
        for c, r0 in zip(out.chunks, b.cu_seqlens):
            rows[c.seq.seq_id] += [(c.start + j, logits[r0 + j]) for j in range(c.num_tokens)]
            if c.samples:
                new[c.seq.seq_id] = int(logits[r0 + c.num_tokens - 1].argmax())
                if c.seq.num_output_tokens + 1 >= want[c.seq.seq_id]: fin[c.seq.seq_id] = "length"
        sched.update(out, new, fin)
        bm.check_invariants()
    assert bm.num_used_blocks == 0 and sched.num_preemptions > 0 and bm.hit_rate > 0
    for i, s in seqs.items():
        ref = ref_m(torch.tensor(s.token_ids[:-1]))
        assert max(rel(row, ref[p]) for p, row in rows[i]) < 1e-4


@pytest.mark.parametrize("device", DEVICES)
def test_engine_greedy_matches_sequential(device):
    cfg, w = random_model(1)
    m = Llama.from_weights(cfg, {k: v.to(device) for k, v in w.items()}, dtype=torch.float32)
    rng = random.Random(1)
    shared = [rng.randrange(3, 384) for _ in range(20)]
    reqs = [((shared if i % 2 else []) + [rng.randrange(3, 384) for _ in range(rng.randint(1, 40))],
             SamplingParams(temperature=0, max_tokens=rng.randint(1, 30))) for i in range(16)]
    eng = Engine(m, block_size=8, num_blocks=20, max_num_seqs=8, max_num_batched_tokens=24)
    assert eng.pool.k[0].device.type == device
    res = eng.generate(reqs)
    assert eng.block_manager.num_used_blocks == 0 and eng.scheduler.num_preemptions > 0
    for r, (p, sp) in zip(res, reqs): assert r.token_ids == greedy(m, p, sp.max_tokens, eos=2)
