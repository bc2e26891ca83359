// ---------------------------------------------------------------- a Lin from raw pointers (python checks shapes and dtypes)
static Lin make_lin(int kind, int64_t N, int64_t K, int64_t G, const void* w, const void* scales, const void* mins, const float* bias, int a8) {
    Lin L; L.kind = kind; L.N = N; L.K = K; L.G = G < 1 ? 1 : G; L.gs = K / L.G; L.bias = bias;
    if (kind == F32) L.wf = (const float*)w;
    else if (kind == BF16) L.wb = (const uint16_t*)w;
    else if (kind == Q8_ROW) { L.w8 = (const int8_t*)w; L.srow = (const float*)scales; }
    else if (kind == Q8_GROUP) { L.w8 = (const int8_t*)w; L.sg = (const uint16_t*)scales; }
    else { L.w4 = (const uint8_t*)w; L.sg = (const uint16_t*)scales; L.mg = (const uint16_t*)mins; }
    L.a8 = a8 && a8_ok(L); L.a8r = L.a8 && a8 >= 2; L.half = L.a8 && kind == Q8_GROUP && L.gs == 16;
    while (L.a8 && (32 << L.bshift) < L.gs) L.bshift++;
    return L;
}

// Thread tid's share (of n) of several linears of x [T, K] on the row path: the rows of all the weights split over the threads,
// each row read once for all T inputs. Each thread prepares the inputs itself (O(T K), small next to the products): no barrier.
static thread_local Scratch prep_buf;
static thread_local std::vector<Prep> prep_vec;
// Whether an input prepared for linear a serves linear b as it is (q|k|v, gate|up: one input, one layout).
static inline bool same_prep(const Lin& a, const Lin& b) {
    return (a.kind == Q4) == (b.kind == Q4) && a.K == b.K && a.a8 == b.a8 && (a.kind != Q4 || a.G == b.G);
}
// Thread tid's rows (of n threads) of the linears Ls stacked as one matrix: rows r0..r1 (rows16_a8 takes groups of 16)
static inline void rows_share(const Lin* Ls, int nl, int tid, int n, int64_t& r0, int64_t& r1) {
    int64_t Ntot = 0; for (int l = 0; l < nl; l++) Ntot += Ls[l].N;
    split(Ntot, tid, n, r0, r1, XK_AVX2 ? 16 : 4);
}
// The weights (codes, scales, minimums) of thread tid's share of Ls on the row path, queued in pf_next: the next barriers'
// waits fetch them (a decode step's phases are short, and the thread that finishes first would otherwise leave the memory
// bus idle until the other does). A hint: a range a little off (the last rows' scales) costs nothing but a wasted fetch.
static void prefetch_share(const Lin* Ls, int nl, int tid, int n) {
    pf_next.clear();
    int64_t r0, r1; rows_share(Ls, nl, tid, n, r0, r1);
    for (int64_t l = 0, off = 0; l < nl; off += Ls[l].N, l++) {
        const Lin& L = Ls[l]; const int64_t a = std::max(r0, off) - off, b = std::min(r1, off + L.N) - off;
        if (a >= b) continue;
        if (L.kind == Q4) {             // rows a..c from the regrouped copy rows16_a8 reads, where there is one
            const int64_t c = L.w4r ? std::max(a, std::min(b, L.n16())) : a;
            if (c > a) pf_next.add(L.w4r + a * (L.K / 2), (c - a) * (L.K / 2));
            pf_next.add(L.w4 + c * (L.K / 2), (b - c) * (L.K / 2));
        }
        else if (L.kind == F32) pf_next.add(L.wf + a * L.K, (b - a) * L.K * 4);
        else if (L.kind == BF16) pf_next.add(L.wb + a * L.K, (b - a) * L.K * 2);
        else pf_next.add(L.w8 + a * L.K, (b - a) * L.K);
        // the interleaved copies ([N / 16][G][16]) hold the first n16() rows: blocks j0..j1 of 16 rows cover a..b there
        const int64_t j0 = a / 16, j1 = (std::min(b, L.n16()) + 15) / 16;
        if (L.kind == Q8_ROW) pf_next.add(L.srow + a, (b - a) * 4);
        else if (L.s16) pf_next.add(L.s16 + j0 * 16 * L.G, (j1 - j0) * 16 * L.G * 2);
        else if (L.sg) pf_next.add(L.sg + a * L.G, (b - a) * L.G * 2);
        if (L.m16) pf_next.add(L.m16 + j0 * 16 * L.G, (j1 - j0) * 16 * L.G * 2);
        else if (L.mg) pf_next.add(L.mg + a * L.G, (b - a) * L.G * 2);
    }
}
static void rows_part(const Lin* Ls, int nl, const float* x, int64_t T, float* const* ys, int tid, int n) {
    int64_t r0, r1; rows_share(Ls, nl, tid, n, r0, r1);
    if ((int64_t)prep_vec.size() < T) prep_vec.resize(T);
    Lin prev; bool have = false;      // the layout of the input prepared last (prepared once for the linears that share it)
    for (int64_t l = 0, off = 0; l < nl; off += Ls[l].N, l++) {
        Lin L = Ls[l]; const int64_t a = std::max(r0, off) - off, b = std::min(r1, off + L.N) - off;
        if (L.a8r) L.a8 = false;     // two int8 passes are for the GEMM; a few rows take the float dot products instead
        if (a >= b) continue;
        if (!have || !same_prep(prev, L)) {
            const int64_t pf = prep_floats(L); float* scratch = prep_buf.get(pf * T + 1);
            for (int64_t t = 0; t < T; t++) prepare(L, x + t * L.K, scratch + t * pf, prep_vec[t]);
            prev = L; have = true;
        }
#if XK_AVX2
        if (L.a8) {                  // int8 activations: the GEMM's arithmetic (rows4_a8), so either path gives the same bits
            int64_t r = a;
            if (L.s16) {             // 16 rows at a time where they start a group of the interleaved scales
                for (; r + 4 <= b && r % 16; r += 4) for (int64_t t = 0; t < T; t++) rows4_a8(L, r, prep_vec[t], ys[l] + t * L.N + r);
                for (; r + 16 <= b && r + 16 <= L.n16(); r += 16) for (int64_t t = 0; t < T; t++) rows16_a8(L, r, prep_vec[t], ys[l] + t * L.N + r);
            }
            for (; r + 4 <= b; r += 4) for (int64_t t = 0; t < T; t++) rows4_a8(L, r, prep_vec[t], ys[l] + t * L.N + r);
            for (; r < b; r++) for (int64_t t = 0; t < T; t++) ys[l][t * L.N + r] = row1_a8(L, r, prep_vec[t]);
            continue;
        }
#endif
        int64_t r = a;
#if XK_AVX2 && XK_ISA < 3
        if (rows_q4f_ok(L)) for (; r + 2 <= b; r += 2) for (int64_t t = 0; t < T; t++) rows_q4f_any<2>(L, r, prep_vec[t], ys[l] + t * L.N + r);
#endif
        for (; r < b; r++)
            for (int64_t t = 0; t < T; t++) ys[l][t * L.N + r] = row_dot(L, r, prep_vec[t]);
    }
}

