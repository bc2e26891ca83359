// ---------------------------------------------------------------- a linear layer's weight, in one of four forms
enum Kind { F32 = 0, Q8_ROW = 1, Q8_GROUP = 2, Q4 = 3, BF16 = 4 };   // BF16: bfloat16 weights, float32 products (exact upcast)
struct Lin {
    int kind = F32; int64_t N = 0, K = 0, gs = 0, G = 1;
    const float* wf = nullptr; const int8_t* w8 = nullptr; const uint8_t* w4 = nullptr; const uint16_t* wb = nullptr;   // wb: bfloat16 bits
    const float* srow = nullptr; const uint16_t* sg = nullptr; const uint16_t* mg = nullptr;  // scales, mins (fp16 bits)
    const float* bias = nullptr;
    int bshift = 0;    // log2(group size / 32), for the integer path
    bool a8 = false;   // int8 activations (per 32-value block) with integer dot products; set only where the layout allows it
    bool a8r = false;  // and a second int8 pass over the rounding residual of the activations (int8 GEMM; the row path then runs float)
    bool half = false; // INT8 in groups of 16 (GGUF Q6_K repacked): two scales a block of 32, each meeting its half's int32 sum
    // INT4 with int8 activations (rows16_a8, AVX2 and up): the scales (and minimums, where mg) of rows 16j..16j+15 side by side,
    // group by group, [j][g][16], for the first n16() = N / 16 * 16 rows; set by a Plan, which keeps them (interleave16). Else null.
    const uint16_t* s16 = nullptr; const uint16_t* m16 = nullptr;
    // INT4 with int8 activations (rows16_a8): the codes of the first N16 = n16() rows regrouped so that one pass of
    // rows16_a8 reads one stream (`regroup`): by eights on AVX2 / AVX-VNNI builds, [N16 / 8][block pair][8 rows][32 bytes],
    // by sixteens on AVX-512 ones, [N16 / 16][pass of 4 blocks][16 rows][64 bytes] (where K / 32 % 4 == 2 the last pass holds
    // 2 blocks, [16 rows][32 bytes]); set by a Plan, which keeps them. Else null.
    const uint8_t* w4r = nullptr;
    int64_t n16() const { return N / 16 * 16; }   // the rows the plan's 16-row copies hold (s16, m16, w4r): the last N % 16 are left out
};

// An input vector prepared for one kind of weight: Q4 needs x split into even/odd columns and per-group sums.
struct Prep { const float* x; const float* xe; const float* xo; const float* gsum; const int8_t* xq; const float* dx; const float* qs; };

static inline bool a8_ok(const Lin& L) {   // integer path: AVX2, blocks of 32 inputs inside one scale group (a power-of-two count of
    int64_t bpg = L.gs / 32;                  // blocks), or INT8 groups of 16 (two per block)
    return XK_AVX2 && L.kind != F32 && L.kind != BF16 && L.K % 32 == 0 &&
           (L.kind == Q8_ROW || (L.kind == Q8_GROUP && L.gs == 16) || (L.gs % 32 == 0 && (bpg & (bpg - 1)) == 0));
}
// floats of scratch one prepared input takes (int8 codes are stored in the same buffer)
static inline int64_t prep_floats(const Lin& L) { return (L.kind == Q4 ? L.K + L.G : 0) + (L.a8 ? 2 * (L.K / 32) + L.K / 4 + 16 : 0); }

#if XK_AVX2
// the sum of 4 int32 lanes
static inline int32_t hsum4_i32(__m128i s) {
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e)); s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
// the sum of 8 int32 lanes; halves[0..1] (if given): of lanes 0-3 and 4-7
static inline int32_t hsum8_i32(__m256i v, int32_t* halves = nullptr) {
    const int32_t x = hsum4_i32(_mm256_castsi256_si128(v)), y = hsum4_i32(_mm256_extracti128_si256(v, 1));
    if (halves) { halves[0] = x; halves[1] = y; }
    return x + y;
}
// 32 floats v[0..3] quantized (as GGUF's Q8_0; quantize_blocks and the int8 GEMM's quantize_rows): codes to q, returns the
// scale; *isum: the sum of the codes, hs[0..1] (if given): of each half
static inline float quantize_block(const __m256 (&v)[4], int8_t* q, int32_t* isum, int32_t* hs = nullptr) {
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(signbit, v[0]), _mm256_andnot_ps(signbit, v[1])),
                             _mm256_max_ps(_mm256_andnot_ps(signbit, v[2]), _mm256_andnot_ps(signbit, v[3])));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h)); h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h), d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    // round to nearest even, as nearbyint and torch.round
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v[0], vid)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v[1], vid));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v[2], vid)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v[3], vid));
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    _mm256_storeu_si256((__m256i*)q, _mm256_permutevar8x32_epi32(p, perm));
    const int32_t lo = hsum8_i32(_mm256_add_epi32(i0, i1)), hi = hsum8_i32(_mm256_add_epi32(i2, i3));
    *isum = lo + hi;
    if (hs) { hs[0] = lo; hs[1] = hi; }
    return d;
}
#endif

