#include "common.cuh"

// ==== Decode kernels, second generation: vector loads, GQA groups, split-K, KV append, INT8 weights ====================

// region: vector_loads
// Vector loads: N consecutive elements at p (N * sizeof(T) bytes, 16-byte aligned or the vector's size) as floats,
// in loads of up to 16 bytes each.
template <int BYTES> struct VecStore;
template <> struct VecStore<1>  { typedef unsigned char type; };
template <> struct VecStore<2>  { typedef unsigned short type; };
template <> struct VecStore<4>  { typedef unsigned int type; };
template <> struct VecStore<8>  { typedef uint2 type; };
template <> struct VecStore<16> { typedef uint4 type; };

template <typename T, int N>
__device__ __forceinline__ void load_f(const T* p, float* f) {
    constexpr int B = N * (int)sizeof(T);
    constexpr int C = B >= 16 ? 16 : B;                 // bytes per load
    constexpr int PER = C / (int)sizeof(T);             // elements per load
    typedef typename VecStore<C>::type S;
#pragma unroll
    for (int c = 0; c < N / PER; ++c) {
        union { S s; T t[PER]; } u;
        u.s = *reinterpret_cast<const S*>(p + c * PER);
#pragma unroll
        for (int j = 0; j < PER; ++j) f[c * PER + j] = to_f(u.t[j]);
    }
}

__device__ __forceinline__ float to_f(signed char x) { return (float)x; }   // an int8 code (KV cache, weights)

