"""xllm.cuda_runner on the kernels (eager and CUDA graphs) against the torch forward on the same model and device — float32:
greedy tokens equal, logits within 1e-3 relative; float16: logits within 2e-2 relative (printed tokens). Plus the engine with
the runner attached. Two backends: `cuda` (skips unless torch sees a GPU and CuPy imports) and `emulated` (CPU tensors,
CudaOps through xllm.cuda_emu; eager only, since CUDA graphs need a GPU; skips without g++)."""
import copy
import pytest
import torch

import xllm.cuda_kernels as ck
from xllm.core import LlamaConfig
from xllm.model import Llama
from xllm.engine import Engine
from xllm.kv_pool import PagedKVPool
from xllm.sampling import SamplingParams
from xllm.cuda_runner import CudaRunner, CudaOps, greedy_paged

PROMPTS = [[5, 17, 42, 7, 99, 3], [11] * 13, [250, 1]]


def tiny_model(seed=0, dtype=torch.float32, dev="cpu", **kw):
    d = dict(vocab_size=300, hidden_size=128, intermediate_size=192, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
             max_position_embeddings=256)
    d.update(kw)
    cfg = LlamaConfig(**d)
    g = torch.Generator().manual_seed(seed)
    with torch.device("meta"): shapes = {k: v.shape for k, v in Llama(cfg).state_dict().items()}
    w = {k: (torch.rand(s, generator=g) * 0.6 + 0.7 if "norm" in k else torch.randn(s, generator=g) * (0.5 if "embed" in k else 1.2 / s[-1] ** 0.5))
         for k, s in shapes.items()}
    return Llama.from_weights(cfg, w, dtype).to(dev)


@pytest.mark.parametrize("dt,tol", [(torch.float32, 1e-3), (torch.float16, 2e-2), (torch.bfloat16, 5e-2)])
@pytest.mark.parametrize("kw", [dict(), dict(num_key_value_heads=8, hidden_size=256, num_attention_heads=8), dict(head_dim=64, hidden_size=256, num_attention_heads=8)])
@pytest.mark.parametrize("eager", [True, False])
def test_runner_vs_torch_forward(dt, tol, kw, eager, dev):
    if not eager and dev.type == "cpu": pytest.skip("CUDA graphs need a GPU")
    m1 = tiny_model(2, dt, dev, **kw); m0 = copy.deepcopy(m1)
    p1 = PagedKVPool(m1.config, 40, 8, dt, dev); p0 = copy.deepcopy(p1)
    t0, h0 = greedy_paged(m0, p0, PROMPTS, 12)
    r = CudaRunner(m1, p1, max_batch=8, enforce_eager=eager, ops=CudaOps)
    assert r.ops is CudaOps
    if not eager: assert r.capture() == [1, 2, 4, 8]
    t1, h1 = greedy_paged(m1, p1, PROMPTS, 12, step=r)
    # logits are compared up to the first step whose greedy token differs (a near-tie in fp16/bf16): after it the inputs differ
    d = next((i for i in range(len(h0)) if any(a[i] != b[i] for a, b in zip(t0, t1))), len(h0) - 1)
    e = max(float((a - b).abs().max() / a.abs().max()) for a, b in zip(h0[:d + 1], h1[:d + 1]))
    print(dt, kw, "eager" if eager else "graphs", f"max rel logits diff {e:.1e}", "tokens equal" if t0 == t1 else "tokens differ")
    assert e < tol
    if dt == torch.float32: assert t0 == t1
    assert (r.num_graph_steps, r.num_eager_steps) == ((0, 11) if eager else (11, 0))


def test_engine_with_runner_graphs(dev):
    m_e = tiny_model(3, dev=dev); m_ref = copy.deepcopy(m_e)
    reqs = [(p, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)) for p, n in zip(PROMPTS + [[9, 8, 7, 6, 5, 4, 3, 2, 1]] * 3, [10, 3, 17, 5, 9, 1])]
    want = [r.token_ids for r in Engine(m_ref, max_num_seqs=4, block_size=8, num_blocks=60).generate(reqs)]
    eng = Engine(m_e, max_num_seqs=4, block_size=8, num_blocks=60)
    eng.runner = CudaRunner(m_e, eng.pool, max_batch=4, max_model_len=eng.max_model_len, ops=CudaOps)
    assert eng.runner.capture() == ([1, 2, 4] if dev.type == "cuda" else [])
    assert [r.token_ids for r in eng.generate(reqs)] == want
    assert (eng.runner.num_graph_steps if dev.type == "cuda" else eng.runner.num_eager_steps) > 10
    assert eng.runner.num_ragged_steps >= 1      # prefill and mixed steps: ragged


