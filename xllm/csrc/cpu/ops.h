// ---------------------------------------------------------------- small fused operators
static inline void rmsnorm(const float* x, const float* w, float eps, int64_t n, float* out) {
    double ss = 0; for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = 1.0f / std::sqrt((float)(ss / n) + eps);
    for (int64_t i = 0; i < n; i++) out[i] = w[i] * (x[i] * r);
}
// HF rotate-half order, in place. Each product and sum rounded on its own (no fused multiply-add), as torch's
// `x * cos + rotate_half(x) * sin` does: the result is the same to the bit.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static void rope_head(float* x, const float* cs, const float* sn, int64_t d) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    int64_t h = d / 2;
    for (int64_t i = 0; i < h; i++) {
        float a = x[i], b = x[i + h];
        x[i] = a * cs[i] - b * sn[i];
        x[i + h] = b * cs[i + h] + a * sn[i + h];
    }
}
static inline float silu(float g) { return g / (1.0f + std::exp(-g)); }

#if XK_AVX2
// exp of 8 floats: n = round(x / ln 2), r = x - n ln 2 (in two parts), exp(r) = 1 + r + r^2 P(r) with the degree-5 minimax P
// of the Cephes library's expf (|r| <= ln 2 / 2, relative error ~2e-7), times 2^n built in the exponent bits. x is clamped to
// [-87, 88], so it never overflows; softmax only feeds it values <= 0, and exp(-87) ~ 2e-38 is as good as 0 next to exp(0) = 1.
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);          // ln 2 = 0.693359375 - 2.12194440e-4 (the first part exact)
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif
// the largest of s[0..n) (eight lanes at a time with AVX2: no chain of dependent scalar compares)
static inline float max_of(const float* s, int64_t n) {
    float mx = -INFINITY; int64_t t = 0;
#if XK_AVX2
    __m256 v = _mm256_set1_ps(-INFINITY);
    for (; t + 8 <= n; t += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(s + t));
    alignas(32) float m8[8]; _mm256_store_ps(m8, v);
    for (int j = 0; j < 8; j++) mx = m8[j] > mx ? m8[j] : mx;
#endif
    for (; t < n; t++) mx = s[t] > mx ? s[t] : mx;
    return mx;
}
// scores[t] = exp(scores[t] - mx) for t < len; returns their sum (the softmax denominator). Eight at a time with AVX2.
static inline float exp_shift_sum(float* scores, int64_t len, float mx) {
    float den = 0; int64_t t = 0;
#if XK_AVX2
    const __m256 vm = _mm256_set1_ps(mx); __m256 acc = _mm256_setzero_ps();
    for (; t + 8 <= len; t += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + t), vm));
        _mm256_storeu_ps(scores + t, e); acc = _mm256_add_ps(acc, e);
    }
    den = hsum(acc);
#endif
    for (; t < len; t++) { const float e = std::exp(scores[t] - mx); scores[t] = e; den += e; }
    return den;
}
// out[i] = silu(g[i]) * u[i] = g u / (1 + exp(-g)); eight at a time with AVX2 (out may be g or u)
static inline void silu_mul(const float* g, const float* u, float* out, int64_t n) {
    int64_t i = 0;
#if XK_AVX2
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 vg = _mm256_loadu_ps(g + i);
        const __m256 den = _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, vg)));
        _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_mul_ps(vg, _mm256_loadu_ps(u + i)), den));
    }
#endif
    for (; i < n; i++) out[i] = silu(g[i]) * u[i];
}

// K/V stored as IEEE halves (kv_cache_dtype float16): a type of its own, so that the loads below (load8w, w2f, as the
// bfloat16 weights' in linear.h) make each value float32 exactly as it is read. float32 K/V take the same loops with the
// identity load, so a half pool and a float32 pool holding the same (rounded) values give the same bits.
struct kvh { uint16_t v; };
static inline float w2f(kvh h) { return h2f(h.v); }
#if XK_AVX2
static inline __m256 load8w(const kvh* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
#endif
// a row of n floats stored as K/V: copied, or rounded to halves (to nearest even, as torch's .to(float16))
static inline void store_kv(float* dst, const float* x, int64_t n) { std::memcpy(dst, x, n * sizeof(float)); }
static inline void store_kv(kvh* dst, const float* x, int64_t n) {
    int64_t i = 0;
#if XK_AVX2
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i*)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) dst[i].v = f2h(x[i]);
}

