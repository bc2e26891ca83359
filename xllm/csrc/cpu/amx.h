// ---------------------------------------------------------------- AMX-INT8 tiles for the int8 GEMM (Sapphire Rapids and later)
// The same y = W . x_hat as qgemm_part, with the integer products done by tile instructions: one `tdpbusd` (INT4 codes,
// unsigned, times the signed activation codes) or `tdpbssd` (INT8 codes) multiplies a tile of 16 weight rows x 32 codes (one
// block of K) by a tile of the block's codes of 16 activation rows, 8192 products into 16 x 16 int32 sums in one instruction.
// - Orientation: the weights are the tile's rows (A, 16 rows x 32 bytes), so INT8 weights are read where they lie (a tile
//   load with the row stride; no repack at all) and INT4 rows are unpacked once a call into 16 rows x K bytes. The
//   activations are the B operand, "VNNI" order: for one block, 8 rows (4 codes each) x 16 activation rows x 4 bytes;
//   they are laid out once a call (`amx_pack_rows`), next to the scales transposed to [block][activation row].
// - A C tile is C[n][t] (16 weight rows x 16 activation rows). Its epilogue, per weight row n and block b, with lanes over t:
//   acc_n = fma(float(C[n]), s_nb * d_tb, acc_n), then (INT4) acc_n = fma(m_nb, d_tb sum(q)_tb, acc_n): the element
//   operations and their order are qmicro's, so the outputs have the same bits as the VNNI GEMM and the row path (the
//   integer sums are exact either way). INT8 in groups of 16 (`half`) takes two K=16 products per block, as qmicro does.
// - Not here: the residual second pass (int8x2, a8r), which keeps the VNNI GEMM.
// Linux asks a process to request the tile state before its first tile instruction (arch_prctl ARCH_REQ_XCOMP_PERM); where
// that is refused (an old kernel, a hypervisor that does not pass AMX through) the VNNI GEMM is used and `amx_state` says why.
#if XK_AMX
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>

constexpr int64_t AMX_MIN_ROWS = 16;   // this many activation rows or more take the tiles (fewer: most of a 16-row tile is padding)
static int amx_errno = 0;              // the errno of a refused request
static std::atomic<int> amx_on{-1};    // -1 not asked yet; 0 off (refused, or turned off); 1 on
static inline bool amx_granted() {
    static const bool ok = [] {
        long rc = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */);
        if (rc != 0) amx_errno = errno;
        return rc == 0;
    }();
    return ok;
}
static inline bool amx_active() {
    int s = amx_on.load(std::memory_order_relaxed);
    if (s < 0) { s = amx_granted() ? 1 : 0; amx_on.store(s); }
    return s == 1;
}

// Tile registers: 0, 5 and 6: C (16 x 16 int32); 1: weights, 16 rows x 32 bytes; 2: activations, 8 rows x 64 bytes;
// 3: weights, 16 x 16 bytes and 4: activations, 4 x 64 (a half block: INT8 groups of 16)
struct alignas(64) TileCfg { uint8_t palette = 1, start = 0, res[14] = {}; uint16_t colsb[16] = {}; uint8_t rows[16] = {}; };
static inline void amx_config() {
    TileCfg c;
    c.rows[0] = c.rows[5] = 16; c.colsb[0] = c.colsb[5] = 64;
    c.rows[1] = 16; c.colsb[1] = 32; c.rows[2] = 8; c.colsb[2] = 64;
    c.rows[3] = 16; c.colsb[3] = 16; c.rows[4] = 4; c.colsb[4] = 64;
    c.rows[6] = 16; c.colsb[6] = 64;
    _tile_loadconfig(&c);
}