// Linears of one input, any number of rows: the GEMM from GEMM_MIN_ROWS rows on (method 0), or as asked (1: rows, 2: GEMM;
// without AVX2 always rows). When every linear has int8 activations (a8) the GEMM is the int8 one, from QGEMM_MIN_ROWS rows.
// ys[l] is [T, N_l].
static void linear_any(const Lin* Ls, int nl, const float* x, int64_t T, float* const* ys, int nt, int method) {
#if XK_AVX2
    const bool a8 = all_a8(Ls, nl);
    if (method == 2 || (method == 0 && T >= (a8 ? QGEMM_MIN_ROWS : GEMM_MIN_ROWS))) {
        if (const int bk = a8 ? BF16_NONE : bf16_kind(Ls, nl, T)) { bf16_gemm_multi(bk, Ls, nl, x, T, ys, nt); return; }   // bf16 products
        if (a8) qgemm_multi(Ls, nl, x, T, ys, nt); else gemm_multi(Ls, nl, x, T, ys, nt);
        return;
    }
#endif
#pragma omp parallel num_threads(nthreads_ok(nt))
    {
#ifdef _OPENMP
        rows_part(Ls, nl, x, T, ys, omp_get_thread_num(), omp_get_num_threads());
#else
        rows_part(Ls, nl, x, T, ys, 0, 1);
#endif
    }
}

// The matrix-vector story: the same float32 y = W x written five ways (variant 0..4), for timing.
__attribute__((optimize("no-tree-vectorize"))) static void gemv_scalar(const float* W, const float* x, float* y, int64_t N, int64_t K) {
    for (int64_t n = 0; n < N; n++) { float s = 0; for (int64_t k = 0; k < K; k++) s += W[n * K + k] * x[k]; y[n] = s; }
}
__attribute__((optimize("no-tree-vectorize"))) static void gemv_tiled(const float* W, const float* x, float* y, int64_t N, int64_t K, int64_t r0, int64_t r1) {
    // 4 rows at a time share each load of x; 4 independent sums hide the add latency
    int64_t n = r0;
    for (; n + 4 <= r1; n += 4) {
        const float *w0 = W + n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K; float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int64_t k = 0; k < K; k++) { float xk = x[k]; s0 += w0[k] * xk; s1 += w1[k] * xk; s2 += w2[k] * xk; s3 += w3[k] * xk; }
        y[n] = s0; y[n + 1] = s1; y[n + 2] = s2; y[n + 3] = s3;
    }
    for (; n < r1; n++) { float s = 0; for (int64_t k = 0; k < K; k++) s += W[n * K + k] * x[k]; y[n] = s; }
}
static void gemv_simd(const float* W, const float* x, float* y, int64_t K, int64_t r0, int64_t r1) {
    for (int64_t n = r0; n < r1; n++) y[n] = dot_f32(W + n * K, x, K);
}
static void gemv_variant(const float* w, const float* xp, float* yp, int64_t N, int64_t K, int variant, int nt) {
    if (variant == 0) gemv_scalar(w, xp, yp, N, K);
    else if (variant == 1) gemv_tiled(w, xp, yp, N, K, 0, N);
    else if (variant == 2) gemv_simd(w, xp, yp, K, 0, N);
    else {
#pragma omp parallel num_threads(nthreads_ok(nt))
        {
#ifdef _OPENMP
            int tid = omp_get_thread_num(), n = omp_get_num_threads();
#else
            int tid = 0, n = 1;
#endif
            int64_t r0, r1; split(N, tid, n, r0, r1);
            gemv_simd(w, xp, yp, K, r0, r1);
        }
    }
}