// Quantize 32-value blocks of x to int8 (scale amax/127 per block). Q4 wants each pair of blocks as
// [even columns of b, even of b+1, odd of b, odd of b+1] (a lone last block: [even, odd]) to meet its packed nibbles.
// qsum[b]: d_b * sum of block b's codes, the block's sum as the integer product sees it (for the INT4 minimums).
static void quantize_blocks(const Lin& L, const float* x, int8_t* xq, float* dx, float* qsum) {
    const int64_t nb = L.K / 32;
#if XK_AVX2
    // vectorized (the same bits: an exact max, the same scale, round-to-nearest-even codes, an exact integer sum); the scalar
    // loop below took about a tenth of a decode token on AVX2, each thread quantizing each of a layer's four inputs
    const __m128i evod = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t b = 0; b < nb; b++) {
        const float* xb = x + b * 32;
        __m256 v[4] = {_mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8), _mm256_loadu_ps(xb + 16), _mm256_loadu_ps(xb + 24)};
        int32_t isum; alignas(32) int8_t tmp[32];
        const float d = quantize_block(v, L.kind == Q4 ? tmp : xq + b * 32, &isum);
        dx[b] = d; qsum[b] = d * (float)isum;
        if (L.kind != Q4) continue;
        const __m128i a = _mm_shuffle_epi8(_mm_load_si128((const __m128i*)tmp), evod), c = _mm_shuffle_epi8(_mm_load_si128((const __m128i*)(tmp + 16)), evod);
        const __m128i ev = _mm_unpacklo_epi64(a, c), od = _mm_unpackhi_epi64(a, c);   // columns 0, 2, .., 30 and 1, 3, .., 31
        const bool pair = (b % 2 == 0 && b + 1 < nb) || b % 2 == 1;
        int8_t* e = pair ? xq + (b / 2) * 64 + (b % 2) * 16 : xq + b * 32;
        _mm_storeu_si128((__m128i*)e, ev); _mm_storeu_si128((__m128i*)(e + (pair ? 32 : 16)), od);
    }
    return;
#endif
    for (int64_t b = 0; b < nb; b++) {
        const float* xb = x + b * 32; float amax = 0;
        for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(xb[i]));
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f; dx[b] = d;
        int8_t tmp[32]; int32_t isum = 0;
        for (int i = 0; i < 32; i++) { tmp[i] = (int8_t)std::nearbyint(xb[i] * id); isum += tmp[i]; }
        qsum[b] = d * (float)isum;
        if (L.kind != Q4) { std::memcpy(xq + b * 32, tmp, 32); continue; }
        bool pair = (b % 2 == 0 && b + 1 < nb) || b % 2 == 1;
        int8_t* base = xq + (b / 2) * 64;
        for (int j = 0; j < 16; j++) {
            if (!pair) { xq[b * 32 + j] = tmp[2 * j]; xq[b * 32 + 16 + j] = tmp[2 * j + 1]; }
            else { int o = (b % 2) * 16; base[o + j] = tmp[2 * j]; base[32 + o + j] = tmp[2 * j + 1]; }
        }
    }
}

static void prepare(const Lin& L, const float* x, float* scratch, Prep& p) {
    p.x = x; p.xe = p.xo = p.gsum = p.dx = p.qs = nullptr; p.xq = nullptr;
    float* next = scratch;
    if (L.kind == Q4) {
        int64_t h = L.K / 2;
        float* xe = scratch; float* xo = scratch + h; float* gs = scratch + 2 * h;
        if (!L.a8) {           // the float dot products' split and sums (int8 ones take the quantized blocks' sums below)
            for (int64_t j = 0; j < h; j++) { xe[j] = x[2 * j]; xo[j] = x[2 * j + 1]; }
            for (int64_t g = 0; g < L.G; g++) { float s = 0; for (int64_t i = 0; i < L.gs; i++) s += x[g * L.gs + i]; gs[g] = s; }
        }
        p.xe = xe; p.xo = xo; p.gsum = gs; next = gs + L.G;
    }
    if (L.a8) {
        float* dx = next; float* qs = dx + L.K / 32; int8_t* xq = (int8_t*)(qs + L.K / 32);
        xq = (int8_t*)(((uintptr_t)xq + 31) & ~(uintptr_t)31);
        quantize_blocks(L, x, xq, dx, qs); p.xq = xq; p.dx = dx; p.qs = qs;   // qs: what the INT4 minimums meet (y = W . x_hat exactly)
    }
}

#if XK_AVX2
// u8 x s8 products of 32 bytes summed in groups of 4 into 8 int32 lanes: one vpdpbusd where the build has VNNI, else
// vpmaddubsw then vpmaddwd (exact here: the unsigned side is a nibble or |w| <= 127, so a pair sum stays under 2^15)
static inline __m256i dp4(__m256i acc, __m256i u, __m256i s) {
#if XK_ISA >= 3
    return _mm256_dpbusd_epi32(acc, u, s);
#elif XK_ISA == 2
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
// The row path with the int8 GEMM's arithmetic, 4 rows at a time (a decode step, a few rows): each block's int32 sum (exact)
// meets its float scales in the GEMM's order -- y = fma(sum_b, s_b d_b, y), then for INT4 y = fma(m_b, d_b sum(q)_b, y),
// block after block, the bias last -- so a row's output has the same bits on either path, whatever the batch (greedy text
// does not depend on how many requests share a step). The 4 rows' sums of a block come out of two hadds as one vector.
static inline __m128i hsum4_lo(__m256i r0, __m256i r1, __m256i r2, __m256i r3, __m128i* hi) {   // lanes 0-3 and 4-7 of each row
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(r0, r1), _mm256_hadd_epi32(r2, r3));
    *hi = _mm256_extracti128_si256(h, 1);
    return _mm256_castsi256_si128(h);
}
// row n's scale (minimum) of group g, as the int8 GEMM's repacking takes them too (qrepack): one source, the same floats
static inline float sc_of(const Lin& L, int64_t n, int64_t g) { return L.kind == Q8_ROW ? L.srow[n] : _cvtsh_ss(L.sg[n * L.G + g]); }
static inline __m128 sc4(const Lin& L, int64_t n, int64_t g) {
    return _mm_set_ps(sc_of(L, n + 3, g), sc_of(L, n + 2, g), sc_of(L, n + 1, g), sc_of(L, n, g));
}
static inline float mn_of(const Lin& L, int64_t n, int64_t g) { return L.mg ? _cvtsh_ss(L.mg[n * L.G + g]) : -8.0f * _cvtsh_ss(L.sg[n * L.G + g]); }
static inline __m128 mn4(const Lin& L, int64_t n, int64_t g) {
    return _mm_set_ps(mn_of(L, n + 3, g), mn_of(L, n + 2, g), mn_of(L, n + 1, g), mn_of(L, n, g));
}
// int32 lanes of row n's block pair b, b+1 (INT4: lanes 0-3 block b, 4-7 block b+1) or block b (INT8: 8 lanes, 4 per half)
// (w: the row's 32 code bytes of the pair)
static inline __m256i q4_pair_at(const uint8_t* w, int64_t b, const Prep& p) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i v = _mm256_loadu_si256((const __m256i*)w);
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    const int8_t* xb = p.xq + b * 32;
#if XK_ISA >= 2
    return dp4(dp4(_mm256_setzero_si256(), lo, _mm256_loadu_si256((const __m256i*)xb)), hi, _mm256_loadu_si256((const __m256i*)(xb + 32)));
