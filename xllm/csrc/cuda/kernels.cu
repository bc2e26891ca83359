// xllm CUDA kernels, first generation: RMSNorm, RoPE, SiLU-multiply, softmax, paged attention.
#include "common.cuh"

// region: rms_norm
// ---- RMSNorm, optionally fused with the residual add ------------------------------------------------------------
// One block per row. With a residual: s = x + residual (rounded to T, written back to residual), out = w * s / rms(s).
template <typename T>
__device__ void rms_norm_impl(const T* x, T* res, const T* w, T* out, int H, long long xs, long long rs, long long os, float eps) {
    const long long row = blockIdx.x;
    const T* xr = x + row * xs;
    T* rr = res ? res + row * rs : (T*)0;
    T* orow = out + row * os;
    float ss = 0.f;
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        float v = to_f(xr[i]);
        if (rr) { T s = from_f<T>(v + to_f(rr[i])); rr[i] = s; v = to_f(s); }
        ss += v * v;
    }
    const float inv = rsqrtf(block_sum(ss) / (float)H + eps);
    for (int i = threadIdx.x; i < H; i += blockDim.x) {       // same i per thread: rereads what this thread wrote
        const float v = rr ? to_f(rr[i]) : to_f(xr[i]);
        orow[i] = from_f<T>(v * inv * to_f(w[i]));
    }
}

// endregion
// region: rope
// ---- RoPE in place, HF rotate-half layout -----------------------------------------------------------------------
// One block per token; q [T, nq, D] and k [T, nk, D] (row strides qs, ks); cos/sin float32 [max_pos, >= D/2] (row stride cs).
template <typename T>
__device__ void rope_impl(T* q, T* k, const long long* pos, const float* cos_t, const float* sin_t,
                          int nq, int nk, int D, long long qs, long long ks, long long cs, int max_pos) {
    const long long t = blockIdx.x;
    const long long p = pos[t];
    if (p < 0 || p >= max_pos) return;                        // out of table: never read out of bounds
    const int half = D / 2;
    const float* c = cos_t + p * cs;
    const float* s = sin_t + p * cs;
    const int n = (nq + nk) * half;
    for (int idx = threadIdx.x; idx < n; idx += blockDim.x) {
        const int h = idx / half, i = idx - h * half;
        T* v = h < nq ? q + t * qs + (long long)h * D : k + t * ks + (long long)(h - nq) * D;
        const float x1 = to_f(v[i]), x2 = to_f(v[i + half]), cc = c[i], sn = s[i];
        v[i] = from_f<T>(x1 * cc - x2 * sn);
        v[i + half] = from_f<T>(x2 * cc + x1 * sn);
    }
}

// endregion
// region: silu_mul
// ---- SiLU(gate) * up ------------------------------------------------------------------------------------------
template <typename T>
__device__ void silu_mul_impl(const T* g, const T* u, T* out, int I, long long gs, long long us, long long os) {
    const long long row = blockIdx.x;
    for (int i = threadIdx.x; i < I; i += blockDim.x) {
        const float a = to_f(g[row * gs + i]);
        out[row * os + i] = from_f<T>(a / (1.f + expf(-a)) * to_f(u[row * us + i]));
    }
}

// endregion
// region: softmax
// ---- Row softmax, one pass for max and normalizer -----------------------------------------------------------------
template <typename T>
__device__ void softmax_impl(const T* x, T* out, int N, long long xs, long long os) {
    __shared__ float sm[32], sd[32];
    const long long row = blockIdx.x;
    const T* xr = x + row * xs;
    float m = NEG_INF, d = 0.f;
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        const float v = to_f(xr[i]);
        if (v > m) { d = d * expf(m - v) + 1.f; m = v; }
        else if (!(v <= NEG_INF)) d += expf(v - m);         // -inf adds nothing; NaN poisons d
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), d2 = __shfl_xor_sync(0xffffffffu, d, o);
        md_merge(m, d, m2, d2);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { sm[warp] = m; sd[warp] = d; }
    __syncthreads();
    m = NEG_INF; d = 0.f;
    for (int w = 0; w < nw; ++w) md_merge(m, d, sm[w], sd[w]);
    const float inv = 1.f / d;
    T* orow = out + row * os;
    for (int i = threadIdx.x; i < N; i += blockDim.x) orow[i] = from_f<T>(expf(to_f(xr[i]) - m) * inv);
}

