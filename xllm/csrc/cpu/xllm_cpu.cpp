// xllm CPU kernels: quantized GEMV/GEMM, RMSNorm, RoPE, SiLU-multiply, decode attention, and a whole model in one call.
// One translation unit: xllm.core.read_source inlines the quoted includes below, in this order.
// region: unit
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <shared_mutex>
#include <vector>
#include <cstdlib>
#include <new>
#include <sched.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define XK_AVX2 1
#else
#define XK_AVX2 0
#endif
// The integer dot product the int8-activation GEMM uses, chosen when the library is compiled (from the CPU's flags under
// -march=native): 3 AVX512-VNNI (512-bit vpdpbusd), 2 AVX-VNNI (256-bit vpdpbusd), 1 AVX2 (vpmaddubsw + vpmaddwd), 0 none.
#if XK_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define XK_ISA 3
#elif XK_AVX2 && defined(__AVXVNNI__)
#define XK_ISA 2
#elif XK_AVX2
#define XK_ISA 1
#else
#define XK_ISA 0
#endif
// AMX-INT8 tiles for the int8 GEMM of 16 rows or more (amx.h), where the compiler targets them (-march=native on a CPU with
// amx_int8) and the kernel grants the tile state at run time
#if XK_ISA >= 3 && defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define XK_AMX 1
#else
#define XK_AMX 0
#endif

#include "xllm_cpu.h"

namespace {
#include "base.h"
#include "linear.h"
#include "ops.h"
#include "threads.h"
#include "gemm.h"
#include "qgemm.h"
#include "amx.h"
#include "gemv.h"
#include "lora.h"
#include "plan.h"
}  // namespace
// endregion