// Activation rows t0..t1 of A (quantized; t0 a multiple of 16, t1 too or T) in the tiles' two orders, for each block 8 rows
// of 4 codes x 16 activation rows x 4 bytes: xv (INT8 weights) with the block's columns in order, row k4 holding columns
// 4 k4..4 k4 + 3; xs (INT4 weights) with the even columns in rows 0..3 and the odd ones in rows 4..7, as an unpacked INT4
// tile row holds them (amx_unpack_q4). Beside them the scales d and the block sums s transposed to dT, sT
// [tile][block][t % 16]. Rows T..T16 (T rounded up to 16) are zero (their outputs are dropped). A whole tile at a time:
// its 16 rows' 32 codes of a block are one 16 x 8 transpose of 4-byte words (transpose16x8_words, as qrepack_codes), after
// a byte shuffle that puts each row's even codes before its odd ones for xs.
static void amx_pack_rows(const QAct& A, int64_t t0, int64_t t1, int64_t T) {
    if (t0 >= t1) return;
    const int64_t nb = A.nb, K = A.K;
    const __m256i evens_odds = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                                0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t tile = t0 / 16; tile < (t1 + 15) / 16; tile++) {
        const int64_t nt = std::min<int64_t>(16, T - tile * 16);
        for (int64_t b = 0; b < nb; b++) {
            __m256i rows[16], eo[16];
            for (int r = 0; r < 16; r++) {
                rows[r] = r < nt ? _mm256_loadu_si256((const __m256i*)(A.q + (tile * 16 + r) * K + b * 32)) : _mm256_setzero_si256();
                // in each 128-bit half: its 8 even codes, then its 8 odd ones; then the quads in the order even, even, odd, odd
                eo[r] = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(rows[r], evens_odds), 0xd8);
            }
            transpose16x8_words(rows, (uint8_t*)A.xv + (tile * nb + b) * 512);
            transpose16x8_words(eo, (uint8_t*)A.xs + (tile * nb + b) * 512);
            for (int r = 0; r < 16; r++) {
                A.dT[(tile * nb + b) * 16 + r] = r < nt ? A.d[(tile * 16 + r) * nb + b] : 0.0f;
                A.sT[(tile * nb + b) * 16 + r] = r < nt ? A.s[(tile * 16 + r) * nb + b] : 0.0f;
            }
        }
    }
}

// INT4 rows n0..n0+16 of L unpacked to one byte a code, block by block: st[b][r][32], each block's tile 512 contiguous bytes
// (rows past N: zero). Block b's 16 packed bytes give its 32 bytes as the low nibbles (the even columns) then the high ones
// (the odd columns), 4 blocks at a time
static void amx_unpack_q4(const Lin& L, int64_t n0, uint8_t* st) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    const int64_t hb = L.K / 2;
    for (int64_t r = 0; r < 16; r++) {
        uint8_t* d = st + r * 32;                 // block b of row r at d + b * 512
        if (n0 + r >= L.N) { for (int64_t b = 0; b < L.K / 32; b++) std::memset(d + b * 512, 0, 32); continue; }
        const uint8_t* w = L.w4 + (n0 + r) * hb;
        int64_t i = 0;
        for (; i + 64 <= hb; i += 64) {
            const __m512i v = _mm512_loadu_si512((const void*)(w + i));
            const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            const __m512i a = _mm512_permutex2var_epi64(lo, first, hi), c = _mm512_permutex2var_epi64(lo, second, hi);
            uint8_t* o = d + (i / 16) * 512;
            _mm256_storeu_si256((__m256i*)o, _mm512_castsi512_si256(a)); _mm256_storeu_si256((__m256i*)(o + 512), _mm512_extracti64x4_epi64(a, 1));
            _mm256_storeu_si256((__m256i*)(o + 1024), _mm512_castsi512_si256(c)); _mm256_storeu_si256((__m256i*)(o + 1536), _mm512_extracti64x4_epi64(c, 1));
        }
        for (; i < hb; i += 16) {
            const __m128i v = _mm_loadu_si128((const __m128i*)(w + i)), m = _mm_set1_epi8(0x0f);
            uint8_t* o = d + (i / 16) * 512;
            _mm_storeu_si128((__m128i*)o, _mm_and_si128(v, m));
            _mm_storeu_si128((__m128i*)(o + 16), _mm_and_si128(_mm_srli_epi16(v, 4), m));
        }
    }
}

// Each block's scale (and INT4 minimum, or the second half's scale) of rows n0..n0+16: sc[r][b], mn[r][b] (zero past N).
// Groups of one block (GGUF Q4_1, Q8_0): 16 float16 values converted at a time.
static void amx_scales(const Lin& L, int64_t n0, float* sc, float* mn) {
    const int64_t nb = L.K / 32;
    const bool direct = !L.half && L.kind != Q8_ROW && L.G == nb;
    for (int64_t r = 0; r < 16; r++) {
        const int64_t row = n0 + r; float* s = sc + r * nb; float* m = mn + r * nb;
        if (row >= L.N) { std::memset(s, 0, nb * sizeof(float)); std::memset(m, 0, nb * sizeof(float)); continue; }
        if (direct) {
            const uint16_t* hs = L.sg + row * L.G; const uint16_t* hm = L.mg ? L.mg + row * L.G : nullptr;
            int64_t b = 0;
            for (; b + 16 <= nb; b += 16) {
                const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(hs + b)));
                _mm512_storeu_ps(s + b, v);
                if (L.kind == Q4) _mm512_storeu_ps(m + b, hm ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(hm + b))) : _mm512_mul_ps(v, _mm512_set1_ps(-8.0f)));
            }
            for (; b < nb; b++) { s[b] = sc_of(L, row, b); m[b] = L.kind == Q4 ? mn_of(L, row, b) : 0.0f; }
            continue;
        }
        for (int64_t b = 0; b < nb; b++) {
            const int64_t g = L.half ? 2 * b : b >> L.bshift;
            s[b] = sc_of(L, row, g);
            m[b] = L.half ? sc_of(L, row, g + 1) : L.kind == Q4 ? mn_of(L, row, g) : 0.0f;
        }
    }
}