// 16 int8 codes at p (16-byte aligned) as floats
__device__ __forceinline__ void load_i8x16(const signed char* p, float* f) {
    union { uint4 s; signed char c[16]; } u;
    u.s = *reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int j = 0; j < 16; ++j) f[j] = (float)u.c[j];
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// endregion
// region: paged_attention_v2
// ---- Paged attention v2 (decode) ------------------------------------------------------------------------------------
// One block per (sequence, KV head, split); its warps share the split's tokens (warp w: groups of PA2_UNROLL tokens,
// w * PA2_UNROLL, then nw * PA2_UNROLL later, ...). Each warp serves all G = n_heads / n_kv query heads of the KV head, so a
// K/V row is loaded once for the whole GQA group. Lane l holds dims [l * VEC, l * VEC + VEC) (head_dim = 32 * VEC): one
// vector load per row per lane, and a warp reads a row as one contiguous, coalesced segment.
// num_splits == 1: the block normalizes and writes out [B, n_heads, D].
// num_splits > 1: it writes its unnormalized state (max m, sum l, acc [D]) to part_ml [B, n_heads, S, 2] and
// part_acc [B, n_heads, S, D]; paged_attention_combine merges the splits.
// KT: the cache's element type, T or signed char (an int8 cache: code * the row's scale, ksc / vsc [num_slots, n_kv] float32,
// the layout of xllm.engine.PagedKVPool and kv_append_int8; dequantized in registers, half the bytes read of an fp16 cache).
#define PA2_UNROLL 4     // tokens whose K and V rows are loaded before any is used
// GM: the most query rows this instance serves (1, 2, 4 or 8; for decode the host picks the smallest >= G), so an MHA
// model (G = 1) does not pay registers for 8 heads.
// Prompt chunks (tiles != nullptr, no splits): one block per (tile, KV head). A tile is up to GM / G consecutive tokens of
// one chunk, tiles[4 i ..] = (its first row in q and out, its tokens, its chunk (block-table row), its first token's
// position), and the block's query rows are its (token, head) pairs: row r = token r / G, head r % G. Token j sees the keys
// at positions 0 .. pos0 + j (causal), so each K/V row is loaded once for every token and head of the tile, and a row
// masks the keys past its own position. Decode is the one-token tile (sequence, 1, sequence, lens[sequence] - 1).
template <typename T, typename KT, int VEC, int GM>
__device__ void paged_attn_v2_impl(T* out, float* part_ml, float* part_acc, const T* q, const KT* kc, const KT* vc,
                                   const float* ksc, const float* vsc, const int* tiles,
                                   const int* tables, const int* lens, int n_heads, int n_kv, int block_size, int max_blocks,
                                   float scale, int num_splits, int split_size) {
    constexpr int D = 32 * VEC;
    extern __shared__ float smem[];                                // [nw][R][D] acc, then [nw][R] m, then [nw][R] l
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int split = blockIdx.x % num_splits;
    const int sk = blockIdx.x / num_splits;
    const int unit = sk / n_kv, kvh = sk - unit * n_kv;            // a sequence (decode) or a tile (prompt chunks)
    const int G = n_heads / n_kv;
    int row0 = unit, ntok = 1, seq = unit, pos0;
    if (tiles) { row0 = tiles[4 * unit]; ntok = tiles[4 * unit + 1]; seq = tiles[4 * unit + 2]; pos0 = tiles[4 * unit + 3]; }
    else pos0 = lens[unit] - 1;
    const int R = ntok * G;                                        // query rows of this block (<= GM)
    const int L = pos0 + ntok;                                     // keys 0 .. L - 1: the last token's context
    const int t_begin = split * split_size;
    const int t_end = min(L, t_begin + split_size);
    const int* bt = tables + (long long)seq * max_blocks;
    float qr[GM][VEC], acc[GM][VEC], m[GM], l[GM];
    int lim[GM];                                                   // row r sees the keys t < lim[r]
#pragma unroll
    for (int r = 0; r < GM; ++r) {
        const int j = r / G, g = r - j * G;
        if (r < R) load_f<T, VEC>(q + ((long long)(row0 + j) * n_heads + (long long)kvh * G + g) * D + lane * VEC, qr[r]);
#pragma unroll
        for (int i = 0; i < VEC; ++i) { qr[r][i] = r < R ? qr[r][i] * scale : 0.f; acc[r][i] = 0.f; }
        m[r] = NEG_INF; l[r] = 0.f; lim[r] = min(t_end, pos0 + j + 1);
    }
    const long long tok_stride = (long long)n_kv * D;
    for (int t0 = t_begin + warp * PA2_UNROLL; t0 < t_end; t0 += nw * PA2_UNROLL) {
        float kr[PA2_UNROLL][VEC], vr[PA2_UNROLL][VEC];
#pragma unroll
        for (int u = 0; u < PA2_UNROLL; ++u) {
            const int t = t0 + u < t_end ? t0 + u : t_end - 1;            // past the end: reread the last token, masked below
            const long long slot = (long long)bt[t / block_size] * block_size + (t % block_size);
            const long long off = slot * tok_stride + (long long)kvh * D + lane * VEC;
            load_f<KT, VEC>(kc + off, kr[u]);
            load_f<KT, VEC>(vc + off, vr[u]);
            if (sizeof(KT) == 1) {                                         // int8 codes: times the row's scale (compiled out for T)
                const float ks = ksc[slot * n_kv + kvh], vs = vsc[slot * n_kv + kvh];
#pragma unroll
                for (int j = 0; j < VEC; ++j) { kr[u][j] *= ks; vr[u][j] *= vs; }
            }
        }
#pragma unroll
        for (int r = 0; r < GM; ++r) {
            if (r >= R) break;                                         // the same for the whole warp: no divergence
            float s[PA2_UNROLL], p[PA2_UNROLL];
#pragma unroll
            for (int u = 0; u < PA2_UNROLL; ++u) {
                float a = 0.f;
#pragma unroll
                for (int j = 0; j < VEC; ++j) a += qr[r][j] * kr[u][j];
                s[u] = warp_sum(a);
            }
            float mn = m[r];
#pragma unroll
            for (int u = 0; u < PA2_UNROLL; ++u) if (t0 + u < lim[r]) mn = fmaxf(mn, s[u]);
            const float corr = mn == NEG_INF ? 1.f : expf(m[r] - mn);  // m = -inf at the start: 0; a row that has seen no key yet: 1
            float psum = 0.f;
#pragma unroll
            for (int u = 0; u < PA2_UNROLL; ++u) { p[u] = t0 + u < lim[r] ? expf(s[u] - mn) : 0.f; psum += p[u]; }
            l[r] = l[r] * corr + psum;
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                float a = acc[r][j] * corr;
#pragma unroll
                for (int u = 0; u < PA2_UNROLL; ++u) a += p[u] * vr[u][j];
                acc[r][j] = a;
            }
            m[r] = mn;
        }
    }
    // merge the warps of the block
    float* s_acc = smem;
    float* s_m = smem + nw * R * D;
    float* s_l = s_m + nw * R;
