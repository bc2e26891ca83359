// ---------------------------------------------------------------- a linear layer's weight, in one of four forms
enum Kind { F32 = 0, Q8_ROW = 1, Q8_GROUP = 2, Q4 = 3 };
struct Lin {
    int kind = F32; int64_t N = 0, K = 0, gs = 0, G = 1;
    const float* wf = nullptr; const int8_t* w8 = nullptr; const uint8_t* w4 = nullptr;
    const float* srow = nullptr; const uint16_t* sg = nullptr; const uint16_t* mg = nullptr;  // scales, mins (fp16 bits)
    const float* bias = nullptr;
    int bshift = 0;    // log2(group size / 32), for the integer path
    bool a8 = false;   // int8 activations (per 32-value block) with integer dot products; set only where the layout allows it
    bool a8r = false;  // and a second int8 pass over the rounding residual of the activations (int8 GEMM; the row path then runs float)
    bool half = false; // INT8 in groups of 16 (GGUF Q6_K repacked): two scales a block of 32, each meeting its half's int32 sum
};

// An input vector prepared for one kind of weight: Q4 needs x split into even/odd columns and per-group sums.
struct Prep { const float* x; const float* xe; const float* xo; const float* gsum; const int8_t* xq; const float* dx; };

static inline bool a8_ok(const Lin& L) {   // integer path: AVX2, blocks of 32 inputs inside one scale group (a power-of-two count of
    int64_t bpg = L.gs / 32;                  // blocks), or INT8 groups of 16 (two per block)
    return XK_AVX2 && L.kind != F32 && L.K % 32 == 0 &&
           (L.kind == Q8_ROW || (L.kind == Q8_GROUP && L.gs == 16) || (L.gs % 32 == 0 && (bpg & (bpg - 1)) == 0));
}
// floats of scratch one prepared input takes (int8 codes are stored in the same buffer)
static inline int64_t prep_floats(const Lin& L) { return (L.kind == Q4 ? L.K + L.G : 0) + (L.a8 ? 2 * (L.K / 32) + L.K / 4 + 16 : 0); }

// Quantize 32-value blocks of x to int8 (scale amax/127 per block). Q4 wants each pair of blocks as
// [even columns of b, even of b+1, odd of b, odd of b+1] (a lone last block: [even, odd]) to meet its packed nibbles.
// qsum[b]: d_b * sum of block b's codes, the block's sum as the integer product sees it (for the INT4 minimums).
static void quantize_blocks(const Lin& L, const float* x, int8_t* xq, float* dx, float* qsum) {
    const int64_t nb = L.K / 32;
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
    p.x = x; p.xe = p.xo = p.gsum = p.dx = nullptr; p.xq = nullptr;
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
        quantize_blocks(L, x, xq, dx, qs); p.xq = xq; p.dx = dx;
        if (L.kind == Q4)   // the minimums meet the quantized activations too: y = W . x_hat exactly (as llama.cpp's Q8_1 sums)
            for (int64_t g = 0; g < L.G; g++) { float s = 0; for (int64_t b = g * L.gs / 32; b < (g + 1) * L.gs / 32; b++) s += qs[b]; ((float*)p.gsum)[g] = s; }
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
// W8A8: sum over blocks of scale_w(block) * dx(block) * (int8 w . int8 x); per-row scale: applied by the caller (ws == nullptr).
// `half`: groups of 16, two scales a block: lanes 0-3 of the 4-byte sums hold its first 16 columns, lanes 4-7 the other 16.
static inline float dot_q8_a8(const int8_t* q, const uint16_t* ws, int bshift, const Prep& p, int64_t nb, bool half = false) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i w = _mm256_loadu_si256((const __m256i*)(q + b * 32)), xv = _mm256_loadu_si256((const __m256i*)(p.xq + b * 32));
        __m256 f = _mm256_cvtepi32_ps(dp4(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(xv, w)));
        if (half) {
            acc = _mm256_fmadd_ps(f, _mm256_set_m128(_mm_set1_ps(p.dx[b] * _cvtsh_ss(ws[2 * b + 1])), _mm_set1_ps(p.dx[b] * _cvtsh_ss(ws[2 * b]))), acc);
            continue;
        }
        float c = p.dx[b] * (ws ? _cvtsh_ss(ws[b >> bshift]) : 1.0f);
        acc = _mm256_fmadd_ps(f, _mm256_set1_ps(c), acc);
    }
    return hsum(acc);
}
// W4A8: packed nibbles (16 bytes a block of 32 columns) times the block-paired int8 activations
static inline float dot_q4_a8(const uint8_t* q, const uint16_t* sc, const uint16_t* mn, int bshift, int64_t G, const Prep& p, int64_t nb) {
    const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps(), acc2 = acc;
    __m128 accm = _mm_setzero_ps();  // groups of 32 (bshift 0): the minimums' terms, 4 blocks at a time in the same loop
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {   // two pairs of blocks, two accumulators
        __m256i v = _mm256_loadu_si256((const __m256i*)(q + b * 16)), v2 = _mm256_loadu_si256((const __m256i*)(q + b * 16 + 32));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        __m256i lo2 = _mm256_and_si256(v2, m4), hi2 = _mm256_and_si256(_mm256_srli_epi16(v2, 4), m4);
        const int8_t* xb = p.xq + b * 32;
#if XK_ISA >= 2
        const __m256i z = _mm256_setzero_si256();
        __m256 f = _mm256_cvtepi32_ps(dp4(dp4(z, lo, _mm256_loadu_si256((const __m256i*)xb)), hi, _mm256_loadu_si256((const __m256i*)(xb + 32))));
        __m256 f2 = _mm256_cvtepi32_ps(dp4(dp4(z, lo2, _mm256_loadu_si256((const __m256i*)(xb + 64))), hi2, _mm256_loadu_si256((const __m256i*)(xb + 96))));
#else
        __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i*)xb)), _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i*)(xb + 32))));
        __m256i s16b = _mm256_add_epi16(_mm256_maddubs_epi16(lo2, _mm256_loadu_si256((const __m256i*)(xb + 64))), _mm256_maddubs_epi16(hi2, _mm256_loadu_si256((const __m256i*)(xb + 96))));
        __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones)), f2 = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16b, ones));