// Block b's products of a weight tile (row stride ws bytes) and an activation tile into C tile 0, 5 or 6, then stored to c.
// (The tile intrinsics take register numbers as literals: a macro, one expansion per C tile.)
#define AMX_DOT(Q4, C, wt, ws, xb) do { _tile_loadd(1, wt, ws); _tile_loadd(2, xb, 64); _tile_zero(C);                    \
                                        if (Q4) _tile_dpbusd(C, 1, 2); else _tile_dpbssd(C, 1, 2); } while (0)
// r[i][j] -> r[j][i], 16 x 16 floats in registers: unpack pairs, then 2 x 2 blocks, then the 128-bit lanes twice
static inline void transpose16(__m512 (&r)[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) { t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]); t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]); }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88); t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88); t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88); r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88); r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xdd);
    }
}
// acc (lanes over activation rows) to y rows [N] apart, transposed in registers: outputs of weight rows n0.. (up to N),
// activation rows tile*16.. (up to T), bias added
static inline void amx_store(__m512 (&acc)[16], int64_t tile, int64_t T, float* y, int64_t N, int64_t n0, const float* bias) {
    transpose16(acc);                 // acc[t]: activation row tile * 16 + t, lanes over weight rows n0..n0+16
    const int64_t nt = std::min<int64_t>(16, T - tile * 16), nr = std::min<int64_t>(16, N - n0);
    const __mmask16 m = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + n0) : _mm512_setzero_ps();
    for (int64_t t = 0; t < nt; t++) _mm512_mask_storeu_ps(y + (tile * 16 + t) * N + n0, m, _mm512_add_ps(acc[t], bv));
}

// Weight rows n0..n0+16 (block b's tile at `wt + b bs`, row stride `ws` bytes) times activation tile `tile`. Three C tiles
// in turn, so that a product is issued two blocks and stored one block before its epilogue reads it: the tile unit, the
// stores and the vector units overlap instead of waiting on each other. The epilogue, per weight row r and block b with lanes
// over the 16 activation rows: acc_r = fma(float(C[r]), s_rb * d_b, acc_r), then (INT4) acc_r = fma(m_rb, d_b sum(q)_b, acc_r).
// - The accumulators are 16 named values: GCC kept an array of them in memory (a store and a load per row and block).
// - The C tile is stored by this file's own `tilestored`, which names the 1 KB it writes: GCC's `_tile_stored` clobbers all
//   memory, and that too sent the accumulators to the stack. (GCC's tile loads name no memory at all: the barrier on entry
//   keeps the stores that laid out the weights and activations before them.)
template <bool Q4>
static void amx_tile(const uint8_t* wt, int64_t ws, int64_t bs, const float* sc, const float* mn, const QAct& A, int64_t tile, int64_t T,
                     float* y, int64_t N, int64_t n0, const float* bias) {
    const int64_t nb = A.nb; const int8_t* xv = (Q4 ? A.xs : A.xv) + tile * nb * 512;
    const float *dT = A.dT + tile * nb * 16, *sT = A.sT + tile * nb * 16;
    alignas(64) int32_t c[3][16 * 16];
    __asm__ volatile("" ::: "memory");
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
#define AMX_ROW(r, A) do { const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512((const void*)(cb + r * 16)));         \
                           A = _mm512_fmadd_ps(v, _mm512_mul_ps(_mm512_set1_ps(sb[r * nb]), dv), A);                     \
                           if (Q4) A = _mm512_fmadd_ps(_mm512_set1_ps(mb[r * nb]), sv, A); } while (0)
