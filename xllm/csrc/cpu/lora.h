// ---------------------------------------------------------------- LoRA: each row's own adapter, added to a linear's output
// y[t] += s * (x[t] A_s^T) B_s^T for row t of adapter slot s (slot -1: the base alone, nothing added). A linear's adapters are
// stacked by slot as the torch side keeps them (LoRALinear's buffers): A [S, R, K] and B transposed, Bt [S, R, N], R the largest
// rank (an adapter of rank r uses its slot's first r rows; a slot that does not adapt this linear holds a zero A).
struct LoraW { const float* A = nullptr; const float* Bt = nullptr; int64_t S = 0, R = 0; };

// A step's rows, gathered as Punica's SGMV does: the adapter rows grouped by slot (`order`: each slot's rows in row order), one
// segment per slot used, each slot's rank and scale. Nothing is merged into the weights; the base rows are skipped.
struct LoraRows {
    std::vector<int64_t> order;        // the rows with an adapter, grouped by slot
    std::vector<int64_t> seg;          // segment i: rows order[seg[3i]..seg[3i+1]), slot seg[3i+2]
    std::vector<int64_t> items;        // prefix sums over the segments of rows x ceil(rank / 4): the shrink's work, split over threads
    std::vector<int> rank; std::vector<float> scale;
    int64_t N = 0;                     // the rows these are for (0: no adapter rows in the step)
    void set(int64_t n, const int64_t* slots, int64_t S, const int* ranks, const float* scales) {
        order.clear(); seg.clear(); items.assign(1, 0); rank.assign(ranks, ranks + S); scale.assign(scales, scales + S); N = 0;
        for (int64_t s = 0; s < S; s++) {
            const int64_t a = (int64_t)order.size();
            if (rank[s] > 0) for (int64_t r = 0; r < n; r++) if (slots[r] == s) order.push_back(r);
            if ((int64_t)order.size() == a) continue;
            seg.push_back(a); seg.push_back((int64_t)order.size()); seg.push_back(s);
            items.push_back(items.back() + ((int64_t)order.size() - a) * ((rank[s] + 3) / 4));
        }
        if (!order.empty()) N = n;
    }
    int64_t nseg() const { return (int64_t)seg.size() / 3; }
};

// x . w0..w3, four dot products sharing the loads of x; each output its own sums in a fixed order (the same bits whichever
// rows of A it is computed beside)
static inline void dot4_f32(const float* const* w, const float* x, int64_t K, float* out) {
    float acc[4] = {0, 0, 0, 0}; int64_t i = 0;
#if XK_AVX2
    __m256 a[8];
    for (int q = 0; q < 8; q++) a[q] = _mm256_setzero_ps();
    for (; i + 16 <= K; i += 16) {
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
        for (int q = 0; q < 4; q++) {
            a[q] = _mm256_fmadd_ps(_mm256_loadu_ps(w[q] + i), x0, a[q]);
            a[q + 4] = _mm256_fmadd_ps(_mm256_loadu_ps(w[q] + i + 8), x1, a[q + 4]);
        }
    }
    for (int q = 0; q < 4; q++) acc[q] = hsum(_mm256_add_ps(a[q], a[q + 4]));
#endif
    for (; i < K; i++) for (int q = 0; q < 4; q++) acc[q] += w[q][i] * x[i];
    for (int q = 0; q < 4; q++) out[q] = acc[q];
}

// The shrink, this thread's share: h[t * R + j] = x[t] . A_s[j] (j < rank[s]) for its items of all segments, an item a row's
// four consecutive j: the bits of a row depend neither on the threads nor on the rows around it.
static void lora_shrink(const LoraW& w, int64_t K, const LoraRows& lr, const float* x, float* h, int tid, int n) {
    int64_t i0, i1; split(lr.items.back(), tid, n, i0, i1, 1);
    for (int64_t g = 0; g < lr.nseg() && i0 < i1; g++) {
        const int64_t a = lr.items[g], b = lr.items[g + 1];
        if (b <= i0) continue;
        if (a >= i1) break;
        const int64_t s = lr.seg[3 * g + 2], rk = lr.rank[s], nq = (rk + 3) / 4;
        const float* As = w.A + s * w.R * K;
        for (int64_t i = std::max(a, i0); i < std::min(b, i1); i++) {
            const int64_t t = lr.order[lr.seg[3 * g] + (i - a) / nq], j = 4 * ((i - a) % nq);
            const float* ws[4]; float out[4];
            for (int q = 0; q < 4; q++) ws[q] = As + std::min(j + q, rk - 1) * K;     // past the rank: a row again, its result dropped
            dot4_f32(ws, x + t * K, K, out);
            for (int q = 0; q < 4 && j + q < rk; q++) h[t * w.R + j + q] = out[q];
        }
    }
}