#pragma unroll
    for (int r = 0; r < GM; ++r) {
        if (r >= R) break;
#pragma unroll
        for (int j = 0; j < VEC; ++j) s_acc[(warp * R + r) * D + lane * VEC + j] = acc[r][j];
        if (lane == 0) { s_m[warp * R + r] = m[r]; s_l[warp * R + r] = l[r]; }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < R * D; idx += blockDim.x) {
        const int r = idx / D, d = idx - r * D;
        float M = NEG_INF;
        for (int w = 0; w < nw; ++w) M = fmaxf(M, s_m[w * R + r]);
        float total = 0.f, o = 0.f;
        for (int w = 0; w < nw; ++w) {
            const float mw = s_m[w * R + r];
            if (mw == NEG_INF) continue;                               // a warp that saw no token
            const float f = expf(mw - M);
            total += s_l[w * R + r] * f;
            o += s_acc[(w * R + r) * D + d] * f;
        }
        const int j = r / G;
        const long long h = (long long)(row0 + j) * n_heads + (long long)kvh * G + (r - j * G);   // decode: seq * n_heads + head
        if (num_splits == 1) out[h * D + d] = from_f<T>(total > 0.f ? o / total : 0.f);   // an empty context gives zeros
        else {
            const long long ps = h * num_splits + split;
            part_acc[ps * D + d] = o;
            if (d == 0) { part_ml[2 * ps] = M; part_ml[2 * ps + 1] = total; }
        }
    }
}

// One block per (sequence, head): merge the num_splits states of paged_attn_v2_impl into the output row.
template <typename T>
__device__ void paged_attn_combine_impl(T* out, const float* part_ml, const float* part_acc, int D, int num_splits) {
    const long long h = blockIdx.x;
    const float* ml = part_ml + h * num_splits * 2;
    float M = NEG_INF;
    for (int s = 0; s < num_splits; ++s) M = fmaxf(M, ml[2 * s]);
    float total = 0.f;
    for (int s = 0; s < num_splits; ++s) if (ml[2 * s] != NEG_INF) total += ml[2 * s + 1] * expf(ml[2 * s] - M);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float o = 0.f;
        for (int s = 0; s < num_splits; ++s)
            if (ml[2 * s] != NEG_INF) o += part_acc[(h * num_splits + s) * D + d] * expf(ml[2 * s] - M);
        out[h * D + d] = from_f<T>(total > 0.f ? o / total : 0.f);
    }
}

// endregion
// region: softmax_split
// ---- Softmax over long rows, split over several blocks per row -------------------------------------------------------
// Pass 1 (grid rows * S): block s of a row reduces its chunk [s * chunk, (s + 1) * chunk) to an online state (m, d) in ws.
// Pass 2 (grid rows * S): every block merges the row's S states in the same order (so all get the same (M, D)) and writes
// its chunk of exp(x - M) / D. Two reads of x, one write, and all SMs busy even for a few rows.
__device__ void block_md(float& m, float& d) {                 // merge (m, d) over the block; every thread gets the result
    __shared__ float sm[32], sd[32];
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), d2 = __shfl_xor_sync(0xffffffffu, d, o);
        md_merge(m, d, m2, d2);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) { sm[warp] = m; sd[warp] = d; }
    __syncthreads();
    m = NEG_INF; d = 0.f;
    for (int w = 0; w < nw; ++w) md_merge(m, d, sm[w], sd[w]);
}

template <typename T>
__device__ void softmax_part_impl(const T* x, float* ws, int N, long long xs, int S, int chunk) {
    const long long row = blockIdx.x / S;
    const int s = blockIdx.x - (int)(row * S);
    const T* xr = x + row * xs;
    const int end = min(N, (s + 1) * chunk);
    float m = NEG_INF, d = 0.f;
    for (int i = s * chunk + threadIdx.x; i < end; i += blockDim.x) {
        const float v = to_f(xr[i]);
        if (v > m) { d = d * expf(m - v) + 1.f; m = v; }
        else if (!(v <= NEG_INF)) d += expf(v - m);             // -inf adds nothing; NaN poisons d
    }
    block_md(m, d);
    if (threadIdx.x == 0) { ws[2 * (row * S + s)] = m; ws[2 * (row * S + s) + 1] = d; }
}