// endregion
// region: paged_attention
// ---- Paged attention, decode (one query token per sequence) --------------------------------------------------------
// One block per (sequence, head). Warp w takes token groups [4w, 4w+4), [4(w+nw), ...), ...; lane l holds dims l, l + 32, ...
// of q and of its running output. A group's 4 K rows and 4 V rows are all loaded before any is used (more loads in flight),
// then the warp's online-softmax state is updated once per group. The warps are merged at the end through shared memory.
// k/v cache [num_blocks, block_size, n_kv, D]; block_tables int32 [B, max_blocks]; context_lens int32 [B].
#define PA_MAX_PER_LANE 8   // head_dim <= 256
#define PA_GROUP 4          // tokens per warp step
template <typename T>
__device__ void paged_attn_impl(T* out, const T* q, const T* kc, const T* vc, const int* tables, const int* lens,
                                int n_heads, int n_kv, int D, int block_size, int max_blocks, float scale) {
    extern __shared__ float smem[];                            // [nw * D] accumulators, [nw] maxes, [nw] sums
    const int seq = blockIdx.x / n_heads, head = blockIdx.x - seq * n_heads;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int kvh = head / (n_heads / n_kv);
    const int L = lens[seq];
    const int* bt = tables + (long long)seq * max_blocks;
    const T* qp = q + ((long long)seq * n_heads + head) * D;
    float qr[PA_MAX_PER_LANE], acc[PA_MAX_PER_LANE];
#pragma unroll
    for (int j = 0; j < PA_MAX_PER_LANE; ++j) {
        const int dd = lane + 32 * j;
        qr[j] = dd < D ? to_f(qp[dd]) * scale : 0.f;
        acc[j] = 0.f;
    }
    float m = NEG_INF, l = 0.f;
    const long long tok_stride = (long long)n_kv * D;
    for (int t0 = warp * PA_GROUP; t0 < L; t0 += nw * PA_GROUP) {
        float kr[PA_GROUP][PA_MAX_PER_LANE], vr[PA_GROUP][PA_MAX_PER_LANE], s[PA_GROUP];
#pragma unroll
        for (int u = 0; u < PA_GROUP; ++u) {
            const int t = t0 + u < L ? t0 + u : L - 1;            // past the end: reread the last token, masked below
            const long long off = ((long long)bt[t / block_size] * block_size + (t % block_size)) * tok_stride + (long long)kvh * D;
#pragma unroll
            for (int j = 0; j < PA_MAX_PER_LANE; ++j) {
                const int dd = lane + 32 * j;
                kr[u][j] = dd < D ? to_f(kc[off + dd]) : 0.f;
                vr[u][j] = dd < D ? to_f(vc[off + dd]) : 0.f;
            }
        }
#pragma unroll
        for (int u = 0; u < PA_GROUP; ++u) {
            float a = 0.f;
#pragma unroll
            for (int j = 0; j < PA_MAX_PER_LANE; ++j) a += qr[j] * kr[u][j];
            s[u] = warp_sum(a);
        }
        float mn = m;
#pragma unroll
        for (int u = 0; u < PA_GROUP; ++u) if (t0 + u < L) mn = fmaxf(mn, s[u]);
        const float corr = expf(m - mn);                           // m = -inf at the start: 0
        float p[PA_GROUP];
#pragma unroll
        for (int u = 0; u < PA_GROUP; ++u) { p[u] = t0 + u < L ? expf(s[u] - mn) : 0.f; }
        l = l * corr + ((p[0] + p[1]) + (p[2] + p[3]));
#pragma unroll
        for (int j = 0; j < PA_MAX_PER_LANE; ++j) {
            float a = acc[j] * corr;
#pragma unroll
            for (int u = 0; u < PA_GROUP; ++u) a += p[u] * vr[u][j];
            acc[j] = a;
        }
        m = mn;
    }
    float* s_acc = smem;
    float* s_m = smem + nw * D;
    float* s_l = s_m + nw;
    if (lane == 0) { s_m[warp] = m; s_l[warp] = l; }
#pragma unroll
    for (int j = 0; j < PA_MAX_PER_LANE; ++j) { const int dd = lane + 32 * j; if (dd < D) s_acc[warp * D + dd] = acc[j]; }
    __syncthreads();
    float M = NEG_INF;
    for (int w = 0; w < nw; ++w) M = fmaxf(M, s_m[w]);
    float total = 0.f;
    for (int w = 0; w < nw; ++w) total += s_m[w] == NEG_INF ? 0.f : s_l[w] * expf(s_m[w] - M);
    T* op = out + ((long long)seq * n_heads + head) * D;
    for (int dd = threadIdx.x; dd < D; dd += blockDim.x) {
        float o = 0.f;
        for (int w = 0; w < nw; ++w) if (s_m[w] != NEG_INF) o += s_acc[w * D + dd] * expf(s_m[w] - M);
        op[dd] = from_f<T>(total > 0.f ? o / total : 0.f);    // an empty context gives zeros, not NaN
    }
}

// endregion
// region: instances
#define XLLM_KERNELS(S, T) \
extern "C" __global__ void rms_norm_##S(const T* x, T* res, const T* w, T* out, int H, long long xs, long long rs, long long os, float eps) \
    { rms_norm_impl<T>(x, res, w, out, H, xs, rs, os, eps); } \
extern "C" __global__ void rope_##S(T* q, T* k, const long long* pos, const float* c, const float* s, int nq, int nk, int D, \
                                    long long qs, long long ks, long long cs, int max_pos) \
    { rope_impl<T>(q, k, pos, c, s, nq, nk, D, qs, ks, cs, max_pos); } \
extern "C" __global__ void silu_mul_##S(const T* g, const T* u, T* out, int I, long long gs, long long us, long long os) \
    { silu_mul_impl<T>(g, u, out, I, gs, us, os); } \
extern "C" __global__ void softmax_##S(const T* x, T* out, int N, long long xs, long long os) \
    { softmax_impl<T>(x, out, N, xs, os); } \
extern "C" __global__ void paged_attention_##S(T* out, const T* q, const T* kc, const T* vc, const int* tables, const int* lens, \
                                               int n_heads, int n_kv, int D, int block_size, int max_blocks, float scale) \
    { paged_attn_impl<T>(out, q, kc, vc, tables, lens, n_heads, n_kv, D, block_size, max_blocks, scale); }

#if XLLM_PART != 2
XLLM_KERNELS(f32, float)
XLLM_KERNELS(f16, half_t)
XLLM_KERNELS(bf16, bf16_t)
#endif
// endregion
