// ---------------------------------------------------------------- int8 activations: a GEMM of integer dot products
// y[T, N] = x[T, K] @ W^T with x quantized per block of 32 values (d = max|x| / 127, q = round(x / d), as GGUF's Q8_0) and the
// products summed in integers, one block at a time: y = W . x_hat, with x_hat = d q the dequantized activations,
//   INT4 (code c in 0..15, value s c + m):  y = sum_b s_b d_b (c . q)_b + sum_b m_b d_b sum(q)_b
//   INT8 (code w in -127..127, value s w):  y = sum_b s_b d_b (w . q)_b
// - x is quantized once per call: codes q[T][K] in column order, and per (row, block) d, d sum(q) and 128 * sum(q).
// - The weights are repacked once per call, QG_MR x QG_NR rows at a time (a task), so that one vector holds 4 consecutive
//   codes of each of QG_NR rows: wq[group][block][k4][row][4]. One dot-product instruction then adds, in lane r, 4 products
//   of row r with 4 activations broadcast to every lane; 8 of them cover a block for QG_NR rows, and the block's int32 sums
//   meet their scales (a vector of QG_NR row scales times the activation's scale) in one float FMA.
// - A register tile of QG_MR x QG_NR weight rows x up to 4 activation rows: per 4 columns, QG_MR weight loads, 4 broadcasts
//   and 4 QG_MR dot products. Its outputs are contiguous in y (lanes = weight rows): no transpose.
// The dot product by ISA level: AVX512-VNNI `vpdpbusd` on 16 rows (512 bits), AVX-VNNI `vpdpbusd` on 8 rows (256 bits), AVX2
// `vpmaddubsw` + `vpmaddwd` on 8 rows. `vpdpbusd` multiplies unsigned by signed bytes: INT4 codes are unsigned already; INT8
// codes are stored as w + 128 and 128 * sum(q) is subtracted per block (exact, in int32). AVX2's `vpmaddubsw` would saturate
// its int16 pair sums on those, so there INT8 takes |w| times q with w's sign (`vpsignb`) instead.
#if XK_AVX2
#if XK_ISA >= 3
constexpr int QG_NR = 16, QG_MR = 2;
typedef __m512i qvi; typedef __m512 qvf;
static inline qvi qi_zero() { return _mm512_setzero_si512(); }
static inline qvi qi_load(const uint8_t* p) { return _mm512_loadu_si512((const void*)p); }
static inline qvf qf_zero() { return _mm512_setzero_ps(); }
static inline qvf qf_load(const float* p) { return _mm512_loadu_ps(p); }
static inline qvf qf_set1(float v) { return _mm512_set1_ps(v); }
static inline qvf qf_fma(qvf a, qvf b, qvf c) { return _mm512_fmadd_ps(a, b, c); }
static inline qvf qf_mul(qvf a, qvf b) { return _mm512_mul_ps(a, b); }
static inline qvf qf_cvt(qvi a) { return _mm512_cvtepi32_ps(a); }
static inline qvi qi_sub1(qvi a, int32_t v) { return _mm512_sub_epi32(a, _mm512_set1_epi32(v)); }
static inline void qf_store(float* p, qvf v) { _mm512_storeu_ps(p, v); }
template <bool Q4> static inline qvi q_dot(qvi acc, qvi w, int32_t x4) { return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(x4)); }
template <bool Q4> static inline qvi q_block_end(qvi acc) { return acc; }
#else
// two groups of 8 rows a tile: 8 int16 sums of a 4-row tile in registers (one group: 78 -> two: 87 GMAC/s on one thread,
// 1.3x on two, gate|up at 32 rows on an AVX2 AMD EPYC; three spill)
constexpr int QG_NR = 8, QG_MR = 2;
typedef __m256i qvi; typedef __m256 qvf;
static inline qvi qi_zero() { return _mm256_setzero_si256(); }
static inline qvi qi_load(const uint8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
static inline qvf qf_zero() { return _mm256_setzero_ps(); }
static inline qvf qf_load(const float* p) { return _mm256_loadu_ps(p); }
static inline qvf qf_set1(float v) { return _mm256_set1_ps(v); }
static inline qvf qf_fma(qvf a, qvf b, qvf c) { return _mm256_fmadd_ps(a, b, c); }
static inline qvf qf_mul(qvf a, qvf b) { return _mm256_mul_ps(a, b); }
static inline qvf qf_cvt(qvi a) { return _mm256_cvtepi32_ps(a); }
static inline qvi qi_sub1(qvi a, int32_t v) { return _mm256_sub_epi32(a, _mm256_set1_epi32(v)); }
static inline void qf_store(float* p, qvf v) { _mm256_storeu_ps(p, v); }
#if XK_ISA == 2
template <bool Q4> static inline qvi q_dot(qvi acc, qvi w, int32_t x4) { return _mm256_dpbusd_avx_epi32(acc, w, _mm256_set1_epi32(x4)); }
template <bool Q4> static inline qvi q_block_end(qvi acc) { return acc; }
#else
template <bool Q4> static inline qvi q_dot(qvi acc, qvi w, int32_t x4) {
    const __m256i x = _mm256_set1_epi32(x4), ones = _mm256_set1_epi16(1);
    if (Q4) {                        // int16 sums: see q_block_end
        acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, x));
        __asm__("" : "+x"(acc));     // one running sum: GCC would otherwise keep the 8 products of a block apart to add them as a
        return acc;                  // tree, spilling them to the stack (loads, not vpmaddubsw, then bound the loop: 3x slower)
    }
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w)), ones));
}
// AVX2, INT4: a vpmaddubsw pair sum is at most 2 * 15 * 127 = 3810, so the 8 of a block add up in int16 lanes (<= 30480)
// and are widened once per block; INT8 pairs reach 2 * 127 * 127 and are widened every time.
template <bool Q4> static inline qvi q_block_end(qvi acc) { return Q4 ? _mm256_madd_epi16(acc, _mm256_set1_epi16(1)) : acc; }
#endif
#endif
constexpr int64_t QGEMM_MIN_ROWS = 3;         // this many input rows or more take the int8 GEMM (a8 linears, AVX2 builds)
constexpr bool QG_OFFSET = XK_ISA >= 2;        // INT8 codes stored as w + 128 (the vpdpbusd builds)
constexpr int64_t QG_ROWS = QG_NR * QG_MR;     // weight rows per task