template <typename T>
__device__ void softmax_fin_impl(const T* x, T* out, const float* ws, int N, long long xs, long long os, int S, int chunk) {
    const long long row = blockIdx.x / S;
    const int s = blockIdx.x - (int)(row * S);
    float m = NEG_INF, d = 0.f;
    for (int w = 0; w < S; ++w) md_merge(m, d, ws[2 * (row * S + w)], ws[2 * (row * S + w) + 1]);
    const float inv = 1.f / d;
    const T* xr = x + row * xs;
    T* orow = out + row * os;
    const int end = min(N, (s + 1) * chunk);
    for (int i = s * chunk + threadIdx.x; i < end; i += blockDim.x) orow[i] = from_f<T>(expf(to_f(xr[i]) - m) * inv);
}

// endregion
// region: kv_append
// ---- KV-cache append: new K/V rows into the paged pool through the slot mapping ---------------------------------------
// Pool layout (xllm.engine.PagedKVPool): k_flat [num_slots, n_kv, D], slot = block * block_size + offset.
// k, v: [N, n_kv, D] with row strides ks, vs (heads contiguous). A slot < 0 or >= num_slots is skipped (padding rows).
template <typename T>
__device__ void kv_append_impl(const T* k, const T* v, T* kc, T* vc, const long long* slots, int n_kv, int D,
                               long long ks, long long vs, long long num_slots) {
    const long long t = blockIdx.x;
    const long long slot = slots[t];
    if (slot < 0 || slot >= num_slots) return;
    const int n = n_kv * D;
    T* kd = kc + slot * n;
    T* vd = vc + slot * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) { kd[i] = k[t * ks + i]; vd[i] = v[t * vs + i]; }
}

// int8 pool: per (token, head) scale = absmax / 127, code = round-half-even(x / scale) clamped to [-127, 127]
// (scale 0: divide by 1), exactly xllm.engine.quantize_kv in float32. One warp per (token, head).
template <typename T>
__device__ __forceinline__ void quant_row(const T* x, signed char* dst, float* sc, int D, int lane) {
    float amax = 0.f;
    for (int d = lane; d < D; d += 32) amax = fmaxf(amax, fabsf(to_f(x[d])));
    amax = warp_max(amax);
    const float scale = amax / 127.f;
    const float div = scale > 0.f ? scale : 1.f;
    for (int d = lane; d < D; d += 32) {
        const float c = fminf(fmaxf(rintf(to_f(x[d]) / div), -127.f), 127.f);
        dst[d] = (signed char)(int)c;
    }
    if (lane == 0) *sc = scale;
}

template <typename T>
__device__ void kv_append_int8_impl(const T* k, const T* v, signed char* kc, signed char* vc, float* ksc, float* vsc,
                                    const long long* slots, int n_kv, int D, long long ks, long long vs, long long num_slots) {
    const long long t = blockIdx.x;
    const long long slot = slots[t];
    if (slot < 0 || slot >= num_slots) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int h = warp; h < n_kv; h += nw) {
        const long long dst = (slot * n_kv + h) * D;
        quant_row<T>(k + t * ks + (long long)h * D, kc + dst, ksc + slot * n_kv + h, D, lane);
        quant_row<T>(v + t * vs + (long long)h * D, vc + dst, vsc + slot * n_kv + h, D, lane);
    }
}

// endregion
// region: int8_gemv
// ---- INT8 weight-only GEMV / small GEMM: y [M, O] = x [M, I] @ (q [O, I] * scale)^T + bias ---------------------------------
// Weights as xllm.quant.Int8Linear stores them: int8 codes [O, I] row-major, scales [O, G] of type SC (float32, or the
// module's own float16 ones for groups; G = 1: per output row, else groups of gsize = I / G columns), float32 bias [O] or none. One warp per output row o; a block holds I8_WARPS rows
// and I8_MT rows of x. Lane l reads 16 codes (one 16-byte load) at columns l * 16 + 512 k, and the 16 matching x values of
// each of its I8_MT rows; fp32 accumulation, the scale applied per 16-column chunk (gsize is a multiple of 16), then a warp sum.
#define I8_WARPS 4
#define I8_MT 4
template <typename T, typename SC>
__device__ void int8_gemv_impl(T* y, const T* x, const signed char* w, const SC* sc, const float* bias,
                               int M, int O, int I, int G, int gsize, long long xs, long long ys) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int o = blockIdx.x * I8_WARPS + warp;
    if (o >= O) return;                                        // the whole warp: no shuffle is left half-done
    const int m0 = blockIdx.y * I8_MT;
    const signed char* wr = w + (long long)o * I;
    const SC* sr = sc + (long long)o * G;
    float acc[I8_MT];