#define AMX_ISSUE(C, b) do { if ((b) < nb) AMX_DOT(Q4, C, wt + (b) * bs, ws, xv + (b) * 512); } while (0)
#define AMX_STORE(C, b, buf) do { if ((b) < nb) __asm__ volatile("tilestored %%tmm" #C ", (%1,%2,1)" : "=m"(*(int32_t(*)[256])(buf)) : "r"((void*)(buf)), "r"((long)64)); } while (0)
#define AMX_EPI(b, buf) do { if ((b) < nb) { const int32_t* cb = buf; const float* sb = sc + (b); const float* mb = mn + (b);               \
        const __m512 dv = _mm512_loadu_ps(dT + (b) * 16), sv = _mm512_loadu_ps(sT + (b) * 16);                                        \
        AMX_ROW(0, a0); AMX_ROW(1, a1); AMX_ROW(2, a2); AMX_ROW(3, a3); AMX_ROW(4, a4); AMX_ROW(5, a5); AMX_ROW(6, a6); AMX_ROW(7, a7); \
        AMX_ROW(8, a8); AMX_ROW(9, a9); AMX_ROW(10, a10); AMX_ROW(11, a11); AMX_ROW(12, a12); AMX_ROW(13, a13); AMX_ROW(14, a14); AMX_ROW(15, a15); } } while (0)
    AMX_ISSUE(0, 0); AMX_ISSUE(5, 1); AMX_STORE(0, 0, c[0]);
    for (int64_t b = 0; b < nb; b += 3) {
        AMX_ISSUE(6, b + 2); AMX_STORE(5, b + 1, c[1]); AMX_EPI(b, c[0]);
        AMX_ISSUE(0, b + 3); AMX_STORE(6, b + 2, c[2]); AMX_EPI(b + 1, c[1]);
        AMX_ISSUE(5, b + 4); AMX_STORE(0, b + 3, c[0]); AMX_EPI(b + 2, c[2]);
    }
#undef AMX_ISSUE
#undef AMX_STORE
#undef AMX_EPI
#undef AMX_ROW
    __m512 acc[16] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15};
    amx_store(acc, tile, T, y, N, n0, bias);
}
// INT8 in groups of 16: two K=16 products a block, each half's sum meeting its own scale (sc: first half's, mn: second's)
static void amx_tile_half(const uint8_t* wt, int64_t ws, const float* sc, const float* mn, const QAct& A, int64_t tile, int64_t T,
                          float* y, int64_t N, int64_t n0, const float* bias) {
    const int64_t nb = A.nb;
    alignas(64) int32_t c[2][16 * 16];
    __asm__ volatile("" ::: "memory");   // GCC's tile loads name no memory: the stores that laid out wt and A.xv are made before them
    __m512 acc[16];
    for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const int8_t* xb = A.xv + (tile * nb + b) * 512;
        _tile_zero(0); _tile_zero(5);
        _tile_loadd(3, wt + b * 32, ws); _tile_loadd(4, xb, 64); _tile_dpbssd(0, 3, 4);
        _tile_loadd(3, wt + b * 32 + 16, ws); _tile_loadd(4, xb + 256, 64); _tile_dpbssd(5, 3, 4);
        _tile_stored(0, c[0], 64); _tile_stored(5, c[1], 64);
        const __m512 dv = _mm512_loadu_ps(A.dT + (tile * nb + b) * 16);
        for (int r = 0; r < 16; r++) {
            const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512((const void*)(c[0] + r * 16)));
            const __m512 v1 = _mm512_cvtepi32_ps(_mm512_load_si512((const void*)(c[1] + r * 16)));
            acc[r] = _mm512_fmadd_ps(v1, _mm512_mul_ps(_mm512_set1_ps(mn[r * nb + b]), dv),
                                     _mm512_fmadd_ps(v, _mm512_mul_ps(_mm512_set1_ps(sc[r * nb + b]), dv), acc[r]));
        }
    }
    amx_store(acc, tile, T, y, N, n0, bias);
}

static thread_local avec<uint8_t> amx_stage;
static thread_local avec<float> amx_sc;