#else
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i*)xb)),
                                              _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i*)(xb + 32)))), _mm256_set1_epi16(1));
#endif
}
static inline __m256i q4_pair(const Lin& L, int64_t n, int64_t b, const Prep& p) { return q4_pair_at(L.w4 + n * (L.K / 2) + b * 16, b, p); }
static inline int32_t q4_last(const Lin& L, int64_t n, int64_t b, const Prep& p) {   // a lone last block: [even, odd] halves
    const __m128i m4s = _mm_set1_epi8(0x0f), ones8 = _mm_set1_epi16(1);
    __m128i v = _mm_loadu_si128((const __m128i*)(L.w4 + n * (L.K / 2) + b * 16));
    __m128i lo = _mm_and_si128(v, m4s), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4s);
    return hsum4_i32(_mm_madd_epi16(_mm_add_epi16(_mm_maddubs_epi16(lo, _mm_loadu_si128((const __m128i*)(p.xq + b * 32))),
                                                  _mm_maddubs_epi16(hi, _mm_loadu_si128((const __m128i*)(p.xq + b * 32 + 16)))), ones8));
}
static inline __m256i q8_block(const Lin& L, int64_t n, int64_t b, const Prep& p) {
    __m256i w = _mm256_loadu_si256((const __m256i*)(L.w8 + n * L.K + b * 32)), xv = _mm256_loadu_si256((const __m256i*)(p.xq + b * 32));
    return dp4(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
}
// rows n..n+3 (all < N) of an a8 linear times one prepared input: y[0..3], the GEMM's bits
static void rows4_a8(const Lin& L, int64_t n, const Prep& p, float* y) {
    const int64_t nb = L.K / 32;
    __m128 acc = _mm_setzero_ps();
    if (L.kind == Q4) {
        int64_t b = 0;
        const char* next = (const char*)(L.w4 + (n + 4) * (L.K / 2));   // the next 4 rows (contiguous): fetched while these compute
        for (; b + 2 <= nb; b += 2) {
            if (n + 8 <= L.N) { _mm_prefetch(next + b * 64, _MM_HINT_T0); _mm_prefetch(next + b * 64 + 64, _MM_HINT_T0); }
            __m128i hi, lo = hsum4_lo(q4_pair(L, n, b, p), q4_pair(L, n + 1, b, p), q4_pair(L, n + 2, b, p), q4_pair(L, n + 3, b, p), &hi);
            for (int k = 0; k < 2; k++) {
                const int64_t bb = b + k, g = bb >> L.bshift;
                const __m128 d = _mm_set1_ps(p.dx[bb]);
                acc = _mm_fmadd_ps(_mm_cvtepi32_ps(k ? hi : lo), _mm_mul_ps(sc4(L, n, g), d), acc);
                acc = _mm_fmadd_ps(mn4(L, n, g), _mm_set1_ps(p.qs[bb]), acc);       // qs: d_b sum(q)_b, the block's sum as integers see it
            }
        }
        if (b < nb) {
            const int64_t g = b >> L.bshift;
            __m128i v = _mm_set_epi32(q4_last(L, n + 3, b, p), q4_last(L, n + 2, b, p), q4_last(L, n + 1, b, p), q4_last(L, n, b, p));
            acc = _mm_fmadd_ps(_mm_cvtepi32_ps(v), _mm_mul_ps(sc4(L, n, g), _mm_set1_ps(p.dx[b])), acc);
            acc = _mm_fmadd_ps(mn4(L, n, g), _mm_set1_ps(p.qs[b]), acc);
        }
    } else {
        const char* next = (const char*)(L.w8 + (n + 4) * L.K);
        for (int64_t b = 0; b < nb; b++) {
            if (n + 8 <= L.N) { _mm_prefetch(next + b * 128, _MM_HINT_T0); _mm_prefetch(next + b * 128 + 64, _MM_HINT_T0); }
            __m128i hi, lo = hsum4_lo(q8_block(L, n, b, p), q8_block(L, n + 1, b, p), q8_block(L, n + 2, b, p), q8_block(L, n + 3, b, p), &hi);
            const __m128 d = _mm_set1_ps(p.dx[b]);
            if (L.half) {
                acc = _mm_fmadd_ps(_mm_cvtepi32_ps(lo), _mm_mul_ps(sc4(L, n, 2 * b), d), acc);
                acc = _mm_fmadd_ps(_mm_cvtepi32_ps(hi), _mm_mul_ps(sc4(L, n, 2 * b + 1), d), acc);
            } else acc = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_add_epi32(lo, hi)), _mm_mul_ps(sc4(L, n, b >> L.bshift), d), acc);
        }
    }
    _mm_storeu_ps(y, acc);
    if (L.bias) for (int r = 0; r < 4; r++) y[r] += L.bias[n + r];
}
// one row the same way (the rows left over from fours)
static float row1_a8(const Lin& L, int64_t n, const Prep& p) {
    const int64_t nb = L.K / 32;
    float acc = 0.0f;
    if (L.kind == Q4) {
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2) {
            int32_t two[2]; hsum8_i32(q4_pair(L, n, b, p), two);
            for (int k = 0; k < 2; k++) {
                const int64_t bb = b + k, g = bb >> L.bshift;
                acc = std::fmaf((float)two[k], sc_of(L, n, g) * p.dx[bb], acc);
                acc = std::fmaf(mn_of(L, n, g), p.qs[bb], acc);
            }
        }
        if (b < nb) {
            const int64_t g = b >> L.bshift;
            acc = std::fmaf((float)q4_last(L, n, b, p), sc_of(L, n, g) * p.dx[b], acc);
            acc = std::fmaf(mn_of(L, n, g), p.qs[b], acc);
        }
    } else {
        for (int64_t b = 0; b < nb; b++) {
            int32_t two[2]; const int32_t s = hsum8_i32(q8_block(L, n, b, p), two);
            if (L.half) {
                acc = std::fmaf((float)two[0], sc_of(L, n, 2 * b) * p.dx[b], acc);
                acc = std::fmaf((float)two[1], sc_of(L, n, 2 * b + 1) * p.dx[b], acc);
            } else acc = std::fmaf((float)s, sc_of(L, n, b >> L.bshift) * p.dx[b], acc);
        }
    }
    return L.bias ? acc + L.bias[n] : acc;
}
#endif

