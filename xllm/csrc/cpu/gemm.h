// ---------------------------------------------------------------- a tiled GEMM for many input rows (prefill, batched decode)
// y[T, N] = x[T, K] @ W^T, blocked for the caches:
// - x is packed once, transposed into panels of 16 input rows: xp[panel][k][16] (zero rows pad the last panel);
// - each thread owns a range of weight rows and walks it in blocks of NC rows; for each chunk of KC columns it dequantizes
//   the block's weights to float32 once (into L2: NC x KC floats), then for each panel (its KC x 16 chunk sits in L1)
//   a 6 x 16 register tile (12 ymm accumulators: per k two loads of x, six broadcasts of w, twelve FMAs) runs over
//   every 6 rows of the block, adding into a per-thread accumulator;
// - the last chunk writes y (transposing the tile) with the bias.
constexpr int64_t GEMM_MIN_ROWS = 6;   // this many input rows or more take gemm_multi (AVX2 builds)
// Per-thread scratch that grows and is kept (OpenMP's threads persist): no allocation per call once warm.
// A grow-only float buffer from Aligned64's storage (base.h): unlike an fvec it neither keeps nor zeroes its contents when it grows
struct Scratch {
    float* p = nullptr; size_t n = 0;
    ~Scratch() { if (p) Aligned64<float>().deallocate(p, n); }
    float* get(size_t floats) {
        if (floats > n) {
            if (p) Aligned64<float>().deallocate(p, n);
            p = nullptr; n = 0;                                    // (empty while allocate may throw)
            const size_t m = (floats + 1023) / 1024 * 1024; p = Aligned64<float>().allocate(m); n = m;
        }
        return p;
    }
};
#if XK_AVX2
constexpr int64_t GEMM_KC = 256, GEMM_NC = 96;
// W[row, k0:k1] as float32 into o; k0 is a multiple of 32. Vector loops run inside one scale group at a time.
static void dequant_range(const Lin& L, int64_t row, int64_t k0, int64_t k1, float* o) {
    const int64_t K = L.K;
    if (L.kind == BF16) {
        const uint16_t* w = L.wb + row * K; int64_t k = k0;
        for (; k + 8 <= k1; k += 8) _mm256_storeu_ps(o + k - k0, load8bf(w + k));
        for (; k < k1; k++) o[k - k0] = bf2f(w[k]);
    } else if (L.kind == Q8_ROW) {
        const int8_t* q = L.w8 + row * K; const __m256 s = _mm256_set1_ps(L.srow[row]); int64_t k = k0;
        for (; k + 8 <= k1; k += 8) _mm256_storeu_ps(o + k - k0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(q + k)))), s));
        for (; k < k1; k++) o[k - k0] = q[k] * L.srow[row];
    } else if (L.kind == Q8_GROUP) {
        const int8_t* q = L.w8 + row * K; const uint16_t* sc = L.sg + row * L.G;
        for (int64_t k = k0; k < k1;) {
            const int64_t g = k / L.gs, e = std::min(k1, (g + 1) * L.gs); const float sf = h2f(sc[g]); const __m256 s = _mm256_set1_ps(sf);
            if ((k - g * L.gs) % 8 == 0)
                for (; k + 8 <= e; k += 8) _mm256_storeu_ps(o + k - k0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(q + k)))), s));
            for (; k < e; k++) o[k - k0] = q[k] * sf;
        }
    } else {   // Q4: byte j holds column 2j (low nibble) and 2j+1 (high); value = code * scale + min (symmetric: min = -8 * scale)
        const uint8_t* q = L.w4 + row * (K / 2); const uint16_t* sc = L.sg + row * L.G; const uint16_t* mn = L.mg ? L.mg + row * L.G : nullptr;
        const __m128i m4 = _mm_set1_epi8(0x0f);
        for (int64_t k = k0; k < k1;) {
            const int64_t g = k / L.gs, e = std::min(k1, (g + 1) * L.gs);
            const float s = h2f(sc[g]), m = mn ? h2f(mn[g]) : -8.0f * s;
            const __m256 vs = _mm256_set1_ps(s), vm = _mm256_set1_ps(m);
            if (k % 2 == 0)
                for (; k + 32 <= e; k += 32) {   // 16 bytes -> 32 codes in column order
                    __m128i b = _mm_loadu_si128((const __m128i*)(q + k / 2));
                    __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
                    __m128i c0 = _mm_unpacklo_epi8(lo, hi), c1 = _mm_unpackhi_epi8(lo, hi);
                    float* d = o + k - k0;
                    _mm256_storeu_ps(d, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c0)), vs, vm));
                    _mm256_storeu_ps(d + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c0, 8))), vs, vm));
                    _mm256_storeu_ps(d + 16, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c1)), vs, vm));
                    _mm256_storeu_ps(d + 24, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c1, 8))), vs, vm));
                }
            for (; k < e; k++) { const uint8_t c = q[k / 2]; o[k - k0] = (k % 2 ? c >> 4 : c & 15) * s + m; }
        }
    }
}