// x [T, K] quantized: codes q[T][K], and per (row, block) the scale d, the block's dequantized sum and 128 * the sum of the codes
// With q2 set, the rounding residual x - d q quantized again the same way: codes q2, scales d2, offsets o2 (a second pass).
// oh, oh2: 128 * the sums of each block's two halves of codes (for INT8 weights in groups of 16, whose halves have their own scales)
struct QAct { int8_t* q; float* d; float* s; int32_t* o; int64_t K, nb; int8_t* q2 = nullptr; float* d2 = nullptr; int32_t* o2 = nullptr;
              int32_t* oh = nullptr; int32_t* oh2 = nullptr;
              int8_t* xv = nullptr; int8_t* xs = nullptr; float* dT = nullptr; float* sT = nullptr; };   // the AMX tiles' layouts of q, d, s (amx.h)

// Rows t0..t1 of x quantized into A (and the residual, when A.q2 is set)
static void quantize_rows(const float* x, int64_t t0, int64_t t1, QAct& A) {
    for (int64_t t = t0; t < t1; t++)
        for (int64_t b = 0; b < A.nb; b++) {
            const float* xb = x + t * A.K + b * 32; const int64_t i = t * A.nb + b;
            __m256 v[4] = {_mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8), _mm256_loadu_ps(xb + 16), _mm256_loadu_ps(xb + 24)};
            int32_t isum, hs[2]; int8_t* q = A.q + t * A.K + b * 32;
            const float d = quantize_block(v, q, &isum, hs);
            A.d[i] = d; A.o[i] = 128 * isum; A.s[i] = d * (float)isum;   // the block's sum as the integer product sees it
            if (A.oh) { A.oh[2 * i] = 128 * hs[0]; A.oh[2 * i + 1] = 128 * hs[1]; }
            if (!A.q2) continue;
            const __m256 vd = _mm256_set1_ps(d);
            __m256 r[4];
            for (int k = 0; k < 4; k++) {   // x - d q, rounded twice as the reference computes it: the barrier keeps it from becoming one FMA
                __m256 dq = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(q + 8 * k)))), vd);
                __asm__("" : "+x"(dq));
                r[k] = _mm256_sub_ps(v[k], dq);
            }
            const float d2 = quantize_block(r, A.q2 + t * A.K + b * 32, &isum, hs);
            A.d2[i] = d2; A.o2[i] = 128 * isum; A.s[i] += d2 * (float)isum;
            if (A.oh2) { A.oh2[2 * i] = 128 * hs[0]; A.oh2[2 * i + 1] = 128 * hs[1]; }
        }
}