// Where row r's value of group g lies in an interleaved copy, [N / 16][G][16]
static inline int64_t at16(int64_t r, int64_t G, int64_t g) { return ((r / 16) * G + g) * 16 + r % 16; }
// A group's scales of 16 rows in one load: src [N, G] (fp16 bits) as [N / 16][G][16] (the last N % 16 rows left out)
static void interleave16(const uint16_t* src, int64_t N, int64_t G, std::vector<uint16_t>& dst) {
    dst.assign(N / 16 * 16 * G, 0);
    for (int64_t n = 0; n < N / 16 * 16; n++)
        for (int64_t g = 0; g < G; g++) dst[at16(n, G, g)] = src[n * G + g];
}
#if XK_AVX2
// Row r0's scale (minimum) of group g in an interleaved copy and the rows after it, one vector: 16 rows on AVX-512 builds,
// 8 elsewhere (r0 a multiple of that); the minimum of symmetric INT4 (no copy) is -8 s, as mn_of
#if XK_ISA >= 3
static inline __m512 scales16(const uint16_t* s16, int64_t r0, int64_t G, int64_t g) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(s16 + at16(r0, G, g)))); }
static inline __m512 mins16(const Lin& L, int64_t r0, int64_t g, __m512 sc) { return L.m16 ? scales16(L.m16, r0, L.G, g) : _mm512_mul_ps(sc, _mm512_set1_ps(-8.0f)); }
#else
static inline __m256 scales16(const uint16_t* s16, int64_t r0, int64_t G, int64_t g) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s16 + at16(r0, G, g)))); }
static inline __m256 mins16(const Lin& L, int64_t r0, int64_t g, __m256 sc) { return L.m16 ? scales16(L.m16, r0, L.G, g) : _mm256_mul_ps(sc, _mm256_set1_ps(-8.0f)); }
#endif
#endif

// How far ahead rows16_a8 prefetches, in rows, in its regrouped copy (one stream): a whole number of 16-row groups, so that
// the same offset lands on the same pass and row of a later group (AVX-512), or of a later group of 8 (AVX2)
constexpr int64_t R16_AHEAD = 32;
static_assert(R16_AHEAD % 16 == 0, "R16_AHEAD: whole groups of 16 rows");
#if XK_ISA >= 3
// Rows n..n+15 (n a multiple of 16, all < N) of an INT4 linear (an even number of blocks, L.s16 and L.w4r set) times one prepared
// input: y[0..15], the same bits as rows4_a8 -- each row's exact int32 block sums meet its scales in the same fma chain,
// block after block; the 16 rows of a block are the 16 lanes of one chain instead of four chains of 4. Four blocks a pass
// (the last pass may hold two): a row's 64 code bytes and the input's 128 in one 512-bit vpdpbusd pair, 4 int32 lanes per
// block; red4 and two rounds of 128-bit shuffles turn 16 rows x 16 lanes into 4 vectors of 16 rows' block sums. rows4_a8
// reduced each block of 4 rows with hadds and built its scale vectors from 8 scalar conversions: about twice the work of
// the loads here, so decode was bound by instructions, not by memory (1.85x on one thread, measured with the two side by side).
// The codes come from the regrouped copy (Lin::w4r, by sixteens): a pass reads 16 rows x 64 bytes, 1 KB contiguous, and prefetches the
// same bytes R16_AHEAD rows on, as the AVX2 pass below. Read where they lie, a pass took 64 bytes from each of 16 rows 288
// bytes apart (K = 576): 16 streams, plus the prefetches of the next 16 rows.
static inline __m512i q4_dot512(__m512i v, __m512i xlo, __m512i xhi) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(v, m4), xlo),
                               _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), xhi);
}
// rows r0..r3, each 4 int32 lanes a block -> 128-bit chunk j: block j's sums of the 4 rows
static inline __m512i red4(__m512i r0, __m512i r1, __m512i r2, __m512i r3) {
    const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(r0, r1), _mm512_unpackhi_epi32(r0, r1));
    const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(r2, r3), _mm512_unpackhi_epi32(r2, r3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}