// attention of one query head over `len` cached positions. Key t is row (slots ? slots[t] : t) of kc (values: of vc), rows
// `stride` floats apart: a contiguous cache (slots null) or a paged pool read through the sequence's slots. scores: scratch of len.
#if XK_AVX2
// q . k[j] for 8 keys (d % 8 == 0) as one vector: one accumulator per key (eight independent chains share each load of q),
// then a transposing reduction (hadd tree, then the two 128-bit halves added).
template <typename KV> static inline __m256 dot8(const float* q, const KV* const* k, int64_t d) {
    __m256 a[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) a[j] = _mm256_fmadd_ps(load8w(k[j] + i), qv, a[j]);
    }
    const __m256 s03 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 s47 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(s03, s47, 0x20), _mm256_permute2f128_ps(s03, s47, 0x31));
}
// out[i0, i0 + 8 NV) (+)= sum_t p[t] v_t[i0, i0 + 8 NV), the NV output vectors held in registers over all keys
template <int NV, typename KV>
static inline void pv_strip(const float* p, const KV* vc, const int64_t* slots, int64_t len, int64_t stride, int64_t i0, float* out, bool add = false) {
    __m256 acc[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) acc[v] = add ? _mm256_loadu_ps(out + i0 + 8 * v) : _mm256_setzero_ps();
    for (int64_t t = 0; t < len; t++) {
        const KV* row = vc + (slots ? slots[t] : t) * stride + i0; const __m256 pp = _mm256_set1_ps(p[t]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[v] = _mm256_fmadd_ps(pp, load8w(row + 8 * v), acc[v]);
    }
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) _mm256_storeu_ps(out + i0 + 8 * v, acc[v]);
}

// out[0, d) (+)= sum_t p[t] v_t over `len` value rows (d % 8 == 0), in strips of up to 64 outputs
template <typename KV> static inline void pv_rows(const float* p, const KV* vc, const int64_t* slots, int64_t len, int64_t stride, int64_t d, float* out, bool add) {
    int64_t i0 = 0;
    for (; i0 + 64 <= d; i0 += 64) pv_strip<8>(p, vc, slots, len, stride, i0, out, add);
    switch ((d - i0) / 8) {
    case 7: pv_strip<7>(p, vc, slots, len, stride, i0, out, add); break; case 6: pv_strip<6>(p, vc, slots, len, stride, i0, out, add); break;
    case 5: pv_strip<5>(p, vc, slots, len, stride, i0, out, add); break; case 4: pv_strip<4>(p, vc, slots, len, stride, i0, out, add); break;
    case 3: pv_strip<3>(p, vc, slots, len, stride, i0, out, add); break; case 2: pv_strip<2>(p, vc, slots, len, stride, i0, out, add); break;
    case 1: pv_strip<1>(p, vc, slots, len, stride, i0, out, add); break; default: break;
    }
}
#endif

template <typename KV> static void attend_head(const float* q, const KV* kc, const KV* vc, const int64_t* slots, int64_t len, int64_t stride, int64_t d,
                                             float scale, float* scores, float* out);