// Block b of row `row` as 32 codes in column order (INT4: the nibbles unpacked; INT8 with QG_OFFSET: w + 128)
static inline __m256i qcodes32(const Lin& L, int64_t row, int64_t b) {
    if (L.kind == Q4) {     // byte j holds column 2j (low nibble) and 2j+1 (high): 16 bytes -> 32 codes in column order
        const __m128i m4 = _mm_set1_epi8(0x0f), v = _mm_loadu_si128((const __m128i*)(L.w4 + row * (L.K / 2) + b * 16));
        const __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
    }
    const __m256i a = _mm256_loadu_si256((const __m256i*)(L.w8 + row * L.K + b * 32));
    return QG_OFFSET ? _mm256_xor_si256(a, _mm256_set1_epi8((char)0x80)) : a;
}
#if XK_ISA >= 3
// 16 rows' 8 words each (rows[r]: row r's 8 consecutive 4-byte words) -> out[w][r] (8 x 16 words, 64 bytes per w): rows r and
// r + 8 share a register (its two 256-bit halves), so one 8 x 8 transpose (unpacks, then 128-bit lanes paired across
// registers) does both halves
static inline void transpose16x8_words(const __m256i* rows, uint8_t* out) {
    const __m512i lo_l = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi_l = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    __m512i z[8], u[8], v[8];
    for (int p = 0; p < 8; p++) z[p] = _mm512_inserti64x4(_mm512_castsi256_si512(rows[p]), rows[p + 8], 1);
    for (int p = 0; p < 8; p += 2) { u[p] = _mm512_unpacklo_epi32(z[p], z[p + 1]); u[p + 1] = _mm512_unpackhi_epi32(z[p], z[p + 1]); }
    for (int p = 0; p < 8; p += 4)
        for (int q = 0; q < 2; q++) { v[p + 2 * q] = _mm512_unpacklo_epi64(u[p + q], u[p + q + 2]); v[p + 2 * q + 1] = _mm512_unpackhi_epi64(u[p + q], u[p + q + 2]); }
    for (int w = 0; w < 4; w++) {
        _mm512_storeu_si512((void*)(out + w * 64), _mm512_permutex2var_epi64(v[w], lo_l, v[4 + w]));
        _mm512_storeu_si512((void*)(out + (w + 4) * 64), _mm512_permutex2var_epi64(v[w], hi_l, v[4 + w]));
    }
}
// qrepack's codes for 16 rows r0..r0+15 (all < N) at once: out[b][k4][r][4] is row r's codes 4 k4..4 k4+3 of block b, a 16 x 8
// transpose of 4-byte words per block; the scalar loop stored each word alone, and the repack took as long as the products
// it feeds at 32 activation rows.
static void qrepack_codes(const Lin& L, int64_t r0, int64_t nb, uint8_t* out) {
    for (int64_t b = 0; b < nb; b++) {
        __m256i rows[16];
        for (int r = 0; r < 16; r++) rows[r] = qcodes32(L, r0 + r, b);
        transpose16x8_words(rows, out + b * 8 * 64);
    }
}
#else
// The same for the 8 rows of an AVX2 group (QG_NR = 8): an 8 x 8 transpose of 4-byte words per block (unpacks of 32 and
// 64 bits, then 128-bit lanes paired across registers), out[b][k4][r][4], 32 bytes per k4
static void qrepack_codes(const Lin& L, int64_t r0, int64_t nb, uint8_t* out) {
    for (int64_t b = 0; b < nb; b++) {
        __m256i z[8], u[8], v[8];
        for (int r = 0; r < 8; r++) z[r] = qcodes32(L, r0 + r, b);
        for (int p = 0; p < 8; p += 2) { u[p] = _mm256_unpacklo_epi32(z[p], z[p + 1]); u[p + 1] = _mm256_unpackhi_epi32(z[p], z[p + 1]); }
        for (int p = 0; p < 8; p += 4)
            for (int q = 0; q < 2; q++) { v[p + 2 * q] = _mm256_unpacklo_epi64(u[p + q], u[p + q + 2]); v[p + 2 * q + 1] = _mm256_unpackhi_epi64(u[p + q], u[p + q + 2]); }
        // v[w] (w < 4): words w and w + 4 of rows 0-3 (its two 128-bit lanes); v[4 + w]: of rows 4-7
        uint8_t* ob = out + b * 8 * 32;
        for (int w = 0; w < 4; w++) {
            _mm256_storeu_si256((__m256i*)(ob + w * 32), _mm256_permute2x128_si256(v[w], v[4 + w], 0x20));
            _mm256_storeu_si256((__m256i*)(ob + (w + 4) * 32), _mm256_permute2x128_si256(v[w], v[4 + w], 0x31));
        }
    }
}
#endif
// Rows n0..n0+QG_ROWS of L (zero scales past N) repacked: codes wq[m][b][k4][r][4], scales ws[m][b][r], INT4 minimums wm[m][b][r]
// (INT8 in groups of 16: ws holds the scale of each block's first half, wm of its second)
static void qrepack(const Lin& L, int64_t n0, uint8_t* wq, float* ws, float* wm) {
    const int64_t nb = L.K / 32;
    bool done[QG_MR] = {}, scaled[QG_MR] = {};
    for (int m = 0; m < QG_MR; m++) {
        const int64_t r0 = n0 + m * QG_NR;
        if (r0 + QG_NR > L.N) continue;
        qrepack_codes(L, r0, nb, wq + m * nb * 32 * QG_NR); done[m] = true;
        if (L.s16 && r0 + QG_NR <= L.n16()) {   // INT4 with the plan's interleaved scales: a group's rows in one load
            float* gs = ws + m * nb * QG_NR; float* gm = wm + m * nb * QG_NR;
            for (int64_t b = 0; b < nb; b++) {
                const int64_t g = b >> L.bshift;
                const qvf sc = scales16(L.s16, r0, L.G, g);
                qf_store(gs + b * QG_NR, sc);             // mn_of: the minimum, or -8 s for symmetric INT4 (exact either way)
                qf_store(gm + b * QG_NR, mins16(L, r0, g, sc));
            }
            scaled[m] = true;
        }
    }
    for (int m = 0; m < QG_MR; m++) {
        if (done[m] && scaled[m]) continue;                      // the whole group done above
        uint8_t* gq = wq + m * nb * 32 * QG_NR; float* gs = ws + m * nb * QG_NR; float* gm = wm + m * nb * QG_NR;
        for (int64_t r = 0; r < QG_NR; r++) {
            const int64_t row = n0 + m * QG_NR + r;
            if (row >= L.N) {
                for (int64_t b = 0; b < nb; b++) {
                    gs[b * QG_NR + r] = gm[b * QG_NR + r] = 0.0f;
                    for (int k4 = 0; k4 < 8; k4++) std::memset(gq + (b * 8 + k4) * QG_NR * 4 + r * 4, 0, 4);
                }
                continue;
            }
            for (int64_t b = 0; b < nb; b++) {
                if (!done[m]) {
                    alignas(32) uint8_t c[32];
                    _mm256_store_si256((__m256i*)c, qcodes32(L, row, b));
                    for (int k4 = 0; k4 < 8; k4++) std::memcpy(gq + (b * 8 + k4) * QG_NR * 4 + r * 4, c + 4 * k4, 4);
                }
                const int64_t g = L.half ? 2 * b : b >> L.bshift;      // the block's group (groups of 16: its first half's)
                const float s = sc_of(L, row, g),                         // the INT4 minimum, met by each of its group's blocks' sums
                            mn = L.half ? sc_of(L, row, g + 1) : L.kind == Q4 ? mn_of(L, row, g) : 0.0f;
                gs[b * QG_NR + r] = s; gm[b * QG_NR + r] = mn;
            }
        }
    }
}