@pytest.mark.parametrize("dt,tol", [(torch.float32, 1e-4), (torch.float16, 2e-2)])
@pytest.mark.parametrize("kw", [dict(), dict(num_key_value_heads=8, hidden_size=256, num_attention_heads=8), dict(head_dim=64, hidden_size=256, num_attention_heads=8)])
@pytest.mark.parametrize("kct", [1, 4, 64])
def test_ragged_step_vs_torch_forward(dt, tol, kw, kct, dev):
    """A prefill/mixed step through `CudaRunner.ragged` (decode rows, new prompts, a chunk continuing at position 14):
    logits within `tol` relative of the torch forward's, the same K/V written. `kct` (kernel_chunk_tokens) 1: only the decode rows
    attend through the paged kernel, the chunks through chunk_attention; 4: the short chunks too; 64: every row."""
    m1 = tiny_model(6, dt, dev, **kw); m0 = copy.deepcopy(m1)
    p1 = PagedKVPool(m1.config, 40, 8, dt, dev)
    greedy_paged(m1, p1, PROMPTS, 2)                                  # sequences' blocks: [0], [1, 2], [3]
    p0 = copy.deepcopy(p1)
    g = torch.Generator().manual_seed(1)
    r = lambda n: torch.randint(0, 300, (n,), generator=g).tolist()
    chunks = [([7], len(PROMPTS[0]) + 1, [0]), ([8], len(PROMPTS[2]) + 1, [3]), (r(20), 0, [4, 5, 6]), (r(5), 0, [7]), (r(3), 14, [8, 9, 10])]
    from xllm.model import PagedBatch
    for rows in ([], "all", "last"):                                  # []: a step of prompt chunks that sample nothing yet
        b = PagedBatch.build(chunks, 8, p0.null_slot, rows, dev)
        want = m0(b, copy.deepcopy(p0))
        p = copy.deepcopy(p1)
        runner = CudaRunner(m1, p, max_batch=4, ops=CudaOps, kernel_chunk_tokens=kct)
        got = runner(b)
        assert got.shape == want.shape and got.dtype == torch.float32
        assert rows == [] or float((want - got).abs().max() / want.abs().max()) < tol
        assert runner.num_ragged_steps == 1
    pw = copy.deepcopy(p0); m0(b, pw)
    for l in range(m1.config.num_hidden_layers):
        for a, c in ((pw.k_flat[l], p.k_flat[l]), (pw.v_flat[l], p.v_flat[l])):
            assert float((a.float() - c.float()).abs().max()) <= tol * float(a.float().abs().max())


@pytest.mark.parametrize("mode,gs,gemv_rows", [("int8", None, 16), ("int8", 32, 16), ("int4", 32, 16), ("int4-sym", 64, 16), ("int8", None, 0), ("int4", 32, 0),
                                               ("q4_k_m", 32, 16), ("q4_k_m", 32, 0)])