// One thread's share of several linears (all a8, none a8r) of A, packed by amx_pack_rows: tasks of 16 weight rows from `next`
static void amx_gemm_part(const Lin* Ls, int nl, const QAct& A, int64_t T, float* const* ys, std::atomic<int64_t>& next) {
    const int64_t nb = A.nb, ntile = (T + 15) / 16;
    if ((int64_t)amx_stage.size() < 16 * A.K) amx_stage.resize(16 * A.K);
    if ((int64_t)amx_sc.size() < 32 * nb) amx_sc.resize(32 * nb);
    float* sc = amx_sc.data(); float* mn = sc + 16 * nb;
    const int64_t ntask = row_tasks(Ls, nl, 16);
    amx_config();
    // the following task is claimed when this one starts, and its weights prefetched (to L2) while this one computes
    for (int64_t task = next.fetch_add(1), following; task < ntask; task = following) {
        following = next.fetch_add(1);
        int l; int64_t n0; task_rows(Ls, 16, task, l, n0);
        const Lin& L = Ls[l];
        if (following < ntask) {
            int fl; int64_t f0; task_rows(Ls, 16, following, fl, f0);
            const Lin& F = Ls[fl]; const int64_t rows = std::min<int64_t>(16, F.N - f0);
            const char* p = F.kind == Q4 ? (const char*)(F.w4 + f0 * (F.K / 2)) : (const char*)(F.w8 + f0 * F.K);
            const int64_t bytes = rows * (F.kind == Q4 ? F.K / 2 : F.K);
            for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
        }
        amx_scales(L, n0, sc, mn);
        const uint8_t* wt; int64_t ws = L.K;
        if (L.kind == Q4) { amx_unpack_q4(L, n0, amx_stage.data()); wt = amx_stage.data(); }
        else if (n0 + 16 <= L.N) wt = (const uint8_t*)(L.w8 + n0 * L.K);      // INT8: the tile reads the weights where they lie
        else {                                                                  // a last partial tile: its rows copied, the rest zero
            std::memset(amx_stage.data(), 0, 16 * L.K);
            std::memcpy(amx_stage.data(), L.w8 + n0 * L.K, (L.N - n0) * L.K); wt = amx_stage.data();
        }
        for (int64_t tile = 0; tile < ntile; tile++) {
            if (L.kind == Q4) amx_tile<true>(wt, 32, 512, sc, mn, A, tile, T, ys[l], L.N, n0, L.bias);
            else if (L.half) amx_tile_half(wt, ws, sc, mn, A, tile, T, ys[l], L.N, n0, L.bias);
            else amx_tile<false>(wt, ws, 32, sc, mn, A, tile, T, ys[l], L.N, n0, L.bias);
        }
    }
    _tile_release();
}

// ---- bfloat16 weights: AMX-BF16 tiles (`tdpbf16ps`), float32 sums
// The weights are the tiles' rows again, 16 rows x 32 values (64 bytes) read where they lie; the activations are rounded to
// bfloat16 (nearest even) once per call and laid out in pairs, xb[tile][k / 2][t % 16][2]. A product adds 16 x 16 x 32
// multiply-adds in float32 straight into its C tile, over all of K: no per-block epilogue here (one scale-free sum), only the
// transposed store. Unlike the float32 row path and GEMM (which multiply the exact float32 activations), the activations
// carry bfloat16's 8 bits -- the arithmetic of a bfloat16 model in torch or vLLM -- so this is for bf16 weights from
// AMX_MIN_ROWS rows on, where the GEMM is compute-bound; decode steps keep the float32 activations of the row path.
#if XK_AMX && defined(__AMX_BF16__) && defined(__AVX512BF16__)
#define XK_AMX_BF16 1
// Rows t0..t1 of x [T, K] rounded to bfloat16 into xb (rows T..T16 zero; the thread whose share ends at T writes them)
static void amx_bf16_pack(const float* x, int64_t K, int64_t t0, int64_t t1, int64_t T, uint16_t* xb) {
    const int64_t end = t0 < T && t1 == T ? (T + 15) / 16 * 16 : t1;
    for (int64_t t = t0; t < end; t++) {
        uint32_t* dst = (uint32_t*)(xb + (t / 16) * 16 * K) + t % 16;    // the pair k / 2 at dst[(k / 2) * 16]
        if (t >= T) { for (int64_t kk = 0; kk < K / 2; kk++) dst[kk * 16] = 0; continue; }
        for (int64_t k = 0; k < K; k += 16) {
            alignas(32) uint32_t pr[8];
            _mm256_store_si256((__m256i*)pr, (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + t * K + k)));
            for (int i = 0; i < 8; i++) dst[(k / 2 + i) * 16] = pr[i];
        }
    }
}
// One thread's share of several bf16 linears of xb: tasks of 16 weight rows from `next`, each times every activation tile
static void amx_bf16_part(const Lin* Ls, int nl, const uint16_t* xb, int64_t T, float* const* ys, std::atomic<int64_t>& next) {
    const int64_t K = Ls[0].K, ntile = (T + 15) / 16;
    if ((int64_t)amx_stage.size() < 32 * K) amx_stage.resize(32 * K);
    TileCfg c;
    c.rows[0] = c.rows[1] = c.rows[2] = 16; c.colsb[0] = c.colsb[1] = c.colsb[2] = 64;   // C, weights, activations
    _tile_loadconfig(&c);
    const int64_t ntask = row_tasks(Ls, nl, 16);
    alignas(64) float cb[16 * 16];
    for (int64_t task = next.fetch_add(1); task < ntask; task = next.fetch_add(1)) {
        int l; int64_t n0; task_rows(Ls, 16, task, l, n0);
        const Lin& L = Ls[l];
        const uint16_t* wt = L.wb + n0 * K;
        if (n0 + 16 > L.N) {                                   // a last partial tile: its rows copied, the rest zero
            uint16_t* st = (uint16_t*)amx_stage.data();
            std::memset(st, 0, 16 * K * 2); std::memcpy(st, wt, (L.N - n0) * K * 2); wt = st;
            __asm__ volatile("" ::: "memory");   // the copy made before the tile loads read it (GCC's name no memory)
        }
        for (int64_t tile = 0; tile < ntile; tile++) {
            const uint16_t* xt = xb + tile * 16 * K;
            _tile_zero(0);
            for (int64_t kb = 0; kb < K / 32; kb++) {
                _tile_loadd(1, wt + kb * 32, K * 2); _tile_loadd(2, xt + kb * 512, 64); _tile_dpbf16ps(0, 1, 2);
            }
            _tile_stored(0, cb, 64);
            __m512 acc[16];
            for (int r = 0; r < 16; r++) acc[r] = _mm512_load_ps(cb + r * 16);
            amx_store(acc, tile, T, ys[l], L.N, n0, L.bias);
        }
    }
    _tile_release();
}
static inline bool amx_bf16_use(const Lin* Ls, int nl, int64_t T) {
    if (T < AMX_MIN_ROWS || !amx_active() || Ls[0].K % 32) return false;
    for (int l = 0; l < nl; l++) if (Ls[l].kind != BF16) return false;
    return true;
}
#else
#define XK_AMX_BF16 0
static inline bool amx_bf16_use(const Lin*, int, int64_t) { return false; }
#endif