static void rows16_a8(const Lin& L, int64_t n, const Prep& p, float* y) {
    const int64_t nb = L.K / 32, rb = L.K / 2;                  // blocks; code bytes of a row
    const uint8_t* w = L.w4r + n * rb;                          // rows n..n+15 regrouped: pass after pass
    const bool pf = n + 16 + R16_AHEAD <= L.n16();
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 4) {
        const int nq = nb - b >= 4 ? 4 : 2;                     // blocks this pass
        const int8_t* xb = p.xq + b * 32;                       // pairs of blocks: [even b, even b+1, odd b, odd b+1]
        __m512i xlo, xhi;
        if (nq == 4) {
            xlo = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)xb)), _mm256_loadu_si256((const __m256i*)(xb + 64)), 1);
            xhi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)(xb + 32))), _mm256_loadu_si256((const __m256i*)(xb + 96)), 1);
        } else {
            xlo = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i*)xb));
            xhi = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i*)(xb + 32)));
        }
        const uint8_t* wp = w + b * 256;                       // this pass: row j's nq * 16 code bytes at wp + j * nq * 16
        __m512i B[4];
        for (int q = 0; q < 4; q++) {
            __m512i r[4];
            for (int k = 0; k < 4; k++) {
                const uint8_t* wr = wp + (4 * q + k) * nq * 16;
                if (pf) _mm_prefetch((const char*)(wr + R16_AHEAD * rb), _MM_HINT_T0);
                r[k] = q4_dot512(nq == 4 ? _mm512_loadu_si512((const void*)wr) : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i*)wr)), xlo, xhi);
            }
            B[q] = red4(r[0], r[1], r[2], r[3]);                // chunk j: block b+j, rows 4q..4q+3
        }
        const __m512i t0 = _mm512_shuffle_i32x4(B[0], B[1], 0x44), t1 = _mm512_shuffle_i32x4(B[0], B[1], 0xEE);
        const __m512i t2 = _mm512_shuffle_i32x4(B[2], B[3], 0x44), t3 = _mm512_shuffle_i32x4(B[2], B[3], 0xEE);
        const __m512i C[4] = {_mm512_shuffle_i32x4(t0, t2, 0x88), _mm512_shuffle_i32x4(t0, t2, 0xDD),   // block b+j, rows 0..15
                              _mm512_shuffle_i32x4(t1, t3, 0x88), _mm512_shuffle_i32x4(t1, t3, 0xDD)};
        for (int j = 0; j < nq; j++) {
            const int64_t bb = b + j, g = bb >> L.bshift;
            const __m512 sc = scales16(L.s16, n, L.G, g), mn = mins16(L, n, g, sc);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(C[j]), _mm512_mul_ps(sc, _mm512_set1_ps(p.dx[bb])), acc);
            acc = _mm512_fmadd_ps(mn, _mm512_set1_ps(p.qs[bb]), acc);   // as rows4_a8: y = fma(m_b, d_b sum(q)_b, y)
        }
    }
    if (L.bias) acc = _mm512_add_ps(acc, _mm512_loadu_ps(L.bias + n));
    _mm512_storeu_ps(y, acc);
}
#elif XK_AVX2
// AVX2 (and AVX-VNNI): the same 16 rows as two passes of 8, two blocks a step. A row's 32 code bytes meet the input's 64 in
// q4_pair_at (lanes 0-3 block b, 4-7 block b+1); red4 turns 4 rows into [block b: rows 0-3 | block b+1: rows 0-3] and one
// 128-bit permute pairs the two halves into a vector of 8 rows' sums per block, whose scales come in one conversion of the
// interleaved copy. Same fma chain per row as rows4_a8 (whose hadds and 8 scalar half-to-float conversions a block pair cost
// more than its loads), so the same bits.
static inline __m256i red4(__m256i r0, __m256i r1, __m256i r2, __m256i r3) {
    const __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi32(r0, r1), _mm256_unpackhi_epi32(r0, r1));
    const __m256i b = _mm256_add_epi32(_mm256_unpacklo_epi32(r2, r3), _mm256_unpackhi_epi32(r2, r3));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}
