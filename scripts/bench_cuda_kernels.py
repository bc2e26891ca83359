#!/usr/bin/env python
"""Time each xllm.cuda_kernels kernel against its torch eager equivalent on the GPU (CUDA events around 50 queued calls),
GPU time with the launch queue pre-filled, plus host time per call; Llama-2/3-7B-like shapes in fp16 (softmax on fp32 logits), and print one table.
Each row is printed, and with a file argument appended to it as one record of xllm.bench's schema (name "kernels"), as soon as
it is measured: a run cut short keeps its rows. Not a test: numbers depend on the machine.
`--device cpu` is gpu_check.sh's dry run: the first group of rows at tiny shapes, the kernels in the CUDA emulator (notebook
16a), host timers; the rest need a GPU."""
import argparse, json, sys, time
import torch
import torch.nn.functional as F
import xllm.cuda_kernels as ck
from xllm.bench import environment

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("out", nargs="?", help="append one JSON record per row to this file")
ap.add_argument("--device", default="cuda", help="cuda (default), or cpu: a dry run in the emulator")
A = ap.parse_args()
DRY = A.device == "cpu"
ENV = environment()                                  # the machine before the runs

dev, dt = A.device, torch.float16
if DRY:
    from xllm.cuda_emu import emulate
    _emu = emulate(); _emu.__enter__()               # xllm.cuda_kernels takes CPU tensors from here on, run by the emulator (kept referenced)
g = torch.Generator(device=dev).manual_seed(0)
rnd = lambda *s, dtype=dt: torch.randn(*s, generator=g, device=dev, dtype=torch.float32).to(dtype)


def bench(fn, n=50, warm=5):
    """GPU microseconds per call with launch overhead hidden: the stream is held by a ~50 ms sleep kernel while the n calls
    are queued, so the timed region is the kernels running back to back. Also returns host microseconds per call (a dry
    run: host time in both)."""
    if DRY: n, warm = 2, 1
    for _ in range(warm): fn()
    if not DRY: torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n): fn()
    if not DRY: torch.cuda.synchronize()
    host = (time.perf_counter() - t0) / n * 1e6
    if DRY: return host, host
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(100_000_000)
    a.record()
    for _ in range(n): fn()
    b.record(); b.synchronize()
    return a.elapsed_time(b) / n * 1000, host


def eager_rms(x, w, eps, r):
    s = r.add_(x)
    h = s.float()
    return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype), s


def eager_rope(q, k, pos, cos, sin):
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]
    rot = lambda x: torch.cat([-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]], -1)
    return (q.float() * c + rot(q.float()) * s).to(q.dtype), (k.float() * c + rot(k.float()) * s).to(k.dtype)