// Whether these linears of T rows take the tiles: AMX granted and on, enough rows, no residual pass
static inline bool amx_use(const Lin* Ls, int nl, int64_t T) {
    if (T < AMX_MIN_ROWS || !amx_active()) return false;
    for (int l = 0; l < nl; l++) if (Ls[l].a8r) return false;
    return true;
}
#else
static inline bool amx_use(const Lin*, int, int64_t) { return false; }
#define XK_AMX_BF16 0
static inline bool amx_bf16_use(const Lin*, int, int64_t) { return false; }
#endif

#if XK_AVX2
// The whole int8 GEMM: x quantized once (and laid out for the tiles when they take it), then one parallel region
static void qgemm_multi(const Lin* Ls, int nl, const float* x, int64_t T, float* const* ys, int nt) {
    QAct A = qact_buf.get(T, Ls[0].K, any_a8r(Ls, nl));
    quantize_rows(x, 0, T, A);
    std::atomic<int64_t> next{0};
#if XK_AMX
    if (amx_use(Ls, nl, T)) {
        amx_pack_rows(A, 0, T, T);
#pragma omp parallel num_threads(nthreads_ok(nt))
        amx_gemm_part(Ls, nl, A, T, ys, next);
        return;
    }
#endif
#pragma omp parallel num_threads(nthreads_ok(nt))
    qgemm_part(Ls, nl, A, T, ys, next);
}
#endif