#pragma unroll
    for (int r = 0; r < I8_MT; ++r) acc[r] = 0.f;
    for (int i = lane * 16; i < I; i += 32 * 16) {
        float wf[16];
        load_i8x16(wr + i, wf);
        const float s = to_f(sr[i / gsize]);
#pragma unroll
        for (int r = 0; r < I8_MT; ++r) {
            if (m0 + r < M) {
                float xf[16];
                load_f<T, 16>(x + (long long)(m0 + r) * xs + i, xf);
                float a = 0.f;
#pragma unroll
                for (int j = 0; j < 16; ++j) a += xf[j] * wf[j];
                acc[r] += a * s;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < I8_MT; ++r) {
        const float a = warp_sum(acc[r]);
        if (lane == 0 && m0 + r < M) y[(long long)(m0 + r) * ys + o] = from_f<T>(a + (bias ? bias[o] : 0.f));
    }
}

// endregion
// region: int4_gemv
// N floats stored as T at p (N * sizeof(T) bytes, 16-byte aligned or the vector's size), in stores of up to 16 bytes each.
template <typename T, int N>
__device__ __forceinline__ void store_f(T* p, const float* f) {
    constexpr int B = N * (int)sizeof(T);
    constexpr int C = B >= 16 ? 16 : B;
    constexpr int PER = C / (int)sizeof(T);
    typedef typename VecStore<C>::type S;
#pragma unroll
    for (int c = 0; c < N / PER; ++c) {
        union { S s; T t[PER]; } u;
#pragma unroll
        for (int j = 0; j < PER; ++j) u.t[j] = from_f<T>(f[c * PER + j]);
        *reinterpret_cast<S*>(p + c * PER) = u.s;
    }
}

// 32 int4 codes packed in 16 bytes at p (16-byte aligned; xllm.quant.pack_nibbles: column 2j in byte j's low nibble,
// column 2j + 1 in its high nibble) as floats 0..15
__device__ __forceinline__ void load_u4x32(const unsigned char* p, float* f) {
    union { uint4 s; unsigned char c[16]; } u;
    u.s = *reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int j = 0; j < 16; ++j) { f[2 * j] = (float)(u.c[j] & 15u); f[2 * j + 1] = (float)(u.c[j] >> 4); }
}

// ---- INT4 weight-only GEMV / small GEMM: y [M, O] = x [M, I] @ (q * scale + min)^T + bias -----------------------------
// Weights as xllm.quant.Int4Linear stores them (GGUF Q4_1 / Q4_0): packed codes [O, I / 2], float16 scales and mins [O, G],
// w = q * scale + min, or (q - 8) * scale when there are no mins.
// int8_gemv's schedule with 32 codes per lane step (one 16-byte load): lane l reads columns l * 32 + 1024 k; the group
// size is a multiple of 32, so one scale and min per load, and the 32 weights are formed once for all I8_MT rows of x.
template <typename T>
__device__ void int4_gemv_impl(T* y, const T* x, const unsigned char* w, const half_t* sc, const half_t* mn, const float* bias,
                               int M, int O, int I, int G, int gsize, long long xs, long long ys) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int o = blockIdx.x * I8_WARPS + warp;
    if (o >= O) return;                                        // the whole warp: no shuffle is left half-done
    const int m0 = blockIdx.y * I8_MT;
    const unsigned char* wr = w + (long long)o * (I / 2);
    const half_t* sr = sc + (long long)o * G;
    const half_t* mr = mn ? mn + (long long)o * G : nullptr;
    float acc[I8_MT];