#endif
        __m128 s4 = bshift == 0 ? _mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)(sc + b)))       // groups of 32: 4 scales in one load
                                : _mm_set_ps(_cvtsh_ss(sc[(b + 3) >> bshift]), _cvtsh_ss(sc[(b + 2) >> bshift]), _cvtsh_ss(sc[(b + 1) >> bshift]), _cvtsh_ss(sc[b >> bshift]));
        __m128 sd = _mm_mul_ps(s4, _mm_loadu_ps(p.dx + b));
        if (bshift == 0) accm = _mm_fmadd_ps(mn ? _mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)(mn + b))) : _mm_mul_ps(s4, _mm_set1_ps(-8.0f)),
                                             _mm_loadu_ps(p.gsum + b), accm);
        acc = _mm256_fmadd_ps(f, _mm256_set_m128(_mm_shuffle_ps(sd, sd, 0x55), _mm_shuffle_ps(sd, sd, 0x00)), acc);
        acc2 = _mm256_fmadd_ps(f2, _mm256_set_m128(_mm_shuffle_ps(sd, sd, 0xff), _mm_shuffle_ps(sd, sd, 0xaa)), acc2);
    }
    acc = _mm256_add_ps(acc, acc2);
    for (; b + 2 <= nb; b += 2) {
        __m256i v = _mm256_loadu_si256((const __m256i*)(q + b * 16));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        __m256i xe = _mm256_loadu_si256((const __m256i*)(p.xq + b * 32)), xo = _mm256_loadu_si256((const __m256i*)(p.xq + b * 32 + 32));
        __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
        __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));
        float c0 = _cvtsh_ss(sc[b >> bshift]) * p.dx[b], c1 = _cvtsh_ss(sc[(b + 1) >> bshift]) * p.dx[b + 1];
        acc = _mm256_fmadd_ps(f, _mm256_set_m128(_mm_set1_ps(c1), _mm_set1_ps(c0)), acc);
    }
    float y = hsum(acc);
    if (b < nb) {
        const __m128i m4s = _mm_set1_epi8(0x0f), ones8 = _mm_set1_epi16(1);
        __m128i v = _mm_loadu_si128((const __m128i*)(q + b * 16));
        __m128i lo = _mm_and_si128(v, m4s), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4s);
        __m128i s16 = _mm_add_epi16(_mm_maddubs_epi16(lo, _mm_loadu_si128((const __m128i*)(p.xq + b * 32))),
                                    _mm_maddubs_epi16(hi, _mm_loadu_si128((const __m128i*)(p.xq + b * 32 + 16))));
        __m128i s32 = _mm_madd_epi16(s16, ones8);
        s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, 0x4e)); s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, 0xb1));
        y += (float)_mm_cvtsi128_si32(s32) * _cvtsh_ss(sc[b >> bshift]) * p.dx[b];
    }
    if (bshift == 0) {          // the blocks the 4-block loop left: their minimums one by one
        __m128 s = _mm_add_ps(accm, _mm_movehl_ps(accm, accm)); s = _mm_add_ss(s, _mm_movehdup_ps(s));
        float ym = _mm_cvtss_f32(s);
        for (int64_t g = nb & ~(int64_t)3; g < G; g++) ym += (mn ? _cvtsh_ss(mn[g]) : -8.0f * _cvtsh_ss(sc[g])) * p.gsum[g];
        return y + ym;
    }
    __m256 accg = _mm256_setzero_ps();
    for (int64_t g0 = 0; g0 < G; g0 += 8) {
        const int64_t ng = std::min<int64_t>(8, G - g0);
        __m256 m8 = mn ? load8h(mn + g0, ng) : _mm256_mul_ps(load8h(sc + g0, ng), _mm256_set1_ps(-8.0f));
        accg = _mm256_fmadd_ps(m8, load8f(p.gsum + g0, ng), accg);
    }
    return y + hsum(accg);
}
#endif