// The codes come from the regrouped copy (Lin::w4r): a pass over 8 rows reads 256 contiguous bytes a block pair, one stream,
// and prefetches the same bytes R16_AHEAD rows on. Read where they lie, the pass took 32 bytes from each of 8 rows 288 bytes
// apart (the default model's K = 576), 8 streams plus the prefetches of the next rows': a thread read about 13 GB/s from
// memory on an AMD EPYC (Zen 3), against 23 GB/s for the same products from cache and 19 GB/s for a plain sum; regrouped,
// 20-23 GB/s, and 42 instead of 24 GB/s on two threads (a 47 MB weight, rows16_a8 alone).
static void rows16_a8(const Lin& L, int64_t n, const Prep& p, float* y) {
    const int64_t nb = L.K / 32, rb = L.K / 2;
    for (int h = 0; h < 2; h++) {
        const int64_t r = n + 8 * h;
        const uint8_t* w = L.w4r + r * rb;                      // rows r..r+7, block pair after block pair
        const bool pf = r + 8 + R16_AHEAD <= L.n16();
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b += 2, w += 256) {
            if (pf) for (int k = 0; k < 4; k++) _mm_prefetch((const char*)(w + R16_AHEAD * rb + 64 * k), _MM_HINT_T0);
            const __m256i lo = red4(q4_pair_at(w, b, p), q4_pair_at(w + 32, b, p), q4_pair_at(w + 64, b, p), q4_pair_at(w + 96, b, p));
            const __m256i hi = red4(q4_pair_at(w + 128, b, p), q4_pair_at(w + 160, b, p), q4_pair_at(w + 192, b, p), q4_pair_at(w + 224, b, p));
            const __m256i C[2] = {_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31)};
            for (int j = 0; j < 2; j++) {
                const int64_t bb = b + j, g = bb >> L.bshift;
                const __m256 sc = scales16(L.s16, r, L.G, g), mn = mins16(L, r, g, sc);
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(C[j]), _mm256_mul_ps(sc, _mm256_set1_ps(p.dx[bb])), acc);
                acc = _mm256_fmadd_ps(mn, _mm256_set1_ps(p.qs[bb]), acc);
            }
        }
        if (L.bias) acc = _mm256_add_ps(acc, _mm256_loadu_ps(L.bias + n + 8 * h));
        _mm256_storeu_ps(y + 8 * h, acc);
    }
}
#endif

static inline bool rows16_ok(const Lin& L) { return XK_AVX2 && L.a8 && !L.a8r && L.kind == Q4 && (L.K / 32) % 2 == 0 && L.N >= 16; }
// The copies rows16_a8 reads, made once for a linear (rows16_ok) and kept by the caller (a Plan): the interleaved scales and
// minimums, and the codes of the first n16() rows regrouped (Lin::w4r: by eights on AVX2 / AVX-VNNI builds, by sixteens on AVX-512 ones)
struct Rows16Copies { std::vector<uint16_t> s16, m16; avec<uint8_t> w4r; };
// INT4 codes of rows 0..N-1 (N a multiple of G, K / 32 even) regrouped by G rows: group after group, pass after pass of P
// blocks (the last pass may hold fewer), the G rows' nq * 16 code bytes of a pass side by side, [N / G][pass][G rows][nq *
// 16 bytes]. Lin::w4r: by eights with passes of 2 blocks on AVX2 builds, by sixteens with passes of 4 on AVX-512 ones
static inline void regroup(const uint8_t* w4, int64_t N, int64_t K, int64_t G, int64_t P, avec<uint8_t>& dst) {
    const int64_t rb = K / 2, nb = K / 32;
    dst.resize(N * rb);
    for (int64_t n = 0; n < N; n++)
        for (int64_t b = 0; b < nb; b += P) {
            const int64_t nq = std::min<int64_t>(P, nb - b);
            std::memcpy(dst.data() + (n / G) * G * rb + b * 16 * G + (n % G) * nq * 16, w4 + n * rb + b * 16, nq * 16);
        }
}
static void rows16_copies(Lin& L, Rows16Copies& c) {
    interleave16(L.sg, L.N, L.G, c.s16); L.s16 = c.s16.data();
    if (L.mg) { interleave16(L.mg, L.N, L.G, c.m16); L.m16 = c.m16.data(); }
#if XK_ISA >= 3
    regroup(L.w4, L.n16(), L.K, 16, 4, c.w4r); L.w4r = c.w4r.data();
#elif XK_AVX2
    regroup(L.w4, L.n16(), L.K, 8, 2, c.w4r); L.w4r = c.w4r.data();
#endif
}