// One tile: the QG_MR groups of QG_NR repacked rows (a task) times activation rows j0..j0+RN; y rows are [N] apart, bias added,
// outputs n0.. up to N (a partial last group is written through a small buffer).
template <bool Q4, bool H, int RN, bool R2>
static void qmicro(const uint8_t* wq, const float* ws, const float* wm, const QAct& A, int64_t j0, float* y, int64_t N, int64_t n0, const float* bias) {
    const int64_t nb = A.nb, K = A.K;
    qvf acc[QG_MR][RN];
    for (int m = 0; m < QG_MR; m++) for (int j = 0; j < RN; j++) acc[m][j] = qf_zero();
    for (int64_t b = 0; b < nb; b++) {
        qvi ia[QG_MR][RN], ib[QG_MR][R2 ? RN : 1], ja[QG_MR][H ? RN : 1], jb[QG_MR][H && R2 ? RN : 1];   // ja, jb: second halves (H)
        for (int m = 0; m < QG_MR; m++) for (int j = 0; j < RN; j++) {
            ia[m][j] = qi_zero(); if (R2) ib[m][j] = qi_zero();
            if (H) { ja[m][j] = qi_zero(); if (R2) jb[m][j] = qi_zero(); }
        }
        const int8_t* xb = A.q + j0 * K + b * 32; const int8_t* xb2 = R2 ? A.q2 + j0 * K + b * 32 : nullptr;
#pragma GCC unroll 8
        for (int k4 = 0; k4 < 8; k4++) {
            int32_t x4[RN], x42[RN];
            for (int j = 0; j < RN; j++) { std::memcpy(&x4[j], xb + j * K + 4 * k4, 4); if (R2) std::memcpy(&x42[j], xb2 + j * K + 4 * k4, 4); }
            for (int m = 0; m < QG_MR; m++) {
                const qvi w = qi_load(wq + ((m * nb + b) * 8 + k4) * QG_NR * 4);
                if (H && k4 >= 4) for (int j = 0; j < RN; j++) { ja[m][j] = q_dot<Q4>(ja[m][j], w, x4[j]); if (R2) jb[m][j] = q_dot<Q4>(jb[m][j], w, x42[j]); }
                else for (int j = 0; j < RN; j++) { ia[m][j] = q_dot<Q4>(ia[m][j], w, x4[j]); if (R2) ib[m][j] = q_dot<Q4>(ib[m][j], w, x42[j]); }
            }
        }
        for (int m = 0; m < QG_MR; m++) {
            const qvf sv = qf_load(ws + (m * nb + b) * QG_NR);
            for (int j = 0; j < RN; j++) {
                const int64_t i = (j0 + j) * nb + b;
                if (H) {             // two groups of 16: each half's sum meets its own scale (and offset)
                    const qvf sv2 = qf_load(wm + (m * nb + b) * QG_NR), dd = qf_set1(A.d[i]);
                    qvi v = ia[m][j], v1 = ja[m][j];
                    if (QG_OFFSET) { v = qi_sub1(v, A.oh[2 * i]); v1 = qi_sub1(v1, A.oh[2 * i + 1]); }
                    acc[m][j] = qf_fma(qf_cvt(v1), qf_mul(sv2, dd), qf_fma(qf_cvt(v), qf_mul(sv, dd), acc[m][j]));
                    if (R2) {
                        const qvf d2 = qf_set1(A.d2[i]);
                        qvi u = ib[m][j], u1 = jb[m][j];
                        if (QG_OFFSET) { u = qi_sub1(u, A.oh2[2 * i]); u1 = qi_sub1(u1, A.oh2[2 * i + 1]); }
                        acc[m][j] = qf_fma(qf_cvt(u1), qf_mul(sv2, d2), qf_fma(qf_cvt(u), qf_mul(sv, d2), acc[m][j]));
                    }
                    continue;
                }
                qvi v = q_block_end<Q4>(ia[m][j]);
                if (!Q4 && QG_OFFSET) v = qi_sub1(v, A.o[i]);
                acc[m][j] = qf_fma(qf_cvt(v), qf_mul(sv, qf_set1(A.d[i])), acc[m][j]);
                if (R2) {
                    qvi v2 = q_block_end<Q4>(ib[m][j]);
                    if (!Q4 && QG_OFFSET) v2 = qi_sub1(v2, A.o2[i]);
                    acc[m][j] = qf_fma(qf_cvt(v2), qf_mul(sv, qf_set1(A.d2[i])), acc[m][j]);
                }
                if (Q4) acc[m][j] = qf_fma(qf_load(wm + (m * nb + b) * QG_NR), qf_set1(A.s[i]), acc[m][j]);
            }
        }
    }
    for (int m = 0; m < QG_MR; m++) {
        const int64_t c0 = n0 + m * QG_NR, nv = std::min<int64_t>(QG_NR, N - c0);
        if (nv <= 0) break;
        for (int j = 0; j < RN; j++) {
            float* yr = y + (j0 + j) * N + c0;
            alignas(64) float t[QG_NR];
            qf_store(t, acc[m][j]);
            for (int64_t r = 0; r < nv; r++) yr[r] = t[r] + (bias ? bias[c0 + r] : 0.0f);
        }
    }
}
template <bool Q4, bool H, bool R2>
static void qmicro_rn(int rn, const uint8_t* wq, const float* ws, const float* wm, const QAct& A, int64_t j0, float* y, int64_t N, int64_t n0, const float* bias) {
    switch (rn) {
    case 4: qmicro<Q4, H, 4, R2>(wq, ws, wm, A, j0, y, N, n0, bias); break;
    case 3: qmicro<Q4, H, 3, R2>(wq, ws, wm, A, j0, y, N, n0, bias); break;
    case 2: qmicro<Q4, H, 2, R2>(wq, ws, wm, A, j0, y, N, n0, bias); break;
    default: qmicro<Q4, H, 1, R2>(wq, ws, wm, A, j0, y, N, n0, bias); break;
    }
}