// region: api
// ---------------------------------------------------------------- the C interface (ctypes): python checks every shape and dtype
extern "C" {
int xk_abi_version(void) { return XLLM_CPU_ABI_VERSION; }
int xk_has_avx2() { return XK_AVX2; }
int xk_isa() { return XK_ISA; }
// bf16 weights from 16 rows: AVX512-BF16 dot products where no AMX tiles take them. enable: 1 on, 0 off, -1 ask; returns
// 1 on, 0 off, -1 not built
int xk_bf16_dot(int enable) {
#if XK_AVX512_BF16
    if (enable >= 0) { std::unique_lock<std::shared_mutex> sw(kernel_switches); bf16dp_on.store(enable ? 1 : 0); }
    return bf16dp_on.load();
#else
    (void)enable; return -1;
#endif
}
// AMX tiles for the int8 GEMM: enable 1 (use them where granted), 0 (don't), -1 (ask only). Returns 1 in use, 0 off,
// -1 not compiled in, -2 - errno: the kernel refused the tile state (arch_prctl)
int xk_amx(int enable) {
#if XK_AMX
    if (!amx_granted()) return -2 - amx_errno;
    if (enable >= 0) { std::unique_lock<std::shared_mutex> sw(kernel_switches); amx_on.store(enable ? 1 : 0); }
    return amx_active() ? 1 : 0;
#else
    (void)enable; return -1;
#endif
}
int64_t xk_amx_min_rows() {
#if XK_AMX
    return AMX_MIN_ROWS;
#else
    return 1 << 30;
#endif
}
int xk_max_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
void xk_linear(int kind, int64_t N, int64_t K, int64_t G, const void* w, const void* s, const void* m, const float* b, int a8, const float* x, int64_t T, float* y, int nt, int method) {
    const Lin L = make_lin(kind, N, K, G, w, s, m, b, a8);
    linear_any(&L, 1, x, T, &y, nt, method);
}
int64_t xk_gemm_min_rows() { return GEMM_MIN_ROWS; }
int64_t xk_qgemm_min_rows() {
#if XK_AVX2
    return QGEMM_MIN_ROWS;
#else
    return 1 << 30;
#endif
}
// several linears of one input x [T, K]: layer l is (kinds[l], Ns[l], K, Gs[l], ws[l], ss[l], ms[l], bs[l]); output ys[l] [T, Ns[l]]
void xk_linear_multi(int nl, int a8, const int* kinds, const int64_t* Ns, int64_t K, const int64_t* Gs, void* const* ws, void* const* ss, void* const* ms,
                     void* const* bs, const float* x, int64_t T, float* const* ys, int nt) {
    std::vector<Lin> Ls;
    for (int l = 0; l < nl; l++) Ls.push_back(make_lin(kinds[l], Ns[l], K, Gs[l], ws[l], ss[l], ms[l], (const float*)bs[l], a8));
    linear_any(Ls.data(), nl, x, T, ys, nt, 0);
}
void xk_gemv_variant(const float* w, const float* x, float* y, int64_t N, int64_t K, int variant, int nt) { gemv_variant(w, x, y, N, K, variant, nt); }
void xk_rmsnorm(const float* x, const float* w, float eps, int64_t rows, int64_t n, float* out) {
    for (int64_t r = 0; r < rows; r++) rmsnorm(x + r * n, w, eps, n, out + r * n);
}
void xk_rope(float* x, const float* cs, const float* sn, int64_t T, int64_t heads, int64_t d) {   // x [T, heads, d] in place; cos/sin [T, d]
    for (int64_t t = 0; t < T; t++) for (int64_t h = 0; h < heads; h++) rope_head(x + (t * heads + h) * d, cs + t * d, sn + t * d, d);
}
void xk_silu_mul(const float* g, const float* u, float* out, int64_t n) { silu_mul(g, u, out, n); }
// q [H, d]; kc, vc [len, kvH, d]; out [H, d]
void xk_attention(const float* q, const float* kc, const float* vc, int64_t H, int64_t kvh, int64_t len, int64_t d, float* out) {
    std::vector<float> scores(len);
    for (int64_t h = 0; h < H; h++)
        attend_head(q + h * d, kc + (h / (H / kvh)) * d, vc + (h / (H / kvh)) * d, nullptr, len, kvh * d, d, 1.0f / std::sqrt((float)d), scores.data(), out + h * d);
}
// decode attention for B sequences over a paged pool: q [B, H, d]; kp, vp [rows, kvh, d]; slots [B, Lmax]; lens [B]; out [B, H, d]
void xk_paged_attention(const float* q, const float* kp, const float* vp, const int64_t* slots, const int64_t* lens, int64_t B, int64_t Lmax,
                        int64_t H, int64_t kvh, int64_t d, float* out, int nt) {
    const float scale = 1.0f / std::sqrt((float)d);
#pragma omp parallel num_threads(nthreads_ok(nt))
    {
        std::vector<float> scores(Lmax > 0 ? Lmax : 1);
#pragma omp for schedule(static)
        for (int64_t i = 0; i < B * H; i++) {
            const int64_t b = i / H, kv_off = (i % H / (H / kvh)) * d;
            attend_head(q + i * d, kp + kv_off, vp + kv_off, slots + b * Lmax, lens[b], kvh * d, d, scale, scores.data(), out + i * d);
        }
    }
}
void* xk_plan_new(int64_t L, int64_t H, int64_t nh, int64_t nkv, int64_t hd, int64_t I, int64_t V, double eps) { return new Plan(L, H, nh, nkv, hd, I, V, eps); }
void xk_plan_free(void* p) { delete (Plan*)p; }
int xk_plan_add_linear(void* p, int kind, int64_t N, int64_t K, int64_t G, const void* w, const void* s, const void* m, const float* b, int a8) {
    return ((Plan*)p)->add_linear(make_lin(kind, N, K, G, w, s, m, b, a8));
}
void xk_plan_set_layer(void* p, int64_t l, const float* an, int q, int k, int v, int o, const float* fn, int g, int u, int d) {
    ((Plan*)p)->layers[l] = LayerIdx{an, fn, q, k, v, o, g, u, d};
}
void xk_plan_set_final(void* p, const float* emb, const float* nw, int head) { Plan* P = (Plan*)p; P->embed = emb; P->norm = nw; P->head = head; }
void xk_plan_set_embed_q8(void* p, int kind, int64_t G, const int8_t* q, const void* s) {   // after set_final: an INT8 embedding instead
    Plan* P = (Plan*)p; P->emb_q = make_lin(kind, P->V, P->H, G, q, s, nullptr, nullptr, 0); P->emb_quant = true;
}
void xk_plan_set_tp(void* p, int64_t emb_start, int64_t emb_n, void* reduce) {   // a tensor-parallel shard: its embedding slice, the group's sum
    Plan* P = (Plan*)p; P->emb_start = emb_start; P->emb_n = emb_n; P->reduce = (ReduceFn)reduce;
}
// out[0..6]: seconds per phase since the last call, out[7]: steps, out[8]: seconds a thread waited at the barriers (the team's
// sum over its size); then reset
void xk_plan_profile(void* p, int enable, double* out) {
    Plan* P = (Plan*)p;
    for (int i = 0; i < 7; i++) { out[i] = P->phase[i]; P->phase[i] = 0; }
    out[7] = (double)P->prof_steps; P->prof_steps = 0; P->prof = enable != 0;
    out[8] = (double)P->waited_ns.exchange(0) * 1e-9 / std::max(1, P->bar.n.load());   // the last team's real size
}
// LoRA (lora.h): linear `lin` of the plan gets adapters A [S, R, K], Bt [S, R, N]; the next forward's rows, slots[0..n) (-1: none)
void xk_plan_set_lora(void* p, int lin, int64_t S, int64_t R, const float* A, const float* Bt) {
    Plan* P = (Plan*)p; if ((int)P->lora_w.size() <= lin) P->lora_w.resize(lin + 1);
    P->lora_w[lin] = LoraW{A, Bt, S, R}; P->lora_R = std::max(P->lora_R, R);
}
void xk_plan_lora_rows(void* p, int64_t n, const int64_t* slots, int64_t S, const int* ranks, const float* scales) {
    Plan* P = (Plan*)p; std::lock_guard<std::mutex> hold(P->busy); P->lrows.set(n, slots, S, ranks, scales);
}
// y [T, N] += each row's adapter product (x [T, K], slots [T]), standalone: the plan's two phases in a parallel region of its own
void xk_lora(int64_t T, int64_t K, int64_t N, int64_t S, int64_t R, const float* A, const float* Bt, const int64_t* slots, const int* ranks,
             const float* scales, const float* x, float* y, int nt) {
    LoraRows lr; lr.set(T, slots, S, ranks, scales);
    if (lr.N == 0) return;
    const LoraW w{A, Bt, S, R}; std::vector<float> h(T * R); float* hp = h.data(); Barrier bar;
#pragma omp parallel num_threads(nthreads_ok(nt))
    {
#ifdef _OPENMP
        const int tid = omp_get_thread_num(), n = omp_get_num_threads();
#else
        const int tid = 0, n = 1;
#endif
        bar.n.store(n, std::memory_order_relaxed);
        lora_shrinks(&w, &K, 1, lr, x, &hp, tid, n);
        bar.wait();
        int64_t t0, t1; split(T, tid, n, t0, t1, 1);
        lora_expands(&w, &N, 1, lr, &hp, &y, t0, t1);
    }
}
// Every index of a step's batch inside what it indexes, checked before xk_plan_forward trusts them: one pass in C over the
// indices, where sixteen torch reductions (a dispatch each) took 20-60 us of a 4 ms decode step, more for long key lists.
// Returns 0, or 1 + the first kind with an index outside: 0 token id (< vocab), 1 slot, 2 key slot (< rows), 3 logits row
// (< N), 4 position, 5 key offset, 6 key offset + position (< nkeys), 7 hidden row (< N). *npos: the largest position + 1.
int xk_check_batch(int64_t N, const int64_t* ids, const int64_t* pos, const int64_t* wslot, int64_t nkeys, const int64_t* keys, const int64_t* koff,
                   int64_t M, const int64_t* out_rows, int64_t Mh, const int64_t* hid_rows, int64_t vocab, int64_t rows, int64_t* npos) {
    auto inside = [](const int64_t* a, int64_t n, int64_t hi) { for (int64_t i = 0; i < n; i++) if (a[i] < 0 || a[i] >= hi) return false; return true; };
    if (!inside(ids, N, vocab)) return 1;
    if (!inside(wslot, N, rows)) return 2;
    if (!inside(keys, nkeys, rows)) return 3;
    if (!inside(out_rows, M, N)) return 4;
    if (!inside(pos, N, nkeys)) return 5;
    if (!inside(koff, N, nkeys)) return 6;
    for (int64_t i = 0; i < N; i++) if (koff[i] + pos[i] < 0 || koff[i] + pos[i] >= nkeys) return 7;
    if (!inside(hid_rows, Mh, N)) return 8;
    int64_t mx = -1; for (int64_t i = 0; i < N; i++) mx = std::max(mx, pos[i]);
    *npos = mx + 1;
    return 0;
}
void xk_plan_forward(void* p, int64_t N, const int64_t* ids, const int64_t* pos, const int64_t* wslot, void* const* kb, void* const* vb, int kv16,
                     const int64_t* keys, const int64_t* koff, const float* cs, const float* sn, int64_t M, const int64_t* out_rows, float* logits,
                     int64_t Mh, const int64_t* hid_rows, float* hidden, int nt) {
    ((Plan*)p)->forward(N, ids, pos, wslot, kb, vb, kv16, keys, koff, cs, sn, M, out_rows, logits, Mh, hid_rows, hidden, nt);
}
}
// endregion