// R weight rows (w[i] + k) times KC columns of one panel (V = 1 or 2 vectors of 8 input rows); acc: tile [R][16], added to unless first
template <int R, int V>
static inline void micro(const float* const* w, const float* xp, int64_t kc, float* acc_tile, bool first) {
    __m256 acc[R][V];
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) for (int v = 0; v < V; v++) acc[i][v] = first ? _mm256_setzero_ps() : _mm256_load_ps(acc_tile + i * 16 + v * 8);
    for (int64_t k = 0; k < kc; k++) {
        __m256 x0 = _mm256_load_ps(xp + k * 16), x1 = V > 1 ? _mm256_load_ps(xp + k * 16 + 8) : x0;
#pragma GCC unroll 6
        for (int i = 0; i < R; i++) {
            __m256 b = _mm256_broadcast_ss(w[i] + k);
            acc[i][0] = _mm256_fmadd_ps(b, x0, acc[i][0]);
            if (V > 1) acc[i][V - 1] = _mm256_fmadd_ps(b, x1, acc[i][V - 1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) for (int v = 0; v < V; v++) _mm256_store_ps(acc_tile + i * 16 + v * 8, acc[i][v]);
}
template <int V>
static inline void micro_r(int R, const float* const* w, const float* xp, int64_t kc, float* t, bool first) {
    switch (R) {
    case 6: micro<6, V>(w, xp, kc, t, first); break; case 5: micro<5, V>(w, xp, kc, t, first); break;
    case 4: micro<4, V>(w, xp, kc, t, first); break; case 3: micro<3, V>(w, xp, kc, t, first); break;
    case 2: micro<2, V>(w, xp, kc, t, first); break; default: micro<1, V>(w, xp, kc, t, first); break;
    }
}

#if XK_ISA >= 3
// The same tile on 512 bits: R weight rows x all 16 input rows of the panel, one vector each, R up to 12. Each output is the
// same chain of FMAs over k as in `micro` (one accumulator lane per output), so the bits are the same; half the FMA
// instructions, and the broadcasts are loads.
template <int R>
static inline void micro512(const float* const* w, const float* xp, int64_t kc, float* acc_tile, bool first) {
    __m512 acc[R];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) acc[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc_tile + i * 16);
    for (int64_t k = 0; k < kc; k++) {
        const __m512 x = _mm512_load_ps(xp + k * 16);
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(w[i][k]), x, acc[i]);
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) _mm512_store_ps(acc_tile + i * 16, acc[i]);
}
static inline void micro512_r(int R, const float* const* w, const float* xp, int64_t kc, float* t, bool first) {
    switch (R) {
    case 12: micro512<12>(w, xp, kc, t, first); break; case 11: micro512<11>(w, xp, kc, t, first); break;
    case 10: micro512<10>(w, xp, kc, t, first); break; case 9: micro512<9>(w, xp, kc, t, first); break;
    case 8: micro512<8>(w, xp, kc, t, first); break; case 7: micro512<7>(w, xp, kc, t, first); break;
    case 6: micro512<6>(w, xp, kc, t, first); break; case 5: micro512<5>(w, xp, kc, t, first); break;
    case 4: micro512<4>(w, xp, kc, t, first); break; case 3: micro512<3>(w, xp, kc, t, first); break;
    case 2: micro512<2>(w, xp, kc, t, first); break; default: micro512<1>(w, xp, kc, t, first); break;
    }
}
#endif