static thread_local avec<uint8_t> qw_buf;
static thread_local avec<float> qs_buf;

// One thread's share of several linears (all with a8 set) of the quantized input A: tasks of QG_ROWS weight rows taken from `next`
// in runs of consecutive ones (claim_run)
static void qgemm_part(const Lin* Ls, int nl, const QAct& A, int64_t T, float* const* ys, std::atomic<int64_t>& next) {
    const int64_t nb = A.nb;
    if ((int64_t)qw_buf.size() < QG_ROWS * nb * 32 + 64) qw_buf.resize(QG_ROWS * nb * 32 + 64);
    if ((int64_t)qs_buf.size() < 2 * QG_ROWS * nb) qs_buf.resize(2 * QG_ROWS * nb);
    uint8_t* wq = qw_buf.data(); float* ws = qs_buf.data(); float* wm = ws + QG_ROWS * nb;
    const int64_t ntask = row_tasks(Ls, nl, QG_ROWS);
    int64_t t0, t1;
    while (claim_run(next, ntask, team_size(), t0, t1)) for (int64_t task = t0; task < t1; task++) {
        int l; int64_t n0; task_rows(Ls, QG_ROWS, task, l, n0);
        const Lin& L = Ls[l];
        qrepack(L, n0, wq, ws, wm);
        for (int64_t j0 = 0; j0 < T; j0 += 4) {
            const int rn = (int)std::min<int64_t>(4, T - j0);
            const bool r2 = L.a8r && A.q2;
            if (L.kind == Q4) { if (r2) qmicro_rn<true, false, true>(rn, wq, ws, wm, A, j0, ys[l], L.N, n0, L.bias); else qmicro_rn<true, false, false>(rn, wq, ws, wm, A, j0, ys[l], L.N, n0, L.bias); }
            else if (L.half) { if (r2) qmicro_rn<false, true, true>(rn, wq, ws, wm, A, j0, ys[l], L.N, n0, L.bias); else qmicro_rn<false, true, false>(rn, wq, ws, wm, A, j0, ys[l], L.N, n0, L.bias); }
            else if (r2) qmicro_rn<false, false, true>(rn, wq, ws, wm, A, j0, ys[l], L.N, n0, L.bias); else qmicro_rn<false, false, false>(rn, wq, ws, wm, A, j0, ys[l], L.N, n0, L.bias);
        }
    }
}