// Attention of nq query vectors that share one list of keys (a range of the query heads of a few consecutive rows of one
// sequence; nq <= 256): query i sees keys 0..qlen[i]-1 of its KV head, the values hoff[i] into each K/V row (hoff
// null: 0, one head). Two passes over the keys, KB of them at a time, each block meeting every query while it sits in L1 (one
// query at a time would stream all its keys from L2/L3 again for every row of a long prompt): the scores, then, after each
// query's softmax, the weighted values. The same sums in the same order as attend_head, so the same bits. scores: scratch
// [nq][ld], ld >= every qlen.
template <typename KV>
static void attend_block(const float* const* qs, const int64_t* qlen, int nq, const KV* kc, const KV* vc, const int64_t* slots,
                         int64_t stride, int64_t d, float scale, float* scores, int64_t ld, float* const* outs, const int64_t* hoff = nullptr) {
#if XK_AVX2
    if (d % 8 == 0) {
        constexpr int64_t KB = 32;
        int64_t lmax = 0; for (int i = 0; i < nq; i++) lmax = std::max(lmax, qlen[i]);
        const __m256 vs = _mm256_set1_ps(scale);
        for (int64_t t0 = 0; t0 < lmax; t0 += KB)
            for (int i = 0; i < nq; i++) {
                const int64_t e = std::min(t0 + KB, qlen[i]); float* s = scores + i * ld; int64_t t = t0;
                const KV* kh = kc + (hoff ? hoff[i] : 0);
                for (; t + 8 <= e; t += 8) {
                    const KV* k[8];
                    for (int j = 0; j < 8; j++) k[j] = kh + (slots ? slots[t + j] : t + j) * stride;
                    _mm256_storeu_ps(s + t, _mm256_mul_ps(dot8(qs[i], k, d), vs));
                }
                for (; t < e; t++) s[t] = dot_w(kh + (slots ? slots[t] : t) * stride, qs[i], d) * scale;
            }
        float inv[256];
        for (int i = 0; i < nq; i++) inv[i] = 1.0f / exp_shift_sum(scores + i * ld, qlen[i], max_of(scores + i * ld, qlen[i]));
        for (int64_t t0 = 0; t0 < lmax; t0 += KB)
            for (int i = 0; i < nq; i++) {
                const int64_t e = std::min(t0 + KB, qlen[i]);
                const KV* vh = vc + (hoff ? hoff[i] : 0);
                if (e > t0) pv_rows(scores + i * ld + t0, slots ? vh : vh + t0 * stride, slots ? slots + t0 : nullptr, e - t0, stride, d, outs[i], t0 > 0);
            }
        for (int i = 0; i < nq; i++) for (int64_t c = 0; c < d; c++) outs[i][c] *= inv[i];
        return;
    }
#endif
    for (int i = 0; i < nq; i++) { const int64_t o = hoff ? hoff[i] : 0; attend_head(qs[i], kc + o, vc + o, slots, qlen[i], stride, d, scale, scores, outs[i]); }
}

template <typename KV> static void attend_head(const float* q, const KV* kc, const KV* vc, const int64_t* slots, int64_t len, int64_t stride, int64_t d,
                                             float scale, float* scores, float* out) {
    float mx = -INFINITY; int64_t t = 0;
#if XK_AVX2
    const bool vec = d % 8 == 0;
    if (vec) {   // scores of 8 keys at a time
        const __m256 vs = _mm256_set1_ps(scale); __m256 vmx = _mm256_set1_ps(-INFINITY);
        for (; t + 8 <= len; t += 8) {
            const KV* k[8];
            for (int j = 0; j < 8; j++) k[j] = kc + (slots ? slots[t + j] : t + j) * stride;
            const __m256 s = _mm256_mul_ps(dot8(q, k, d), vs);
            _mm256_storeu_ps(scores + t, s); vmx = _mm256_max_ps(vmx, s);
        }
        alignas(32) float m8[8]; _mm256_store_ps(m8, vmx);
        for (int j = 0; j < 8; j++) mx = m8[j] > mx ? m8[j] : mx;
    }
#endif
    for (; t < len; t++) { float s = dot_w(kc + (slots ? slots[t] : t) * stride, q, d) * scale; scores[t] = s; mx = s > mx ? s : mx; }
    const float den = exp_shift_sum(scores, len, mx);
    float inv = 1.0f / den;
#if XK_AVX2
    if (vec) {   // the weighted sum of values in strips of 64 outputs kept in registers, normalised once at the end
        pv_rows(scores, vc, slots, len, stride, d, out, false);
        for (int64_t i = 0; i < d; i++) out[i] *= inv;
        return;
    }
#endif
    for (int64_t i = 0; i < d; i++) out[i] = 0;
    for (int64_t t = 0; t < len; t++) {
        const KV* v = vc + (slots ? slots[t] : t) * stride; float p = scores[t] * inv; int64_t i = 0;
#if XK_AVX2
        __m256 pp = _mm256_set1_ps(p);
        for (; i + 8 <= d; i += 8) _mm256_storeu_ps(out + i, _mm256_fmadd_ps(pp, load8w(v + i), _mm256_loadu_ps(out + i)));
#endif
        for (; i < d; i++) out[i] += p * w2f(v[i]);
    }
}