// ---- bfloat16 weights without AMX: AVX512-BF16 `vdpbf16ps` (AMD Zen 4 and later, Cooper Lake), float32 sums
// The tiles' arithmetic on vectors, for CPUs with avx512_bf16 and no AMX-BF16 tiles granted: activations rounded to bfloat16
// (nearest even) once per call, row by row; weights repacked per task of 32 rows so that one vector holds one pair of
// columns of 16 rows (a 16 x 8 transpose of 4-byte pairs, as qrepack_codes); `vdpbf16ps` with one activation pair broadcast
// adds two products to each row's lane. A tile of 2 x 16 weight rows x 4 activation rows: per pair of columns two weight
// loads, four broadcasts, eight dot products; each output one lane's float32 sum over all of K in column order, so neither
// the thread count nor the other rows change a bit. From BF16DP_MIN_ROWS rows (compute-bound there); fewer rows keep the
// float32 activations of the row path, as with the tiles.
#if XK_ISA >= 3 && defined(__AVX512BF16__)
#define XK_AVX512_BF16 1
constexpr int64_t BF16DP_MIN_ROWS = 16;
static std::atomic<int> bf16dp_on{1};   // xk_bf16_dot turns it off (the float32 GEMM then: the float32 copy's bits)
static inline bool bf16dp_use(const Lin* Ls, int nl, int64_t T) {
    if (T < BF16DP_MIN_ROWS || !bf16dp_on.load(std::memory_order_relaxed) || Ls[0].K % 32) return false;
    for (int l = 0; l < nl; l++) if (Ls[l].kind != BF16) return false;
    return true;
}
// Rows t0..t1 of x [T, K] rounded to bfloat16, row-major: xb[t][k]
static void bf16dp_pack(const float* x, int64_t K, int64_t t0, int64_t t1, uint16_t* xb) {
    for (int64_t t = t0; t < t1; t++)
        for (int64_t k = 0; k < K; k += 32)
            _mm512_storeu_si512((void*)(xb + t * K + k), (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + t * K + k + 16), _mm512_loadu_ps(x + t * K + k)));
}
// Weight rows n0..n0+31 of a bf16 linear (zero past N) as wp[m][k / 2][16] pairs
static void bf16dp_repack(const Lin& L, int64_t n0, uint32_t* wp) {
    const int64_t K = L.K;
    for (int m = 0; m < 2; m++) {
        uint8_t* out = (uint8_t*)(wp + m * (K / 2) * 16);
        for (int64_t c = 0; c < K; c += 16) {                     // 16 columns = 8 pairs a pass
            __m256i rows[16];
            for (int r = 0; r < 16; r++) {
                const int64_t row = n0 + m * 16 + r;
                rows[r] = row < L.N ? _mm256_loadu_si256((const __m256i*)(L.wb + row * K + c)) : _mm256_setzero_si256();
            }
            transpose16x8_words(rows, out + (c / 2) * 64);
        }
    }
}
template <int RN>
static void bf16dp_micro(const uint32_t* wp, const uint16_t* xb, int64_t K, int64_t j0, float* y, int64_t N, int64_t n0, const float* bias) {
    __m512 acc[2][RN];
    for (int m = 0; m < 2; m++) for (int j = 0; j < RN; j++) acc[m][j] = _mm512_setzero_ps();
    const uint32_t* x = (const uint32_t*)(xb + j0 * K);           // activation row j's pair p at x[j * K / 2 + p]
    for (int64_t p = 0; p < K / 2; p++) {
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512((const void*)(wp + p * 16)), w1 = (__m512bh)_mm512_loadu_si512((const void*)(wp + (K / 2 + p) * 16));
        for (int j = 0; j < RN; j++) {
            const __m512bh xj = (__m512bh)_mm512_set1_epi32((int)x[j * (K / 2) + p]);
            acc[0][j] = _mm512_dpbf16_ps(acc[0][j], w0, xj); acc[1][j] = _mm512_dpbf16_ps(acc[1][j], w1, xj);
        }
    }
    for (int m = 0; m < 2; m++) {
        const int64_t c0 = n0 + m * 16, nv = std::min<int64_t>(16, N - c0);
        if (nv <= 0) break;
        for (int j = 0; j < RN; j++) {
            alignas(64) float t[16]; _mm512_store_ps(t, acc[m][j]);
            float* yr = y + (j0 + j) * N + c0;
            for (int64_t r = 0; r < nv; r++) yr[r] = t[r] + (bias ? bias[c0 + r] : 0.0f);
        }
    }
}
static thread_local std::vector<uint32_t> bf16dp_w;
// The next task's weight rows, prefetched to L2 in `slices` equal parts, one after each micro-tile of the current task:
// the repack otherwise read its 32 row streams from memory at latency, and the products waited on them. The tasks are
// dealt in runs of consecutive ones (claim_run), so within a run the next task is this thread's already and nothing
// more is held; the last of a run prefetches the first task not yet claimed, which this thread's next run starts with
// unless another thread claims it first (then the prefetch was for nothing, and nothing else is lost). Gate|up of the
// default model's bfloat16 copy, 32 rows, 30 copies (106 MB) read in turn, on a Zen 4, two threads: 0.57 -> 0.47 ms
// with a prefetch (0.38 ms with the weights in cache), in an earlier build that claimed one task ahead; the runs as here,
// 0.42-0.49 in the same harness. The same prefetch of the float32 GEMM's next block did nothing there,
// so it has none. Changes no arithmetic.
struct SliceFetch {
    const char* p = nullptr; int64_t bytes = 0, at = 0, slices = 1, done = 0;
    void start(const void* q, int64_t b, int64_t s) { p = (const char*)q; bytes = b; at = 0; slices = std::max<int64_t>(1, s); done = 0; }
    void step() {   // (past `slices` steps: nothing more)
        const int64_t end = std::min(bytes, bytes * ++done / slices);
        for (; at < end; at += 64) _mm_prefetch(p + at, _MM_HINT_T1);
    }
};
// One thread's share of several bf16 linears of xb [T, K]: tasks of 32 weight rows, in runs from `next` (claim_run), each
// times every activation row, the next task's rows prefetched meanwhile (SliceFetch)
static void bf16dp_part(const Lin* Ls, int nl, const uint16_t* xb, int64_t T, float* const* ys, std::atomic<int64_t>& next) {
    const int64_t K = Ls[0].K, tiles = T / 4 + T % 4;      // micro-tiles a task: the prefetch's slices
    if ((int64_t)bf16dp_w.size() < K * 16) bf16dp_w.resize(K * 16);
    const int64_t ntask = row_tasks(Ls, nl, 32);
    SliceFetch pf;
    int64_t t0, t1;
    while (claim_run(next, ntask, team_size(), t0, t1)) for (int64_t task = t0; task < t1; task++) {
        int l; int64_t n0; task_rows(Ls, 32, task, l, n0);
        const Lin& L = Ls[l];
        // the next of this run, else the next one unclaimed (a guess: this thread's next run starts there unless another takes it)
        const int64_t nt = task + 1 < t1 ? task + 1 : next.load(std::memory_order_relaxed);
        if (nt < ntask) { int fl; int64_t f0; task_rows(Ls, 32, nt, fl, f0); pf.start(Ls[fl].wb + f0 * K, std::min<int64_t>(32, Ls[fl].N - f0) * K * 2, tiles); }
        else pf.start(nullptr, 0, 1);
        bf16dp_repack(L, n0, bf16dp_w.data());
        int64_t j0 = 0;
        for (; j0 + 4 <= T; j0 += 4) { bf16dp_micro<4>(bf16dp_w.data(), xb, K, j0, ys[l], L.N, n0, L.bias); pf.step(); }
        for (; j0 < T; j0++) { bf16dp_micro<1>(bf16dp_w.data(), xb, K, j0, ys[l], L.N, n0, L.bias); pf.step(); }
    }
}
#else
#define XK_AVX512_BF16 0
#endif