// Scratch for a quantized input of T rows of K (K % 32 == 0)
struct QScratch {
    avec<int8_t> q, q2, xv, xs; avec<float> d, s, d2, dT, sT; avec<int32_t> o, o2, oh, oh2;
    QAct get(int64_t T, int64_t K, bool two) {   // two: room for the residual pass too
        const int64_t nb = K / 32, T16 = (T + 15) / 16 * 16;
        if ((int64_t)xv.size() < T16 * K) { xv.resize(T16 * K); xs.resize(T16 * K); dT.resize(T16 * nb); sT.resize(T16 * nb); }
        if ((int64_t)q.size() < T * K) q.resize(T * K);
        if ((int64_t)d.size() < T * nb) { d.resize(T * nb); s.resize(T * nb); o.resize(T * nb); oh.resize(2 * T * nb); }
        if (two && (int64_t)q2.size() < T * K) q2.resize(T * K);
        if (two && (int64_t)d2.size() < T * nb) { d2.resize(T * nb); o2.resize(T * nb); oh2.resize(2 * T * nb); }
        QAct A{q.data(), d.data(), s.data(), o.data(), K, nb};
        A.oh = oh.data(); A.xv = xv.data(); A.xs = xs.data(); A.dT = dT.data(); A.sT = sT.data();
        if (two) { A.q2 = q2.data(); A.d2 = d2.data(); A.o2 = o2.data(); A.oh2 = oh2.data(); }
        return A;
    }
};
static thread_local QScratch qact_buf;   // the calling thread's (concurrent linear() calls from several Python threads)

static inline bool all_a8(const Lin* Ls, int nl) { for (int l = 0; l < nl; l++) if (!Ls[l].a8) return false; return true; }
static inline bool any_a8r(const Lin* Ls, int nl) { for (int l = 0; l < nl; l++) if (Ls[l].a8r) return true; return false; }

#endif