def test_quantized_model_through_runner(mode, gs, gemv_rows, dev):
    """A quantized model: q/k/v and gate/up stacked into one `QuantWeight` each (the modules' codes become views of it),
    o/down/lm_head single (int4 symmetric too: Q4_0-like; "q4_k_m": GGUF Q4_K_M's mix, int4 layers with v_proj and down_proj in
    int8 groups of 16 as Q6_K repacks, so q/k/v is no single stack and goes through the kernels part by part). Decode steps (graphs on a GPU) through the GEMV kernels (gemv_rows 16) or dequantize + torch.mm
    (0): logits close to the torch forward's (the modules dequantizing). Then an engine with the runner, prefill steps included
    (ragged, > gemv_rows rows: dequantize + mm), gives the greedy tokens of the engine without it (fp16: at most one near-tie
    may flip)."""
    from xllm.quant import quantize_model
    dt = torch.float16
    m1 = tiny_model(4, dt)
    quantize_model(m1, "int8" if mode.startswith("int8") else "int4", gs, lm_head=True, zero_point=mode != "int4-sym", progress=False)
    if mode == "q4_k_m":
        from xllm.quant import Int8Linear
        for l in m1.model.layers: l.self_attn.v_proj, l.mlp.down_proj = (Int8Linear.from_float(x.dequantize(), group_size=16) for x in (l.self_attn.v_proj, l.mlp.down_proj))
    m1 = m1.to(dev); m0 = copy.deepcopy(m1)
    p1 = PagedKVPool(m1.config, 40, 8, dt, dev); p0 = copy.deepcopy(p1)
    _, h0 = greedy_paged(m0, p0, PROMPTS, 5)
    r = CudaRunner(m1, p1, max_batch=8, ops=CudaOps)
    L = m1.config.num_hidden_layers
    if mode == "q4_k_m":
        assert all(qkv is None and isinstance(gu, ck.QuantWeight) for qkv, gu in r.fused) and len(r.quant) == 5 * L + 1
    else:
        assert all(isinstance(f, ck.QuantWeight) for pair in r.fused for f in pair)
        assert r.fused[0][0].codes.data_ptr() == (m1.model.layers[0].self_attn.q_proj.weight if mode == "int8" else m1.model.layers[0].self_attn.q_proj.qweight).data_ptr()
        assert len(r.quant) == 2 * L + 1
    assert r.dequant_ws.numel() > 0
    r.quant_gemv_rows = gemv_rows
    r.capture()
    _, h1 = greedy_paged(m1, p1, PROMPTS, 5, step=r)
    assert max(float((a - b).abs().max() / a.abs().max()) for a, b in zip(h0, h1)) < 2e-2
    reqs = [(p, SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)) for p in PROMPTS + [list(range(40, 70))]]
    want = [x.token_ids for x in Engine(m0, max_num_seqs=4, block_size=8, num_blocks=60).generate(reqs)]
    eng = Engine(m1, max_num_seqs=4, block_size=8, num_blocks=60)
    eng.runner = CudaRunner(m1, eng.pool, max_batch=4, max_model_len=eng.max_model_len, ops=CudaOps)
    eng.runner.quant_gemv_rows = gemv_rows
    got = [x.token_ids for x in eng.generate(reqs)]
    assert sum(a != b for x, y in zip(got, want) for a, b in zip(x, y)) <= 1, (got, want)     # fp16: one near-tie may flip
    assert eng.runner.num_ragged_steps >= 1


def _allocations(fn):
    "Calls `fn()` under the torch profiler; returns the (op, bytes) of every allocation it made, host or device."
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof: fn()
    mem = lambda e: max(e.cpu_memory_usage, getattr(e, "device_memory_usage", 0) or 0, getattr(e, "cuda_memory_usage", 0) or 0)
    return [(e.name, mem(e)) for e in prof.events() if mem(e) > 0]


@pytest.mark.parametrize("weights", ["float", "int4 gemv", "int8 dequant+mm in slices"])
def test_decode_step_allocates_and_reads_back_nothing(weights, dev):
    """What graph capture needs, and what the buffer pool promises: the eager decode step allocates nothing (the split-K
    workspace included: max_model_len 2048 makes 3 rows split the attention 8 ways) and reads no tensor value back to the host
    (item, tolist, bool, ...: a sync, which capture refuses). Float weights; int4 weights through the GEMV kernel; int8 weights
    (the head too) dequantized into a workspace of 64 weight rows, so every weight goes through it in slices."""
    m = tiny_model(5, torch.float32, dev, max_position_embeddings=2048, head_dim=64, hidden_size=256)   # paged_attention_v2
    if weights != "float":
        from xllm.quant import quantize_model
        quantize_model(m, weights[:4], 32, lm_head=weights.startswith("int8"), progress=False)
    pool = PagedKVPool(m.config, 40, 8, torch.float32, dev)
    r = CudaRunner(m, pool, max_batch=8, enforce_eager=True, ops=CudaOps)
    if weights.startswith("int8"): r.quant_gemv_rows, r.dequant_ws = 0, r.dequant_ws[:64 * 256]
    assert ck.paged_attention_splits(3, 2, r.max_blocks * 8, ck.num_sms(dev)) == 8 and r.attn_ws.numel() >= 3 * 8 * 8 * 66
    greedy_paged(m, pool, PROMPTS, 3, step=r)                         # the pool holds K/V, the kernels are built
    q, bt, cl = r.buf["q"][:3], r.buf["tables"][:3], r.buf["lens"][:3]
    assert _allocations(lambda: ck.paged_attention_v2(q, pool.k[0], pool.v[0], bt, cl)), "the profiler should see the partials allocated"
    reads, saved = [], {}
    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero", "cpu", "numpy"):
        saved[name] = orig = getattr(torch.Tensor, name)
        setattr(torch.Tensor, name, lambda self, *a, _n=name, _o=orig, **k: (reads.append(_n), _o(self, *a, **k))[1])
    try: allocs = _allocations(lambda: r._decode(3))
    finally:
        for name, orig in saved.items(): setattr(torch.Tensor, name, orig)
    assert allocs == [] and reads == [], (allocs, reads)