static inline float dot_f32(const float* w, const float* x, int64_t K) {
    int64_t i = 0; float s = 0;
#if XK_AVX2
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 32 <= K; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i + 8 <= K; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
#endif
    for (; i < K; i++) s += w[i] * x[i];
    return s;
}

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

// One output of a linear layer: row n of W times the prepared input.
static inline float row_dot(const Lin& L, int64_t n, const Prep& p) {
    float y;
#if XK_AVX2
    if (L.a8) {
        const int64_t nb = L.K / 32;
        if (L.kind == Q8_ROW) y = L.srow[n] * dot_q8_a8(L.w8 + n * L.K, nullptr, 0, p, nb);
        else if (L.kind == Q8_GROUP) y = dot_q8_a8(L.w8 + n * L.K, L.sg + n * L.G, L.bshift, p, nb, L.half);
        else y = dot_q4_a8(L.w4 + n * (L.K / 2), L.sg + n * L.G, L.mg ? L.mg + n * L.G : nullptr, L.bshift, L.G, p, nb);
        return L.bias ? y + L.bias[n] : y;
    }
#endif
    switch (L.kind) {
    case F32: y = dot_f32(L.wf + n * L.K, p.x, L.K); break;
    case Q8_ROW: y = L.srow[n] * dot_i8(L.w8 + n * L.K, p.x, L.K); break;
    case Q8_GROUP: {
        const int8_t* q = L.w8 + n * L.K; const uint16_t* sc = L.sg + n * L.G;
#if XK_AVX2
        if (L.gs % 16 == 0) {
            __m256 acc = _mm256_setzero_ps();
            for (int64_t g = 0; g < L.G; g++) {
                const int8_t* qg = q + g * L.gs; const float* xg = p.x + g * L.gs;
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
#if XK_AVX2
        if (hb % 8 == 0) {
            float ymin = 0;
            const __m256i m4 = _mm256_set1_epi32(0x0f);
            __m256 acc = _mm256_setzero_ps();
            for (int64_t g = 0; g < L.G; g++) {
                const uint8_t* qg = q + g * hb; const float* xe = p.xe + g * hb; const float* xo = p.xo + g * hb;
                __m256 a = _mm256_setzero_ps(), b = a;
                for (int64_t j = 0; j < hb; j += 8) {
                    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(qg + j)));
                    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, m4)), _mm256_loadu_ps(xe + j), a);
                    b = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), _mm256_loadu_ps(xo + j), b);
                }
                float s = h2f(sc[g]);
                acc = _mm256_fmadd_ps(_mm256_add_ps(a, b), _mm256_set1_ps(s), acc);
                ymin += (mn ? h2f(mn[g]) : -8.0f * s) * p.gsum[g];
            }
            y = hsum(acc) + ymin; break;
        }
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