// bfloat16 to float32: the 16 bits are the float's high half (exact)
static inline float bf2f(uint16_t h) { uint32_t b = (uint32_t)h << 16; float f; std::memcpy(&f, &b, 4); return f; }
#if XK_AVX2
static inline __m256 load8bf(const uint16_t* p) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16)); }
static inline __m256 load8w(const float* p) { return _mm256_loadu_ps(p); }
static inline __m256 load8w(const uint16_t* p) { return load8bf(p); }
#endif
static inline float w2f(float w) { return w; }
static inline float w2f(uint16_t w) { return bf2f(w); }
// The float-activation row kernels of float32, bfloat16 and GGUF Q8_0 weights (dot_f32, dot_bf16, row_dot's Q8_0 groups; not
// dot_w's other callers, the attention's keys) prefetch the weights this many bytes ahead. The
// hardware prefetcher alone left a thread about one reorder buffer of work in flight: for bfloat16 (32 weights a line, four
// widening loads and four FMAs) a thread read 11.5 GB/s from memory, with this 17, and two threads 20 -> 26.5 GB/s (the
// gate|up shape, 120 MB of copies, an AVX2 AMD EPYC; 256 to 4096 bytes tried, 512 to 1024 the best); Q8_0 rows (the default
// model's head on float activations) 17 -> 24 GB/s on two threads. float32 (two lines a step) read 16-18 GB/s a thread with
// or without. dot_i8 (per-row int8 scales) read less with it (two threads 19-21 -> 13-16 GB/s, K = 2048) and does not.
constexpr int64_t W_PREFETCH = 1024;
// sum_i w[i] * x[i] for float32 w, or bfloat16 w made float32 exactly as it is read: one loop, so the two give the same sums
// in the same order (a bf16 weight and its float32 copy, the same bits)
template <typename W, bool PF = false> static inline float dot_w(const W* w, const float* x, int64_t K) {
    int64_t i = 0; float s = 0;
#if XK_AVX2
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 32 <= K; i += 32) {
        if (PF) _mm_prefetch((const char*)(w + i) + W_PREFETCH, _MM_HINT_T0);                       // 32 weights: one line of
        if (PF && sizeof(W) == 4) _mm_prefetch((const char*)(w + i) + W_PREFETCH + 64, _MM_HINT_T0);   // bf16, two of float32
        a0 = _mm256_fmadd_ps(load8w(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load8w(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(load8w(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(load8w(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i + 8 <= K; i += 8) a0 = _mm256_fmadd_ps(load8w(w + i), _mm256_loadu_ps(x + i), a0);
    s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
#endif
    for (; i < K; i++) s += w2f(w[i]) * x[i];
    return s;
}
static inline float dot_f32(const float* w, const float* x, int64_t K) { return dot_w<float, true>(w, x, K); }        // weight rows:
static inline float dot_bf16(const uint16_t* w, const float* x, int64_t K) { return dot_w<uint16_t, true>(w, x, K); }  // prefetched

// sum_i q[i] * x[i] for int8 q
static inline float dot_i8(const int8_t* q, const float* x, int64_t K) {
    int64_t i = 0; float s = 0;
#if XK_AVX2
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (; i + 16 <= K; i += 16) {
        __m256 q0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(q + i))));
        __m256 q1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(q + i + 8))));
        a0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(x + i + 8), a1);
    }
    for (; i + 8 <= K; i += 8)
        a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(q + i)))), _mm256_loadu_ps(x + i), a0);
    s = hsum(_mm256_add_ps(a0, a1));
#endif
    for (; i < K; i++) s += (float)q[i] * x[i];
    return s;
}

