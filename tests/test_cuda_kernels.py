"""xllm.cuda_kernels vs float64 CPU references, fp32/fp16/bf16, several shapes, tolerance kernel_rtol(dtype)
(fp32 math: 1e-5 for fp32 inputs, 1e-3 for fp16/bf16, plus one rounding of the result to the I/O dtype).
Each test runs on two backends (the `dev` fixture of conftest.py): `cuda` (skips unless torch sees a GPU and CuPy imports) and
`emulated` (the same CUDA source run on CPU tensors by xllm.cuda_emu; skips without g++), the latter on smaller shapes (`pick`). Prints the max error of each
kernel per backend (pytest -s)."""
import math
import pytest
import torch

import xllm.cuda_kernels as ck
from xllm.core import LlamaConfig
from xllm.model import rope_inv_freq, rope_tables

HAVE_GPU = torch.cuda.is_available() and ck.cupy_available()
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
worst = {}


def pick(dev, full, small):
    "The GPU's shapes, or the emulator's smaller ones (it runs a few million thread switches per second)."
    return full if torch.device(dev).type == "cuda" else small


def record(name, dt, err, dev="cuda"):
    key = (name, str(dt).replace("torch.", ""), "cuda" if torch.device(dev).type == "cuda" else "emulated")
    worst[key] = max(worst.get(key, 0.0), err)
    assert err < ck.kernel_rtol(dt), (name, dt, err)


def teardown_module(module):
    for (name, dt, b), e in sorted(worst.items()): print(f"max_rel_err {b:8s} {name:18s} {dt:9s} {e:.3e}  (rtol {ck.kernel_rtol(getattr(torch, dt)):.2e})")


@pytest.mark.parametrize("dt", DTYPES)
def test_rms_norm(dt, dev):
    g = torch.Generator().manual_seed(1)
    for rows, H in pick(dev, ((1, 64), (7, 576), (33, 4096), (4, 5000), (300, 2048)), ((1, 64), (7, 576), (3, 4096), (2, 5000))):
        x, w = torch.randn(rows, H, generator=g).to(dev, dt), torch.randn(H, generator=g).to(dev, dt)
        ref, _ = ck.rms_norm_ref(x.cpu(), w.cpu(), 1e-5)
        record("rms_norm", dt, ck.max_rel_err(ck.rms_norm(x, w, 1e-5), ref), dev)
        r = torch.randn(rows, H, generator=g).to(dev, dt)
        ref, newres = ck.rms_norm_ref(x.cpu(), w.cpu(), 1e-5, residual=r.cpu())
        out = torch.empty_like(x)
        assert ck.rms_norm(x, w, 1e-5, residual=r, out=out) is out
        record("rms_norm+res", dt, ck.max_rel_err(out, ref), dev)
        assert torch.equal(r.cpu(), newres)