#pragma unroll
    for (int r = 0; r < I8_MT; ++r) acc[r] = 0.f;
    for (int i = lane * 32; i < I; i += 32 * 32) {
        float wf[32];
        load_u4x32(wr + i / 2, wf);
        const float s = to_f(sr[i / gsize]), m = mr ? to_f(mr[i / gsize]) : -8.f * s;
#pragma unroll
        for (int j = 0; j < 32; ++j) wf[j] = fmaf(wf[j], s, m);
#pragma unroll
        for (int r = 0; r < I8_MT; ++r) {
            if (m0 + r < M) {
                float xf[32];
                load_f<T, 32>(x + (long long)(m0 + r) * xs + i, xf);
                float a = 0.f;
#pragma unroll
                for (int j = 0; j < 32; ++j) a = fmaf(xf[j], wf[j], a);
                acc[r] += a;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < I8_MT; ++r) {
        const float a = warp_sum(acc[r]);
        if (lane == 0 && m0 + r < M) y[(long long)(m0 + r) * ys + o] = from_f<T>(a + (bias ? bias[o] : 0.f));
    }
}

// endregion
// region: dequant
// ---- Dequantize a whole weight to T [O, I], for many rows of x: then one cuBLAS GEMM reads it -------------------------
// Thread t (grid-stride): one 16-byte load of codes, 16 int8 or 32 int4 ones of one row, stored as T with vector stores:
// 1 (or 0.5) byte read and sizeof(T) written per weight, in one pass (torch ops take several passes and temporaries).
template <typename T, typename SC>
__device__ void dequant_int8_impl(T* out, const signed char* w, const SC* sc, int O, int I, int G, int gsize) {
    const long long per_row = I / 16, n = (long long)O * per_row;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (long long)gridDim.x * blockDim.x) {
        const int o = (int)(t / per_row), i = (int)(t % per_row) * 16;
        float f[16];
        load_i8x16(w + (long long)o * I + i, f);
        const float s = to_f(sc[(long long)o * G + i / gsize]);
#pragma unroll
        for (int j = 0; j < 16; ++j) f[j] *= s;
        store_f<T, 16>(out + (long long)o * I + i, f);
    }
}

template <typename T>
__device__ void dequant_int4_impl(T* out, const unsigned char* w, const half_t* sc, const half_t* mn, int O, int I, int G, int gsize) {
    const long long per_row = I / 32, n = (long long)O * per_row;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (long long)gridDim.x * blockDim.x) {
        const int o = (int)(t / per_row), i = (int)(t % per_row) * 32;
        float f[32];
        load_u4x32(w + (long long)o * (I / 2) + i / 2, f);
        const long long g = (long long)o * G + i / gsize;
        const float s = to_f(sc[g]), m = mn ? to_f(mn[g]) : -8.f * s;
#pragma unroll
        for (int j = 0; j < 32; ++j) f[j] = fmaf(f[j], s, m);
        store_f<T, 32>(out + (long long)o * I + i, f);
    }
}

// endregion
// region: instances
#define XLLM_PA2G(S, T, V, GM) \
extern "C" __global__ void paged_attention_v2_##S##_d##V##_g##GM(T* out, float* part_ml, float* part_acc, const T* q, const T* kc, const T* vc, \
        const int* tiles, const int* tables, const int* lens, int n_heads, int n_kv, int block_size, int max_blocks, float scale, int num_splits, \
        int split_size) \
    { paged_attn_v2_impl<T, T, V / 32, GM>(out, part_ml, part_acc, q, kc, vc, nullptr, nullptr, tiles, tables, lens, n_heads, n_kv, block_size, \
                                           max_blocks, scale, num_splits, split_size); } \
extern "C" __global__ void paged_attention_v2_i8_##S##_d##V##_g##GM(T* out, float* part_ml, float* part_acc, const T* q, const signed char* kc, \
        const signed char* vc, const float* ksc, const float* vsc, const int* tiles, const int* tables, const int* lens, int n_heads, int n_kv, \
        int block_size, int max_blocks, float scale, int num_splits, int split_size) \
    { paged_attn_v2_impl<T, signed char, V / 32, GM>(out, part_ml, part_acc, q, kc, vc, ksc, vsc, tiles, tables, lens, n_heads, n_kv, block_size, \
                                                     max_blocks, scale, num_splits, split_size); }
#define XLLM_PA2(S, T, V) XLLM_PA2G(S, T, V, 1) XLLM_PA2G(S, T, V, 2) XLLM_PA2G(S, T, V, 4) XLLM_PA2G(S, T, V, 8)