// ---- bfloat16 products, whichever the CPU has: one dispatch for linear_any and the plan
enum { BF16_NONE = 0, BF16_TILES = 1, BF16_DOT = 2 };
// What multiplies these T rows of bf16 linears: AMX-BF16 tiles, else AVX512-BF16 dot products, else nothing (the float32 GEMM)
static inline int bf16_kind(const Lin* Ls, int nl, int64_t T) {
    if (amx_bf16_use(Ls, nl, T)) return BF16_TILES;
#if XK_AVX512_BF16
    if (bf16dp_use(Ls, nl, T)) return BF16_DOT;
#endif
    return BF16_NONE;
}
// Rows t0..t1 of x rounded to bf16 and laid out for `kind` into xb ((T + 15) / 16 * 16 * K values hold either layout)
static void bf16_pack(int kind, const float* x, int64_t K, int64_t t0, int64_t t1, int64_t T, uint16_t* xb) {
    (void)kind; (void)x; (void)K; (void)t0; (void)t1; (void)T; (void)xb;
#if XK_AMX_BF16
    if (kind == BF16_TILES) amx_bf16_pack(x, K, t0, t1, T, xb);
#endif
#if XK_AVX512_BF16
    if (kind == BF16_DOT) bf16dp_pack(x, K, t0, t1, xb);
#endif
}
// One thread's share of the products, tasks from `next`
static void bf16_part(int kind, const Lin* Ls, int nl, const uint16_t* xb, int64_t T, float* const* ys, std::atomic<int64_t>& next) {
    (void)kind; (void)Ls; (void)nl; (void)xb; (void)T; (void)ys; (void)next;
#if XK_AMX_BF16
    if (kind == BF16_TILES) amx_bf16_part(Ls, nl, xb, T, ys, next);
#endif
#if XK_AVX512_BF16
    if (kind == BF16_DOT) bf16dp_part(Ls, nl, xb, T, ys, next);
#endif
}
static thread_local std::vector<uint16_t> bf16_xb;
// The whole bf16 GEMM of `kind`: x rounded and laid out once, then one parallel region
static void bf16_gemm_multi(int kind, const Lin* Ls, int nl, const float* x, int64_t T, float* const* ys, int nt) {
    const int64_t K = Ls[0].K;
    if ((int64_t)bf16_xb.size() < (T + 15) / 16 * 16 * K) bf16_xb.resize((T + 15) / 16 * 16 * K);
    const uint16_t* xb = bf16_xb.data();     // the calling thread's buffer (bf16_xb is thread_local: taken before the region)
    bf16_pack(kind, x, K, 0, T, T, bf16_xb.data());
    std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(nthreads_ok(nt))
    bf16_part(kind, Ls, nl, xb, T, ys, next);
}