static thread_local Scratch xp_buf, w_buf, c_buf;

// Panels p0..p1 of x [T, K] packed: xp[p][k][j] = x[16p + j][k] (zero rows pad the last panel)
static void pack_panels(const float* x, int64_t T, int64_t K, float* xp, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; p++)
        for (int64_t j = 0; j < 16; j++) {
            const int64_t t = p * 16 + j; float* d = xp + p * K * 16 + j;
            if (t < T) { const float* s = x + t * K; for (int64_t k = 0; k < K; k++) d[k * 16] = s[k]; }
            else for (int64_t k = 0; k < K; k++) d[k * 16] = 0.0f;
        }
}

// One calling thread's share of several linears of the same packed input (q|k|v, gate|up): the blocks of GEMM_NC rows of all
// of them are tasks, which the threads take one at a time from the shared counter `next` (0 at the start): a thread slowed down
// by the machine takes fewer, instead of the others waiting for it. A block never straddles two linears, and each output is
// still one thread's sum in a fixed order, so the bits do not depend on who took which block. ys[l] is [T, N_l].
static void gemm_part(const Lin* Ls, int nl, const float* xp, int64_t T, float* const* ys, std::atomic<int64_t>& next) {
    const int64_t K = Ls[0].K, P = (T + 15) / 16;
    const int64_t ntask = row_tasks(Ls, nl, GEMM_NC);
    {
        float* wbuf = w_buf.get(GEMM_NC * GEMM_KC);
        float* cbuf = c_buf.get(P * GEMM_NC * 16);   // [panel][row in block][16]
        for (int64_t task = next.fetch_add(1); task < ntask; task = next.fetch_add(1)) {
            int l; int64_t nb; task_rows(Ls, GEMM_NC, task, l, nb);
            const Lin& L = Ls[l]; const int64_t N = L.N; float* y = ys[l];
            {
                const int64_t nc = std::min(GEMM_NC, N - nb);
                for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
                    const int64_t kc = std::min(GEMM_KC, K - k0);
                    const float* rows[GEMM_NC];
                    for (int64_t i = 0; i < nc; i++) {
                        if (L.kind == F32) rows[i] = L.wf + (nb + i) * K + k0;
                        else { dequant_range(L, nb + i, k0, k0 + kc, wbuf + i * kc); rows[i] = wbuf + i * kc; }
                    }
                    for (int64_t p = 0; p < P; p++) {
                        const float* xpc = xp + p * K * 16 + k0 * 16;
#if XK_ISA >= 3
                        for (int64_t i = 0; i < nc; i += 12)
                            micro512_r((int)std::min<int64_t>(12, nc - i), rows + i, xpc, kc, cbuf + (p * GEMM_NC + i) * 16, k0 == 0);
#else
                        const bool two = T - p * 16 > 8;
                        for (int64_t i = 0; i < nc; i += 6) {
                            const int R = (int)std::min<int64_t>(6, nc - i);
                            float* t = cbuf + (p * GEMM_NC + i) * 16;
                            if (two) micro_r<2>(R, rows + i, xpc, kc, t, k0 == 0); else micro_r<1>(R, rows + i, xpc, kc, t, k0 == 0);
                        }
#endif
                    }
                }
                for (int64_t p = 0; p < P; p++)
                    for (int64_t j = 0; j < std::min<int64_t>(16, T - p * 16); j++) {
                        float* yr = y + (p * 16 + j) * N + nb; const float* c = cbuf + p * GEMM_NC * 16 + j;
                        for (int64_t i = 0; i < nc; i++) yr[i] = c[i * 16] + (L.bias ? L.bias[nb + i] : 0.0f);
                    }
            }
        }
    }
}

// The whole GEMM: x packed once, then one parallel region
static void gemm_multi(const Lin* Ls, int nl, const float* x, int64_t T, float* const* ys, int nt) {
    const int64_t K = Ls[0].K, P = (T + 15) / 16;
    float* xp = xp_buf.get(P * K * 16);
    pack_panels(x, T, K, xp, 0, P);
    std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(nthreads_ok(nt))
    gemm_part(Ls, nl, xp, T, ys, next);
}
#endif