// One output of a linear layer: row n of W times the prepared input (float activations; int8 ones: rows4_a8, row1_a8).
#if XK_ISA >= 3
// A float-activation INT4 row on 512 bits: per group, sum(codes_even * x_even + codes_odd * x_odd) in one chain of FMAs, then
// times its scale into one of two accumulators; the minimums' part, sum_g m_g sum(x)_g, as one vector dot over the groups.
static inline float q4_row_f32_512(const uint8_t* q, const uint16_t* sc, const uint16_t* mn, const Prep& p, int64_t G, int64_t hb) {
    alignas(64) float s[1024];
    const __m512i m4 = _mm512_set1_epi32(0x0f);
    __m512 mv = _mm512_setzero_ps();
    for (int64_t g = 0; g < G; g += 16) {        // scales to floats, and the minimums' dot, 16 groups at a time
        const __mmask16 k = G - g >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (G - g)) - 1);
        const __m512 sv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, sc + g));
        _mm512_store_ps(s + g, sv);
        const __m512 m = mn ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, mn + g)) : _mm512_mul_ps(sv, _mm512_set1_ps(-8.0f));
        mv = _mm512_fmadd_ps(m, _mm512_maskz_loadu_ps(k, p.gsum + g), mv);
    }
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    for (int64_t g = 0; g < G; g++) {
        const uint8_t* qg = q + g * hb; const float* xe = p.xe + g * hb; const float* xo = p.xo + g * hb;
        __m512 a = _mm512_setzero_ps();
        for (int64_t j = 0; j < hb; j += 16) {
            const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(qg + j)));
            a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, m4)), _mm512_loadu_ps(xe + j), a);
            a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), _mm512_loadu_ps(xo + j), a);
        }
        if (g & 1) acc1 = _mm512_fmadd_ps(a, _mm512_set1_ps(s[g]), acc1); else acc0 = _mm512_fmadd_ps(a, _mm512_set1_ps(s[g]), acc0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + _mm512_reduce_add_ps(mv);
}
#endif
#if XK_AVX2
// Groups g..g+7 of one row's fp16 values (scales or minimums) as floats, the lanes past the row's nk groups (0 in `live`) 0.
// The 16-byte load may run into the next row's values (masked off); at the end of the array [.., end) they are copied instead.
static inline __m256 group8(const uint16_t* v, int nk, __m256i live, const uint16_t* end) {
    __m128i h;
    if (end - v >= 8) h = _mm_loadu_si128((const __m128i*)v);
    else { alignas(16) uint16_t t[8] = {}; std::memcpy(t, v, 2 * nk); h = _mm_load_si128((const __m128i*)t); }
    return _mm256_and_ps(_mm256_cvtph_ps(h), _mm256_castsi256_ps(live));
}
// R rows n..n+R-1 of a float-activation INT4 linear (bytes a group a multiple of 8): y[r] = sum_g s_g (c . x)_g + sum_g m_g sum(x)_g.
// Per group, (c . x)_g as two chains of FMAs (even and odd columns) meets its scale in one more; the minimums' part is a
// vector dot over 8 groups at a time, as the scales are converted. With R = 2 each load of the input serves both rows and
// their independent chains interleave: on AVX2 this path is bound by instructions (each code made a float: a widening, a
// mask or shift, a conversion), not by memory, and one row at a time with scalar scale conversions left the pipes idle.
// Same bits for any R (each row's sums are the same, in the same order).
template <int R, int HB> static inline void rows_q4f(const Lin& L, int64_t n, const Prep& p, float* y) {
    const int64_t hb = HB ? HB : L.gs / 2, rb = L.K / 2, G = L.G;   // HB: bytes a group when known (16: groups of 32)
    const uint16_t* send = L.sg + L.N * G; const uint16_t* mend = L.mg ? L.mg + L.N * G : nullptr;
    const __m256i m4 = _mm256_set1_epi32(0x0f);
    __m256 acc[R], mv[R];
    for (int r = 0; r < R; r++) acc[r] = mv[r] = _mm256_setzero_ps();
    for (int64_t g8 = 0; g8 < G; g8 += 8) {
        const int nk = G - g8 >= 8 ? 8 : (int)(G - g8);
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(nk), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 gs = _mm256_maskload_ps(p.gsum + g8, live);
        __m256 sv[R];
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            sv[r] = group8(L.sg + (n + r) * G + g8, nk, live, send);
            const __m256 mn = L.mg ? group8(L.mg + (n + r) * G + g8, nk, live, mend) : _mm256_mul_ps(sv[r], _mm256_set1_ps(-8.0f));
            mv[r] = _mm256_fmadd_ps(mn, gs, mv[r]);
        }
        for (int k = 0; k < nk; k++) {
            const int64_t g = g8 + k; const float* xe = p.xe + g * hb; const float* xo = p.xo + g * hb;
            __m256 a[R], b[R];
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) a[r] = b[r] = _mm256_setzero_ps();
#pragma GCC unroll 2
            for (int64_t j = 0; j < hb; j += 8) {
                const __m256 e = _mm256_loadu_ps(xe + j), o = _mm256_loadu_ps(xo + j);
#pragma GCC unroll 2
                for (int r = 0; r < R; r++) {
                    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(L.w4 + (n + r) * rb + g * hb + j)));
                    a[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, m4)), e, a[r]);
                    b[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), o, b[r]);
                }
            }
            const __m256i lane = _mm256_set1_epi32(k);
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) acc[r] = _mm256_fmadd_ps(_mm256_add_ps(a[r], b[r]), _mm256_permutevar8x32_ps(sv[r], lane), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) y[r] = hsum(acc[r]) + hsum(mv[r]) + (L.bias ? L.bias[n + r] : 0.0f);
}
static inline bool rows_q4f_ok(const Lin& L) { return L.kind == Q4 && (L.gs / 2) % 8 == 0; }
// rows_q4f with the group's byte count fixed at compile time where it is GGUF's (groups of 32)
template <int R> static inline void rows_q4f_any(const Lin& L, int64_t n, const Prep& p, float* y) {
    if (L.gs == 32) rows_q4f<R, 16>(L, n, p, y); else rows_q4f<R, 0>(L, n, p, y);
}
#endif
static inline float row_dot(const Lin& L, int64_t n, const Prep& p) {
    float y;
    switch (L.kind) {
    case F32: y = dot_f32(L.wf + n * L.K, p.x, L.K); break;
    case BF16: y = dot_bf16(L.wb + n * L.K, p.x, L.K); break;
    case Q8_ROW: y = L.srow[n] * dot_i8(L.w8 + n * L.K, p.x, L.K); break;
    case Q8_GROUP: {
        const int8_t* q = L.w8 + n * L.K; const uint16_t* sc = L.sg + n * L.G;
#if XK_AVX2
        if (L.gs % 16 == 0) {
            __m256 acc = _mm256_setzero_ps();
            for (int64_t g = 0; g < L.G; g++) {
                const int8_t* qg = q + g * L.gs; const float* xg = p.x + g * L.gs;
                for (int64_t o = 0; o < L.gs; o += 64) _mm_prefetch((const char*)qg + W_PREFETCH + o, _MM_HINT_T0);   // as dot_f32
                __m256 a = _mm256_setzero_ps(), b = a;
                for (int64_t i = 0; i < L.gs; i += 16) {
                    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(qg + i)))), _mm256_loadu_ps(xg + i), a);
                    b = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(qg + i + 8)))), _mm256_loadu_ps(xg + i + 8), b);
                }
                acc = _mm256_fmadd_ps(_mm256_add_ps(a, b), _mm256_set1_ps(h2f(sc[g])), acc);
            }
            y = hsum(acc); break;
        }
#endif
        y = 0;
        for (int64_t g = 0; g < L.G; g++) y += h2f(sc[g]) * dot_i8(q + g * L.gs, p.x + g * L.gs, L.gs);
        break;
    }
    default: {  // Q4: byte j of a row holds column 2j (low nibble) and 2j+1 (high nibble)
        const uint8_t* q = L.w4 + n * (L.K / 2); const uint16_t* sc = L.sg + n * L.G; const uint16_t* mn = L.mg ? L.mg + n * L.G : nullptr;
        const int64_t hb = L.gs / 2;   // bytes per group
#if XK_ISA >= 3
        if (hb % 16 == 0 && L.G <= 1024) {   // 512 bits: 16 bytes (32 codes) a step; the scales and minimums meet in vectors
            y = q4_row_f32_512(q, sc, mn, p, L.G, hb); break;
        }
#endif
#if XK_AVX2
        if (rows_q4f_ok(L)) { rows_q4f_any<1>(L, n, p, &y); return y; }   // the bias added there
#endif
        y = 0;
        for (int64_t g = 0; g < L.G; g++) {
            float a = 0, s = h2f(sc[g]);
            for (int64_t j = 0; j < hb; j++) { uint8_t c = q[g * hb + j]; a += (float)(c & 15) * p.xe[g * hb + j] + (float)(c >> 4) * p.xo[g * hb + j]; }
            y += s * a + (mn ? h2f(mn[g]) : -8.0f * s) * p.gsum[g];
        }
    }
    }
    return L.bias ? y + L.bias[n] : y;
}