#define XLLM_PA2_ALL(S, T) XLLM_PA2(S, T, 32) XLLM_PA2(S, T, 64) XLLM_PA2(S, T, 128) XLLM_PA2(S, T, 256)
#define XLLM_PA2G_X(S, T, V, GM) XLLM_PA2G(S, T, V, GM)     /* expands XLLM_PA2_D / XLLM_PA2_GM before pasting */

#define XLLM_KERNELS2(S, T) \
extern "C" __global__ void paged_attention_combine_##S(T* out, const float* part_ml, const float* part_acc, int D, int num_splits) \
    { paged_attn_combine_impl<T>(out, part_ml, part_acc, D, num_splits); } \
extern "C" __global__ void softmax_part_##S(const T* x, float* ws, int N, long long xs, int S_, int chunk) \
    { softmax_part_impl<T>(x, ws, N, xs, S_, chunk); } \
extern "C" __global__ void softmax_fin_##S(const T* x, T* out, const float* ws, int N, long long xs, long long os, int S_, int chunk) \
    { softmax_fin_impl<T>(x, out, ws, N, xs, os, S_, chunk); } \
extern "C" __global__ void kv_append_##S(const T* k, const T* v, T* kc, T* vc, const long long* slots, int n_kv, int D, \
                                         long long ks, long long vs, long long num_slots) \
    { kv_append_impl<T>(k, v, kc, vc, slots, n_kv, D, ks, vs, num_slots); } \
extern "C" __global__ void kv_append_int8_##S(const T* k, const T* v, signed char* kc, signed char* vc, float* ksc, float* vsc, \
                                              const long long* slots, int n_kv, int D, long long ks, long long vs, long long num_slots) \
    { kv_append_int8_impl<T>(k, v, kc, vc, ksc, vsc, slots, n_kv, D, ks, vs, num_slots); } \
extern "C" __global__ void int8_gemv_##S(T* y, const T* x, const signed char* w, const float* sc, const float* bias, \
                                         int M, int O, int I, int G, int gsize, long long xs, long long ys) \
    { int8_gemv_impl<T, float>(y, x, w, sc, bias, M, O, I, G, gsize, xs, ys); } \
extern "C" __global__ void int8_gemv_h_##S(T* y, const T* x, const signed char* w, const half_t* sc, const float* bias, \
                                           int M, int O, int I, int G, int gsize, long long xs, long long ys) \
    { int8_gemv_impl<T, half_t>(y, x, w, sc, bias, M, O, I, G, gsize, xs, ys); } \
extern "C" __global__ void int4_gemv_##S(T* y, const T* x, const unsigned char* w, const half_t* sc, const half_t* mn, const float* bias, \
                                         int M, int O, int I, int G, int gsize, long long xs, long long ys) \
    { int4_gemv_impl<T>(y, x, w, sc, mn, bias, M, O, I, G, gsize, xs, ys); } \
extern "C" __global__ void dequant_int8_##S(T* out, const signed char* w, const float* sc, int O, int I, int G, int gsize) \
    { dequant_int8_impl<T, float>(out, w, sc, O, I, G, gsize); } \
extern "C" __global__ void dequant_int8_h_##S(T* out, const signed char* w, const half_t* sc, int O, int I, int G, int gsize) \
    { dequant_int8_impl<T, half_t>(out, w, sc, O, I, G, gsize); } \
extern "C" __global__ void dequant_int4_##S(T* out, const unsigned char* w, const half_t* sc, const half_t* mn, int O, int I, int G, int gsize) \
    { dequant_int4_impl<T>(out, w, sc, mn, O, I, G, gsize); }

#if XLLM_PART != 2
XLLM_KERNELS2(f32, float)
XLLM_KERNELS2(f16, half_t)
XLLM_KERNELS2(bf16, bf16_t)
#endif
#if XLLM_PART == 0
XLLM_PA2_ALL(f32, float) XLLM_PA2_ALL(f16, half_t) XLLM_PA2_ALL(bf16, bf16_t)
#elif XLLM_PART == 2
XLLM_PA2G_X(f32, float, XLLM_PA2_D, XLLM_PA2_GM) XLLM_PA2G_X(f16, half_t, XLLM_PA2_D, XLLM_PA2_GM) XLLM_PA2G_X(bf16, bf16_t, XLLM_PA2_D, XLLM_PA2_GM)
#endif
// endregion