@pytest.mark.parametrize("dt,tol", [(torch.float32, 1e-4), (torch.float16, 2e-2)])
def test_int8_kv_pool_through_runner(dt, tol, dev):
    """An int8 K/V pool (kv_dtype='int8'): decode steps (kv_append_int8, paged_attention_v2 over codes x scales) and a mixed
    ragged step through the runner, against the torch forward on the same int8 pool (which dequantizes to the model dtype and
    runs SDPA). fp16: the K/V rounded before quantization may differ in the last bit, so a code may differ by one or two."""
    from xllm.model import PagedBatch
    from xllm.cuda_runner import int8_kv_supported
    kw = dict(head_dim=64, hidden_size=256, num_attention_heads=8)
    m1 = tiny_model(7, dt, dev, **kw); m0 = copy.deepcopy(m1)
    assert int8_kv_supported(m1.config) and not int8_kv_supported(tiny_model(7, dt, dev).config)   # head_dim 16: no int8 kernel
    p1 = PagedKVPool(m1.config, 40, 8, dt, dev, kv_dtype="int8"); p0 = copy.deepcopy(p1)
    t0, h0 = greedy_paged(m0, p0, PROMPTS, 10)
    r = CudaRunner(m1, p1, max_batch=8, ops=CudaOps)
    t1, h1 = greedy_paged(m1, p1, PROMPTS, 10, step=r)
    d = next((i for i in range(len(h0)) if any(a[i] != b[i] for a, b in zip(t0, t1))), len(h0) - 1)
    assert max(float((a - b).abs().max() / a.abs().max()) for a, b in zip(h0[:d + 1], h1[:d + 1])) < tol
    if dt == torch.float32: assert t0 == t1
    assert r.num_eager_steps == 9
    b = PagedBatch.build([([7], len(PROMPTS[0]) + 9, [0, 1]), ([5, 6, 7, 8, 9], 0, [20])], 8, p0.null_slot, "all", dev)   # a decode row, a prompt
    want, got = m0(b, p0), r(b)
    assert float((want - got).abs().max() / want.abs().max()) < tol and r.num_ragged_steps == 1


def test_ragged_random_batches(dev):
    """Random step compositions through the runner (`ragged`; `step` when all are decode rows) against the torch forward on copies of one pool: chunks of 1-40 tokens starting
    anywhere in their sequence (decode rows, whole prompts, continued prompts), shuffled block tables, random logits rows,
    random kernel_chunk_tokens; GQA and MHA. Logits within 1e-4 relative (float32) and the same K/V written."""
    import random
    from xllm.model import PagedBatch
    rng = random.Random(5)
    cases = 12 if dev.type == "cuda" else 5
    for case in range(cases):
        kw = rng.choice([dict(), dict(num_key_value_heads=8, hidden_size=256, num_attention_heads=8), dict(head_dim=64, hidden_size=256, num_attention_heads=8)])
        m1 = tiny_model(100 + case, torch.float32, dev, **kw); m0 = copy.deepcopy(m1)
        bs, nb = 8, 64
        p1 = PagedKVPool(m1.config, nb, bs, torch.float32, dev)
        for t in (*p1.k_flat, *p1.v_flat): t.copy_(torch.randn(t.shape, generator=torch.Generator().manual_seed(case)).to(dev))   # earlier K/V
        free = list(range(nb)); rng.shuffle(free)
        chunks = []
        for _ in range(rng.randint(1, 6)):
            n = rng.choice([1, 1, rng.randint(2, 8), rng.randint(9, 40)])
            start = rng.choice([0, rng.randint(0, 60)])
            need = -(-(start + n) // bs)
            if need > len(free): break
            table, free = free[:need], free[need:]
            chunks.append(([rng.randrange(300) for _ in range(n)], start, table))
        N = sum(len(c[0]) for c in chunks)
        rows = sorted(rng.sample(range(N), rng.randint(0, min(N, 6))))
        b = PagedBatch.build(chunks, bs, p1.null_slot, rows, dev)
        p0 = copy.deepcopy(p1)
        want = m0(b, p0)
        r = CudaRunner(m1, p1, max_batch=4, ops=CudaOps, kernel_chunk_tokens=rng.choice([1, 4, 16, 64]))
        got = r(b)
        assert got.shape == want.shape and r.num_ragged_steps + r.num_eager_steps == 1   # (only decode rows: step)
        if rows: assert float((want - got).abs().max() / want.abs().max()) < 1e-4, (case, [(len(c[0]), c[1]) for c in chunks], r.kernel_chunk_tokens)
        for l in range(m1.config.num_hidden_layers):
            assert float((p0.k_flat[l] - p1.k_flat[l]).abs().max()) < 1e-4 and float((p0.v_flat[l] - p1.v_flat[l]).abs().max()) < 1e-4