@pytest.mark.parametrize("dt", DTYPES)
def test_rope(dt, dev):
    g = torch.Generator().manual_seed(2)
    cfg = LlamaConfig(vocab_size=32, hidden_size=4096, intermediate_size=64, num_hidden_layers=1, num_attention_heads=32, rope_theta=500000.0,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192})
    cos, sin = (t.to(dev) for t in rope_tables(rope_inv_freq(cfg), 2000))
    for T, nq, nk, D in pick(dev, ((1, 4, 4, 128), (9, 32, 8, 128), (5, 9, 3, 64), (64, 32, 8, 128)), ((1, 4, 4, 128), (3, 32, 8, 128), (5, 9, 3, 64))):
        qkv = torch.randn(T, (nq + 2 * nk) * D, generator=g).to(dev, dt)
        q, k = qkv[:, :nq * D].view(T, nq, D), qkv[:, nq * D:(nq + nk) * D].view(T, nk, D)
        pos = torch.randint(0, 2000, (T,), generator=g).to(dev)
        c, s = (cos, sin) if T % 2 else (cos[:, :D // 2].contiguous(), sin[:, :D // 2].contiguous())   # both table layouts
        c, s = c[:, :D] if c.shape[1] > D else c, s[:, :D] if s.shape[1] > D else s
        rq, rk = ck.rope_ref(q.cpu(), pos.cpu(), c.cpu(), s.cpu()), ck.rope_ref(k.cpu(), pos.cpu(), c.cpu(), s.cpu())
        v = qkv[:, (nq + nk) * D:].clone()
        ptr = q.data_ptr()
        ck.rope_(q, k, pos, c, s)
        assert q.data_ptr() == ptr
        record("rope", dt, max(ck.max_rel_err(q, rq), ck.max_rel_err(k, rk)), dev)
        assert torch.equal(qkv[:, (nq + nk) * D:], v)


@pytest.mark.parametrize("dt", DTYPES)
def test_silu_and_mul(dt, dev):
    g = torch.Generator().manual_seed(3)
    for rows, I in pick(dev, ((1, 64), (17, 1536), (3, 11008), (128, 14336)), ((1, 64), (3, 1536), (1, 11008))):
        x = (torch.randn(rows, 2 * I, generator=g) * 3).to(dev, dt)
        record("silu_and_mul", dt, ck.max_rel_err(ck.silu_and_mul_fused(x), ck.silu_and_mul_ref(x[:, :I].cpu(), x[:, I:].cpu())), dev)


@pytest.mark.parametrize("dt", DTYPES)
def test_softmax(dt, dev):
    g = torch.Generator().manual_seed(4)
    for rows, N in pick(dev, ((1, 10), (5, 1000), (3, 49152), (2, 128256), (64, 333)), ((1, 10), (5, 1000), (2, 20000), (9, 333))):
        x = (torch.randn(rows, N, generator=g) * 5).to(dev, dt)
        x[0, :N // 3] = -math.inf
        record("softmax", dt, ck.max_rel_err(ck.softmax(x), ck.softmax_ref(x.cpu())), dev)
    y = ck.softmax(torch.full((2, 7), -math.inf, device=dev, dtype=dt))
    assert torch.isnan(y).all()                                   # like torch.softmax


@pytest.mark.parametrize("dt", DTYPES)
def test_paged_attention(dt, dev):
    g = torch.Generator().manual_seed(5)
    for B, H, n_kv, D, bs, lens in pick(dev, ((1, 4, 4, 64, 16, [1]), (3, 9, 3, 64, 16, [5, 100, 37]), (4, 32, 8, 128, 16, [1, 17, 512, 1000]),
                                              (2, 8, 1, 256, 8, [3, 70]), (2, 4, 2, 32, 32, [0, 64]), (16, 32, 8, 128, 16, [int(x) for x in torch.randint(1, 3000, (16,), generator=g)])),
                                        ((1, 4, 4, 64, 16, [1]), (3, 9, 3, 64, 16, [5, 100, 37]), (2, 8, 1, 256, 8, [3, 70]), (2, 4, 2, 32, 32, [0, 64]))):
        q, kc, vc, bt, cl = ck.random_paged(B, H, n_kv, D, bs, lens, dt, g, dev)
        ref = ck.paged_attention_ref(q, kc, vc, bt, cl)
        for nw in pick(dev, (4, 8), (2,)):
            record("paged_attention", dt, ck.max_rel_err(ck.paged_attention(q, kc, vc, bt, cl, num_warps=nw), ref), dev)


@pytest.mark.parametrize("dt", DTYPES)
def test_paged_attention_v2(dt, dev):
    "GQA groups 1-8, head_dim 32-256, split-K with auto / 1 / some / many splits (empty splits in short sequences)."
    g = torch.Generator().manual_seed(7)
    for B, H, n_kv, D, bs, lens in pick(dev, ((1, 4, 4, 64, 16, [1]), (3, 8, 2, 128, 16, [5, 100, 37]), (4, 32, 8, 128, 16, [1, 17, 512, 1000]),
                                              (2, 8, 1, 256, 8, [3, 70]), (2, 4, 2, 32, 32, [0, 64]), (1, 32, 32, 128, 16, [3000]),
                                              (16, 32, 8, 128, 16, [int(x) for x in torch.randint(1, 3000, (16,), generator=g)])),
                                        ((1, 4, 4, 64, 16, [1]), (3, 8, 2, 128, 16, [5, 100, 37]), (4, 32, 8, 128, 16, [1, 17, 512, 1000]),
                                         (2, 8, 1, 256, 8, [3, 70]), (2, 4, 2, 32, 32, [0, 64]), (1, 8, 8, 32, 16, [600]), (2, 16, 2, 64, 16, [33, 250]))):
        q, kc, vc, bt, cl = ck.random_paged(B, H, n_kv, D, bs, lens, dt, g, dev)
        ref = ck.paged_attention_ref(q, kc, vc, bt, cl)
        for S in (None, 1, 3, 16):
            record("paged_attention_v2", dt, ck.max_rel_err(ck.paged_attention_v2(q, kc, vc, bt, cl, num_splits=S, num_warps=pick(dev, 4, 2)), ref), dev)


@pytest.mark.parametrize("dt", DTYPES)
def test_paged_attention_v2_int8_cache(dt, dev):
    "An int8 K/V cache (codes + per-row float32 scales, as PagedKVPool(kv_dtype='int8') stores it) against the float64 reference of code * scale."
    from xllm.kv_pool import quantize_kv
    g = torch.Generator().manual_seed(8)
    for B, H, n_kv, D, bs, lens in pick(dev, ((3, 8, 2, 128, 16, [5, 100, 37]), (4, 32, 8, 128, 16, [1, 17, 512, 1000]), (2, 8, 1, 256, 8, [3, 70]),
                                              (2, 4, 2, 32, 32, [0, 64]), (2, 32, 32, 64, 16, [2000, 9])),
                                        ((3, 8, 2, 128, 16, [5, 100, 37]), (2, 8, 1, 256, 8, [3, 70]), (2, 4, 2, 32, 32, [0, 64]), (2, 16, 2, 64, 16, [33, 250]))):
        q, kc, vc, bt, cl = ck.random_paged(B, H, n_kv, D, bs, lens, dt, g, dev)
        (kq, ks), (vq, vs) = quantize_kv(kc), quantize_kv(vc)
        ref = ck.paged_attention_ref(q, kq, vq, bt, cl, k_scale=ks, v_scale=vs)
        assert ck.max_rel_err(ck.paged_attention_ref(q, kq, vq, bt, cl), ref) > 1     # the scales matter: without them, nothing like it
        for S in (None, 1, 3):
            record("paged_attention_v2 int8 KV", dt, ck.max_rel_err(ck.paged_attention_v2(q, kq, vq, bt, cl, num_splits=S, num_warps=pick(dev, 4, 2),
                                                                                            k_scale=ks, v_scale=vs), ref), dev)
    with pytest.raises(ValueError, match="k_scale is required"): ck.paged_attention_v2(q, kq, vq, bt, cl)
    with pytest.raises(ValueError, match="only for an int8 cache"): ck.paged_attention_v2(q, kc, vc, bt, cl, k_scale=ks, v_scale=vs)
    with pytest.raises(ValueError, match="v_scale must be contiguous"): ck.paged_attention_v2(q, kq, vq, bt, cl, k_scale=ks, v_scale=vs[:1])


@pytest.mark.parametrize("dt", DTYPES)
def test_paged_attention_chunks(dt, dev):
    """Prompt chunks (tiles of tokens sharing each K/V load, causal per token) against the float64 reference over one row per
    token: random chunks of 1-40 tokens starting at 0 or later, GQA groups 1-8, head_dim 32-256, float and int8 caches. Rows
    no chunk covers are left untouched."""
    import random
    from xllm.kv_pool import quantize_kv
    rng, g = random.Random(3), torch.Generator().manual_seed(9)
    for H, n_kv, D in pick(dev, ((32, 32, 128), (32, 8, 128), (8, 1, 256), (16, 2, 64), (4, 4, 32), (6, 3, 64)),
                           ((8, 8, 64), (8, 2, 128), (8, 1, 32), (16, 2, 64), (6, 3, 256))):
        bs, nb, perm, chunks, tabs, r0 = 8, 96, list(range(96)), [], [], 0
        rng.shuffle(perm)
        for c in range(rng.randint(1, 5)):
            n, s = rng.choice([1, 2, rng.randint(3, 12), rng.randint(13, pick(dev, 40, 20))]), rng.choice([0, rng.randint(0, 24)])
            need = -(-(s + n) // bs)
            tabs.append(perm[:need]); perm = perm[need:]
            chunks.append((r0, n, c, s)); r0 += n
        bt = torch.zeros(len(tabs), max(map(len, tabs)), dtype=torch.int32)
        for i, t in enumerate(tabs): bt[i, :len(t)] = torch.tensor(t, dtype=torch.int32)
        q = torch.randn(r0 + 2, H, D, generator=g).to(dev, dt)
        kc, vc = (torch.randn(nb, bs, n_kv, D, generator=g).to(dev, dt) for _ in range(2))
        bt = bt.to(dev)
        out = torch.full_like(q, 7.0)
        ck.paged_attention_chunks(q, kc, vc, bt, chunks, out=out, num_warps=pick(dev, 4, 2))
        record("paged_attention_chunks", dt, ck.max_rel_err(out[:r0], ck.paged_attention_chunks_ref(q, kc, vc, bt, chunks)[:r0]), dev)
        assert bool((out[r0:] == 7).all())
        (kq, ks), (vq, vs) = quantize_kv(kc), quantize_kv(vc)
        o8 = ck.paged_attention_chunks(q, kq, vq, bt, chunks, num_warps=pick(dev, 4, 2), k_scale=ks, v_scale=vs)
        record("paged_attention_chunks int8 KV", dt, ck.max_rel_err(o8[:r0], ck.paged_attention_chunks_ref(q, kq, vq, bt, chunks, k_scale=ks, v_scale=vs)[:r0]), dev)
    with pytest.raises(ValueError, match="chunk 0"): ck.paged_attention_chunks(q, kc, vc, bt, [(0, 1, len(tabs), 0)])
    with pytest.raises(ValueError, match="chunk 0"): ck.paged_attention_chunks(q, kc, vc, bt, [(r0 + 1, 2, 0, 0)])


@pytest.mark.parametrize("dt", DTYPES)
def test_softmax_split(dt, dev):
    g = torch.Generator().manual_seed(8)
    for rows, N in pick(dev, ((1, 10), (3, 49152), (2, 128256), (64, 333), (1, 5000)), ((1, 10), (2, 20000), (9, 333), (1, 5000))):
        x = (torch.randn(rows, N, generator=g) * 5).to(dev, dt)
        x[0, :N // 3] = -math.inf
        ref = ck.softmax_ref(x.cpu())
        for S in (None, 2, 7, 64):
            record("softmax_split", dt, ck.max_rel_err(ck.softmax(x, splits=S), ref), dev)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("kvd", [None, "int8"])
def test_kv_append_matches_pool_write(dt, kvd, dev):
    "kv_append into a CUDA PagedKVPool == PagedKVPool.write on the CPU, bit for bit (int8 codes and scales too); padding slots skipped."
    from xllm.kv_pool import PagedKVPool
    g = torch.Generator().manual_seed(9)
    for n_kv, D in pick(dev, ((2, 32), (8, 128), (3, 64)), ((2, 32), (3, 64))):
        c = LlamaConfig(vocab_size=32, hidden_size=4 * n_kv * D, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4 * n_kv,
                        num_key_value_heads=n_kv, head_dim=D)
        cpu, gpu = PagedKVPool(c, 6, 16, dt, "cpu", kvd), PagedKVPool(c, 6, 16, dt, dev, kvd)   # dev 'cpu': emulated kv_append vs pool.write
        N = 40
        slots = torch.randperm(6 * 16, generator=g)[:N]
        qkv = (torch.randn(N, 3 * n_kv * D, generator=g) * 3).to(dt)
        cpu.write(1, slots, qkv[:, :n_kv * D].view(N, n_kv, D), qkv[:, n_kv * D:2 * n_kv * D].view(N, n_kv, D))
        qg = qkv.to(dev)
        kg, vg = qg[:, :n_kv * D].view(N, n_kv, D), qg[:, n_kv * D:2 * n_kv * D].view(N, n_kv, D)
        pad = torch.tensor([-1, cpu.k_flat[1].shape[0]])
        ck.kv_append(torch.cat([kg, kg[:2]]), torch.cat([vg, vg[:2]]), gpu.k_flat[1], gpu.v_flat[1], torch.cat([slots, pad]).to(dev),
                     gpu.k_scale_flat[1], gpu.v_scale_flat[1])
        for layer in (0, 1):
            for a, b in ((cpu.k_flat, gpu.k_flat), (cpu.v_flat, gpu.v_flat), (cpu.k_scale_flat, gpu.k_scale_flat), (cpu.v_scale_flat, gpu.v_scale_flat)):
                if a[layer] is not None: assert torch.equal(a[layer], b[layer].cpu()), (dt, kvd, n_kv, D, layer)


@pytest.mark.parametrize("dt", DTYPES)
def test_int8_linear(dt, dev):
    "Int8Linear's layout (per-row float32 and grouped float16 scales, groups of 16 as GGUF Q6_K has them too, float32 bias) vs the float64 reference."
    from xllm.quant import Int8Linear
    g = torch.Generator().manual_seed(10)
    for M, O, I, gs in pick(dev, ((1, 4096, 4096, None), (3, 11008, 4096, None), (7, 4096, 11008, 32), (16, 100, 576, None), (5, 33, 64, 32), (256, 64, 1536, None), (3, 4096, 11008, 16)),
                            ((1, 64, 4096, None), (3, 40, 1024, 32), (2, 24, 512, 16), (16, 100, 576, None), (5, 33, 64, 32), (20, 8, 1536, None))):
        mod = Int8Linear.from_float(torch.randn(O, I, generator=g) * 0.02, group_size=gs)
        bias = torch.randn(O, generator=g)
        x = torch.randn(M, I, generator=g).to(dev, dt)
        w, s = mod.weight.to(dev), ck.int8_scales(mod.scales).to(dev)
        record("int8_linear", dt, ck.max_rel_err(ck.int8_linear(x, w, s, bias.to(dev)), ck.int8_linear_ref(x.cpu(), mod.weight, mod.scales, bias)), dev)
        record("int8_linear", dt, ck.max_rel_err(ck.int8_linear(x, w, s), ck.int8_linear_ref(x.cpu(), mod.weight, mod.scales)), dev)
        if gs is not None:                                              # the module's float16 group scales, read as they are
            record("int8_linear", dt, ck.max_rel_err(ck.int8_linear(x, w, mod.scales.to(dev), bias.to(dev)), ck.int8_linear_ref(x.cpu(), mod.weight, mod.scales, bias)), dev)


@pytest.mark.skipif(not HAVE_GPU, reason="needs a CUDA device and CuPy")
def test_runs_on_torch_current_stream():
    dev = "cuda"
    "Launched inside torch.cuda.stream(s): ordered after torch's work on s, before the next, without syncing the default stream."
    g = torch.Generator().manual_seed(6)
    s = torch.cuda.Stream()
    x = torch.randn(64, 4096, generator=g).to(dev)
    w = torch.randn(4096, generator=g).to(dev)
    ref, _ = ck.rms_norm_ref((x * 2).cpu(), w.cpu())
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)                 # keep s busy so a launch on another stream would read x too early
        x2 = x * 2
        out = ck.rms_norm(x2, w)
        y = out + 0
    s.synchronize()
    assert ck.max_rel_err(y, ref) < ck.kernel_rtol(torch.float32)


def test_argument_errors(dev):
    x = torch.randn(4, 64, device=dev, dtype=torch.float16)
    with pytest.raises(ValueError, match="weight has dtype"): ck.rms_norm(x, torch.ones(64, device=dev))
    with pytest.raises(ValueError, match="residual shape"): ck.rms_norm(x, torch.ones(64, device=dev, dtype=x.dtype), residual=x[:2])
    with pytest.raises(ValueError, match="positions"): ck.rope_(x.view(4, 1, 64), x.view(4, 1, 64), torch.zeros(4, dtype=torch.int32, device=dev),
                                                                torch.ones(8, 32, device=dev), torch.ones(8, 32, device=dev))
    q = torch.randn(1, 6, 64, device=dev)
    with pytest.raises(ValueError, match="multiple of the cache's n_kv"):
        ck.paged_attention(q, torch.zeros(2, 16, 4, 64, device=dev), torch.zeros(2, 16, 4, 64, device=dev),
                           torch.zeros(1, 1, dtype=torch.int32, device=dev), torch.ones(1, dtype=torch.int32, device=dev))


def test_argument_errors_second_generation(dev):
    q = torch.randn(1, 8, 96, device=dev, dtype=torch.float16)
    kc = torch.zeros(2, 16, 2, 96, device=dev, dtype=torch.float16)
    bt, cl = torch.zeros(1, 1, dtype=torch.int32, device=dev), torch.ones(1, dtype=torch.int32, device=dev)
    with pytest.raises(ValueError, match="head_dim must be one of"): ck.paged_attention_v2(q, kc, kc, bt, cl)
    q = torch.randn(1, 32, 64, device=dev); kc = torch.zeros(2, 16, 2, 64, device=dev)
    with pytest.raises(ValueError, match="at most 8"): ck.paged_attention_v2(q, kc, kc, bt, cl)
    with pytest.raises(ValueError, match="num_splits"): ck.paged_attention_v2(q[:, :8].contiguous(), kc, kc, bt, cl, num_splits=0)
    with pytest.raises(ValueError, match="splits"): ck.softmax(torch.randn(2, 8, device=dev), splits=0)
    k = torch.randn(3, 2, 64, device=dev)
    flat = torch.zeros(32, 2, 64, device=dev)
    with pytest.raises(ValueError, match="k_scale is required"):
        ck.kv_append(k, k, flat.to(torch.int8), flat.to(torch.int8), torch.zeros(3, dtype=torch.long, device=dev))
    with pytest.raises(ValueError, match="slot_mapping"): ck.kv_append(k, k, flat, flat, torch.zeros(3, dtype=torch.int32, device=dev))
    with pytest.raises(ValueError, match="k_cache must be contiguous"): ck.kv_append(k, k, torch.zeros(32, 4, 64, device=dev), torch.zeros(32, 4, 64, device=dev),
                                                                                    torch.zeros(3, dtype=torch.long, device=dev))
    x = torch.randn(2, 40, device=dev)
    with pytest.raises(ValueError, match="multiple of 16"): ck.int8_linear(x, torch.zeros(8, 40, dtype=torch.int8, device=dev), torch.ones(8, 1, device=dev))
    x = torch.randn(2, 64, device=dev)
    with pytest.raises(ValueError, match="scales"): ck.int8_linear(x, torch.zeros(8, 64, dtype=torch.int8, device=dev), torch.ones(8, 3, device=dev))


def test_load_kernels():
    "Every kernel builds and loads at once on a GPU; without CuPy the failure is one RuntimeError naming the cause (LLM then keeps torch ops)."
    if HAVE_GPU: assert ck.load_kernels() == len(ck.KERNEL_NAMES)
    elif not ck.cupy_available():
        with pytest.raises(RuntimeError, match=r"could not be built on cuda:0: ImportError: .*CuPy"): ck.load_kernels("cuda:0")
    else: pytest.skip("CuPy without a GPU")


INT4_SHAPES = ((1, 4096, 4096, 32, True), (3, 2048, 4096, 32, False), (7, 1024, 11008, 64, True), (16, 100, 576, 32, True), (5, 33, 64, 32, False))   # float64 refs: keep them small
INT4_SHAPES_EMU = ((1, 24, 1024, 32, True), (5, 33, 64, 32, False), (3, 8, 2048, 64, True), (9, 40, 96, 32, True), (16, 8, 1536, 32, False))


@pytest.mark.parametrize("dt", DTYPES)
def test_int4_linear(dt, dev):
    "Int4Linear's layout (float16 scales, with and without minimums, groups of 32 and 64, float32 bias) vs the float64 reference."
    from xllm.quant import Int4Linear
    g = torch.Generator().manual_seed(11)
    for M, O, I, gs, zp in pick(dev, INT4_SHAPES, INT4_SHAPES_EMU):
        mod = Int4Linear.from_float(torch.randn(O, I, generator=g) * 0.02, group_size=gs, zero_point=zp)
        mod.bias = torch.randn(O, generator=g)
        qw = ck.quant_weight(mod.to(dev))
        x = torch.randn(M, I, generator=g).to(dev, dt)
        y = x.double().cpu() @ ck.quant_weight_ref(qw).T
        record("int4_linear", dt, ck.max_rel_err(ck.int4_linear(x, qw.codes, qw.scales, qw.mins, qw.bias), y + mod.bias.double().cpu()), dev)
        record("int4_linear", dt, ck.max_rel_err(ck.int4_linear(x, qw.codes, qw.scales, qw.mins), y), dev)


@pytest.mark.parametrize("dt", DTYPES)
def test_dequantize_and_quant_linear(dt, dev):
    """dequantize_weight (int8 per-row and grouped, int4 with and without minimums) vs the float64 weight; quant_linear on both
    sides of gemv_rows, and on a stack of modules (q/k/v): the GEMV against the exact weight, dequantize + torch.mm against the
    weight rounded to the activations' dtype (each weight's rounding is that path's own)."""
    from xllm.quant import Int4Linear, Int8Linear
    g = torch.Generator().manual_seed(12)
    O, I, M = pick(dev, (1024, 4096, 40), (40, 256, 20))
    w = lambda o: torch.randn(o, I, generator=g) * 0.02
    for mods in ([Int8Linear.from_float(w(O))], [Int8Linear.from_float(w(O), group_size=32)], [Int4Linear.from_float(w(O), 32)],
                 [Int4Linear.from_float(w(O), 64, zero_point=False)], [Int4Linear.from_float(w(O), 32), Int4Linear.from_float(w(8), 32)]):
        qw = ck.quant_weight([m.to(dev) for m in mods])
        name = f"dequant_int{qw.bits}"
        out = torch.empty(qw.shape, dtype=dt, device=dev)
        assert ck.dequantize_weight(qw, out) is out
        record(name, dt, ck.max_rel_err(out, ck.quant_weight_ref(qw)), dev)
        x = torch.randn(M, I, generator=g).to(dev, dt)
        record(f"int{qw.bits} gemv", dt, ck.max_rel_err(ck.quant_linear(x[:3], qw), ck.quant_linear_ref(x[:3], qw)), dev)
        ws = torch.empty(qw.shape[0] * qw.shape[1] + 7, dtype=dt, device=dev)
        y, ref = ck.quant_linear(x, qw, workspace=ws, gemv_rows=M - 1), ck.quant_linear_ref(x, qw, weight_dtype=dt)
        record(f"int{qw.bits} dequant+mm", dt, ck.max_rel_err(y, ref), dev)
        rows = qw.shape[0] // 3 + 1                                          # a workspace of fewer rows: the weight in slices
        y2 = ck.quant_linear(x, qw, out=torch.full_like(y, float("nan")), workspace=ws[:rows * I + 5], gemv_rows=M - 1)
        record(f"int{qw.bits} dequant+mm", dt, ck.max_rel_err(y2, ref), dev)   # every column written
        with pytest.raises(ValueError, match="workspace"): ck.quant_linear(x, qw, workspace=ws[:I - 1], gemv_rows=0)


def test_quant_argument_errors(dev):
    "What the INT4/INT8 kernels cannot take is named before any launch."
    from xllm.quant import Int4Linear
    qw = ck.quant_weight(Int4Linear.from_float(torch.randn(8, 64), 32).to(dev))
    x = torch.randn(2, 64, device=dev)
    with pytest.raises(ValueError, match="does not take x with 32 features"): ck.int4_linear(x[:, :32].contiguous(), qw.codes, qw.scales, qw.mins)
    with pytest.raises(ValueError, match="scales has dtype torch.float32"): ck.int4_linear(x, qw.codes, qw.scales.float(), qw.mins)
    with pytest.raises(ValueError, match="mins .* must match"): ck.int4_linear(x, qw.codes, qw.scales, qw.mins[:4])
    with pytest.raises(ValueError, match="multiple of 32"): ck.int4_linear(torch.randn(2, 48, device=dev), torch.zeros(8, 24, dtype=torch.uint8, device=dev), torch.ones(8, 1, dtype=torch.float16, device=dev))
    with pytest.raises(ValueError, match="out must be contiguous"): ck.dequantize_weight(qw, torch.empty(64, 8, device=dev).t())
    with pytest.raises(ValueError, match="mins are only for int4"): ck.quant_linear(x, qw._replace(bits=8, codes=torch.zeros(8, 64, dtype=torch.int8, device=dev), scales=qw.scales.float()))