// The expand, rows [t0, t1) of y [T, N] (the rows of this thread): y[t, c] += sum_j (s h[t, j]) Bt_s[j, c], j in order, segment
// by segment; each 64-column strip of Bt_s stays in L1 while the segment's rows pass over it, 32 columns a pass.
static void lora_expand(const LoraW& w, int64_t N, const LoraRows& lr, const float* h, float* y, int64_t t0, int64_t t1) {
    for (int64_t g = 0; g < lr.nseg(); g++) {
        const int64_t s = lr.seg[3 * g + 2], rk = lr.rank[s];
        const int64_t* o0 = lr.order.data() + lr.seg[3 * g]; const int64_t* o1 = lr.order.data() + lr.seg[3 * g + 1];
        o0 = std::lower_bound(o0, o1, t0); o1 = std::lower_bound(o0, o1, t1);   // a segment's rows are in row order
        if (o0 == o1) continue;
        const float* Bs = w.Bt + s * w.R * N; const float sc = lr.scale[s];
        for (int64_t c = 0; c < N; c += 64) {
            const int64_t ce = std::min(N, c + 64);
            for (const int64_t* o = o0; o < o1; o++) {
                float* yt = y + *o * N; const float* ht = h + *o * w.R;
                int64_t k = c;
#if XK_AVX2
                for (; k + 32 <= ce; k += 32) {
                    __m256 a0 = _mm256_loadu_ps(yt + k), a1 = _mm256_loadu_ps(yt + k + 8), a2 = _mm256_loadu_ps(yt + k + 16), a3 = _mm256_loadu_ps(yt + k + 24);
                    for (int64_t j = 0; j < rk; j++) {
                        const __m256 cf = _mm256_set1_ps(sc * ht[j]); const float* bj = Bs + j * N + k;
                        a0 = _mm256_fmadd_ps(cf, _mm256_loadu_ps(bj), a0); a1 = _mm256_fmadd_ps(cf, _mm256_loadu_ps(bj + 8), a1);
                        a2 = _mm256_fmadd_ps(cf, _mm256_loadu_ps(bj + 16), a2); a3 = _mm256_fmadd_ps(cf, _mm256_loadu_ps(bj + 24), a3);
                    }
                    _mm256_storeu_ps(yt + k, a0); _mm256_storeu_ps(yt + k + 8, a1); _mm256_storeu_ps(yt + k + 16, a2); _mm256_storeu_ps(yt + k + 24, a3);
                }
                for (; k + 8 <= ce; k += 8) {
                    __m256 acc = _mm256_loadu_ps(yt + k);
                    for (int64_t j = 0; j < rk; j++) acc = _mm256_fmadd_ps(_mm256_set1_ps(sc * ht[j]), _mm256_loadu_ps(Bs + j * N + k), acc);
                    _mm256_storeu_ps(yt + k, acc);
                }
#endif
                for (; k < ce; k++) { float acc = yt[k]; for (int64_t j = 0; j < rk; j++) acc = std::fmaf(sc * ht[j], Bs[j * N + k], acc); yt[k] = acc; }
            }
        }
    }
}

// Several linears of one input (q|k|v, gate|up), this thread's share. First the shrinks (hs: one [T, R] scratch per linear; a
// linear without adapters has a null A); then, once every thread's are done (the caller's barrier), the expands of this
// thread's rows [t0, t1): the rows the step's next phase gives the same thread, so that phase needs no barrier before it.
static void lora_shrinks(const LoraW* ws, const int64_t* Ks, int nl, const LoraRows& lr, const float* x, float* const* hs, int tid, int n) {
    for (int l = 0; l < nl; l++) if (ws[l].A) lora_shrink(ws[l], Ks[l], lr, x, hs[l], tid, n);
}
static void lora_expands(const LoraW* ws, const int64_t* Ns, int nl, const LoraRows& lr, float* const* hs, float* const* ys, int64_t t0, int64_t t1) {
    for (int l = 0; l < nl; l++) if (ws[l].A) lora_expand(ws[l], Ns[l], lr, hs[l], ys[l], t0, t1);
}