def eager_paged(q, kc, vc, bt, lens, maxlen):
    B, H, D = q.shape; bs, n_kv = kc.shape[1], kc.shape[2]
    idx = torch.arange(maxlen, device=dev)
    slots = bt[:, idx // bs].long() * bs + idx % bs                                    # [B, maxlen]
    K = kc.view(-1, n_kv, D)[slots].transpose(1, 2)                                      # [B, n_kv, L, D] gathered copy
    V = vc.view(-1, n_kv, D)[slots].transpose(1, 2)
    mask = (idx[None, :] < lens[:, None].long())[:, None, None, :]
    return F.scaled_dot_product_attention(q[:, :, None, :], K, V, attn_mask=mask, enable_gqa=True)[:, :, 0]


class Rows(list):
    "The rows so far; each one printed and written (with the file argument) as it is added."
    def append(self, row):
        super().append(row)
        name, shape, (ours, ours_h), (eager, eager_h), nbytes = row
        print(f"{name:22s} {shape:46s} {ours:11.1f} {eager:12.1f} {eager / ours:7.2f}x {nbytes / ours / 1e3:9.0f} {ours_h:12.1f} / {eager_h:8.1f}", flush=True)
        if A.out:
            with open(A.out, "a") as f:
                f.write(json.dumps(dict(name="kernels", workload=f"{name} {shape}", runner="cuda", **ENV, kernel=name, shape=shape, xllm_us=ours, torch_us=eager,
                                        speedup=eager / ours, gbps=nbytes / ours / 1e3, dry_run=DRY)) + "\n")

print(f"GPU: {torch.cuda.get_device_name() if not DRY else 'none (dry run: the CUDA emulator on the CPU, tiny shapes, host times)'}  torch {torch.__version__}")
print(f"{'kernel':22s} {'shape':46s} {'xllm gpu us':>11s} {'torch gpu us':>12s} {'speedup':>8s} {'xllm GB/s':>9s} {'host us/call xllm/torch':>24s}", flush=True)
rows = Rows()
T, Hd, I = (256, 4096, 11008) if not DRY else (4, 256, 512)
x, r, w = rnd(T, Hd), rnd(T, Hd), rnd(Hd)
rows.append(("rms_norm+residual", f"[{T},{Hd}] fp16", bench(lambda: ck.rms_norm(x, w, 1e-5, residual=r)), bench(lambda: eager_rms(x, w, 1e-5, r)), 4 * T * Hd * 2))
cos, sin = rnd(4096, 128, dtype=torch.float32), rnd(4096, 128, dtype=torch.float32)
q, k, pos = rnd(T, 32, 128), rnd(T, 8, 128), torch.randint(0, 4096, (T,), device=dev)
rows.append(("rope (q,k in place)", f"T={T} 32+8 heads x128", bench(lambda: ck.rope_(q, k, pos, cos, sin)), bench(lambda: eager_rope(q, k, pos, cos, sin)), 2 * T * 40 * 128 * 2))
gu = rnd(T, 2 * I)
rows.append(("silu_and_mul", f"[{T},2x{I}] fp16", bench(lambda: ck.silu_and_mul_fused(gu)), bench(lambda: F.silu(gu[:, :I]) * gu[:, I:]), 3 * T * I * 2))
V = 128256 if not DRY else 1024
logits = rnd(64, V, dtype=torch.float32)
rows.append(("softmax (online)", f"[64,{V}] fp32", bench(lambda: ck.softmax(logits)), bench(lambda: torch.softmax(logits, -1)), 3 * 64 * V * 4))
for B, L in ((1, 4096), (64, 1024), (256, 512)) if not DRY else ((1, 64),):
    bs, nb_per = 16, (L + 15) // 16
    kc, vc = rnd(B * nb_per + 1, bs, 8, 128), rnd(B * nb_per + 1, bs, 8, 128)
    bt = torch.randperm(B * nb_per, device=dev).int().view(B, nb_per)
    lens = torch.full((B,), L, dtype=torch.int32, device=dev)
    qa = rnd(B, 32, 128)
    err = ck.max_rel_err(ck.paged_attention(qa, kc, vc, bt, lens), eager_paged(qa.double(), kc.double(), vc.double(), bt, lens, L))
    rows.append((f"paged_attention B={B}", f"ctx {L}, 32/8 heads x128, err {err:.1e}", bench(lambda: ck.paged_attention(qa, kc, vc, bt, lens)),
                 bench(lambda: eager_paged(qa, kc, vc, bt, lens, L)), 2 * B * L * 8 * 128 * 2))
    if B == 1:
        rows.append(("paged_attention B=1", "same, 16 warps per block", bench(lambda: ck.paged_attention(qa, kc, vc, bt, lens, num_warps=16)),
                     rows[-1][3], 2 * B * L * 8 * 128 * 2))


if DRY:
    print("dry run: the first group of rows only; the second-generation, prefill, int8 K/V, kv_append and int8/int4 weight rows need a GPU")
    _emu.__exit__(None, None, None); sys.exit(0)
# ---- second-generation kernels
logits16 = rnd(4, 128256, dtype=torch.float32)
rows.append(("softmax split (auto)", "[4,128256] fp32", bench(lambda: ck.softmax(logits16)), bench(lambda: torch.softmax(logits16, -1)), 3 * 4 * 128256 * 4))
rows.append(("softmax 1 block/row", "[4,128256] fp32", bench(lambda: ck.softmax(logits16, splits=1)), rows[-1][3], 3 * 4 * 128256 * 4))
for n_kv, B, L in ((8, 1, 4096), (8, 64, 1024), (8, 256, 512), (32, 1, 4096), (32, 48, 1024), (32, 160, 1024), (32, 200, 64)):
    bs, nb_per = 16, (L + 15) // 16
    kc, vc = rnd(B * nb_per + 1, bs, n_kv, 128), rnd(B * nb_per + 1, bs, n_kv, 128)
    bt = torch.randperm(B * nb_per, device=dev).int().view(B, nb_per)
    lens = torch.full((B,), L, dtype=torch.int32, device=dev)
    qa = rnd(B, 32, 128)
    err = ck.max_rel_err(ck.paged_attention_v2(qa, kc, vc, bt, lens), eager_paged(qa.double(), kc.double(), vc.double(), bt, lens, L))
    S = ck.paged_attention_splits(B, n_kv, nb_per * bs, torch.cuda.get_device_properties(0).multi_processor_count)
    rows.append((f"paged_attn_v2 B={B}", f"ctx {L}, 32/{n_kv} heads x128, {S} splits, err {err:.1e}", bench(lambda: ck.paged_attention_v2(qa, kc, vc, bt, lens)),
                 bench(lambda: eager_paged(qa, kc, vc, bt, lens, L)), 2 * B * L * n_kv * 128 * 2))
    rows.append((f"paged_attn_v1 B={B}", "same, first version", bench(lambda: ck.paged_attention(qa, kc, vc, bt, lens)), rows[-1][3], rows[-1][4]))


def prefill_and_int8_rows(bench, rnd, dev):
    """Rows that tune the runner: (1) a prompt chunk of T tokens attending causally to itself, through paged_attention_chunks
    (tiles of tokens; CudaRunner.ragged's path for chunks up to kernel_chunk_tokens) and through paged_attention_v2 with one
    query row per token, against a gather + causal SDPA (ragged's path for longer chunks, chunk_attention): where the tiles
    stop winning is the value kernel_chunk_tokens should have; (2) paged_attention_v2 over an int8 K/V cache against the same
    fp16 cache (torch column: the fp16 kernel)."""
    from xllm.kv_pool import quantize_kv
    out = rows
    for n_kv in (32, 8):
        for T in (8, 32, 64, 128, 256, 512):
            nbp = (T + 15) // 16
            kc, vc = rnd(nbp + 1, 16, n_kv, 128), rnd(nbp + 1, 16, n_kv, 128)
            tab = torch.randperm(nbp, device=dev).int()
            q = rnd(T, 32, 128)
            bt_rows, lens_rows = tab[None].expand(T, -1).contiguous(), torch.arange(1, T + 1, dtype=torch.int32, device=dev)
            keys = (tab.long()[:, None] * 16 + torch.arange(16, device=dev)).view(-1)[:T]
            def sdpa(q=q, kc=kc, vc=vc, keys=keys, n_kv=n_kv):
                K, V = kc.view(-1, n_kv, 128)[keys].transpose(0, 1)[None], vc.view(-1, n_kv, 128)[keys].transpose(0, 1)[None]
                return F.scaled_dot_product_attention(q.transpose(0, 1)[None], K, V, is_causal=True, enable_gqa=True)[0].transpose(0, 1)
            ref = ck.paged_attention_ref(q.double(), kc, vc, bt_rows, lens_rows)
            bt1, chunk = tab[None].contiguous(), [(0, T, 0, 0)]
            tiles = ck.chunk_tiles(chunk, 32, n_kv, dev)
            err = max(ck.max_rel_err(ck.paged_attention_chunks(q, kc, vc, bt1, chunk, tiles=tiles), ref), ck.max_rel_err(sdpa(), ref))
            t_sdpa = bench(sdpa)
            out.append((f"prefill attn T={T}", f"tiles (chunks kernel) vs gather+SDPA, 32/{n_kv} heads, err {err:.1e}",
                        bench(lambda: ck.paged_attention_chunks(q, kc, vc, bt1, chunk, tiles=tiles)), t_sdpa, 2 * T * n_kv * 128 * 2))
            out.append((f"prefill attn T={T}", "one v2 row per token vs gather+SDPA",
                        bench(lambda: ck.paged_attention_v2(q, kc, vc, bt_rows, lens_rows)), t_sdpa, 2 * T * n_kv * 128 * 2))
    for n_kv, B, L in ((32, 160, 1024), (8, 160, 1024), (32, 1, 4096)):
        nbp = (L + 15) // 16
        kc, vc = rnd(B * nbp + 1, 16, n_kv, 128), rnd(B * nbp + 1, 16, n_kv, 128)
        (kq, ks), (vq, vs) = quantize_kv(kc), quantize_kv(vc)
        bt = torch.randperm(B * nbp, device=dev).int().view(B, nbp)
        lens = torch.full((B,), L, dtype=torch.int32, device=dev)
        qa = rnd(B, 32, 128)
        err = ck.max_rel_err(ck.paged_attention_v2(qa, kq, vq, bt, lens, k_scale=ks, v_scale=vs), ck.paged_attention_ref(qa, kq, vq, bt, lens, k_scale=ks, v_scale=vs))
        out.append((f"paged_attn_v2 int8 KV B={B}", f"ctx {L}, 32/{n_kv} heads; torch col: fp16 cache; err {err:.1e}",
                    bench(lambda: ck.paged_attention_v2(qa, kq, vq, bt, lens, k_scale=ks, v_scale=vs)),
                    bench(lambda: ck.paged_attention_v2(qa, kc, vc, bt, lens)), 2 * B * L * n_kv * 128 * (1 + 4 / 128)))
    return out

try: prefill_and_int8_rows(bench, rnd, dev)                  # its rows are added (printed, written) one by one
except Exception as e: print(f"prefill / int8 K/V rows failed: {type(e).__name__}: {e}")   # the other rows still print
for n_kv, N in ((32, 200), (8, 256)):
    kflat = torch.zeros(4096 * 16, n_kv, 128, device=dev, dtype=dt); vflat = torch.zeros_like(kflat)
    kv = rnd(N, 2, n_kv, 128)
    slots = torch.randperm(4096 * 16, device=dev)[:N]
    rows.append((f"kv_append N={N}", f"{n_kv} kv heads x128 fp16", bench(lambda: ck.kv_append(kv[:, 0], kv[:, 1], kflat, vflat, slots)),
                 bench(lambda: (kflat.index_copy_(0, slots, kv[:, 0]), vflat.index_copy_(0, slots, kv[:, 1]))), 4 * N * n_kv * 128 * 2))
def quant_rows(bench, rnd, dev, dt, shapes=((4096, 4096), (11008, 4096), (4096, 11008)), sweep=(1, 8, 16, 32, 64, 128, 512)):
    """INT8 (per row) and INT4 (groups of 32) weights: the GEMV kernels against the module's own GPU path (dequantize in torch
    ops + matmul) at one row for every shape; for shapes[1], every M of `sweep` through the GEMV kernel and through
    dequantize_weight + torch.mm (against torch.mm on the fp16 weight): where they cross is what QUANT_GEMV_ROWS should be."""
    from xllm.quant import Int8Linear, Int4Linear
    out = rows
    ws = torch.empty(max(o * i for o, i in shapes), dtype=dt, device=dev)   # quant_linear's dequantize workspace
    for kind, make in (("int8", Int8Linear.from_float), ("int4", lambda w: Int4Linear.from_float(w, 32))):
        for O, I in shapes:
            mod = make(torch.randn(O, I, device=dev) * 0.02).to(dev)
            qw, wf = ck.quant_weight(mod), mod.dequantize(dt)
            codes = qw.codes.numel()
            for M in (sweep if (O, I) == shapes[1] else (1,)):
                xm = rnd(M, I)
                ref = lambda: xm.double() @ mod.dequantize(torch.float64).t()    # on the GPU: quick; the float32 dequantization is exact to ~1e-7
                what = f"[{O},{I}]" + (f" err {ck.max_rel_err(ck.quant_linear(xm, qw, gemv_rows=M), ref()):.1e}" if M in (1, 16) else " GEMV kernel")
                out.append((f"{kind}_linear M={M}", what, bench(lambda: ck.quant_linear(xm, qw, gemv_rows=M)), bench(lambda: mod(xm)), codes + 2 * M * (I + O)))
                if (O, I) == shapes[1]:
                    out.append((f"{kind} deq+mm M={M}", f"[{O},{I}] vs fp16 torch.mm", bench(lambda: ck.quant_linear(xm, qw, workspace=ws, gemv_rows=0)),
                                bench(lambda: torch.mm(xm, wf.t())), codes + 4 * O * I + 2 * M * (I + O)))
    return out

try: quant_rows(bench, rnd, dev, dt)
except Exception as e: print(f"int8 / int4 weight rows failed: {type(e).__name__}: {e}")

print("torch column: the same math in torch ops (paged attention: gather of the blocks + SDPA; kv_append: index_copy_; int8/int4_linear: the module's GPU path = dequantize in torch ops + matmul;")
print("  deq+mm: quant_linear above gemv_rows = dequantize_weight + torch.mm, against torch.mm on the fp16 weight, i.e. what a float model pays).")
print("GB/s = minimum bytes the kernel must move (paged attention: the K/V it reads; int8/int4_linear: the codes and activations; deq+mm: codes, fp16 weight written and read) / GPU time;")
print("H200 copy bandwidth is about 4.3 TB/s. QUANT_GEMV_ROWS (16) should sit where the int8/int4_linear and deq+mm rows cross.")
