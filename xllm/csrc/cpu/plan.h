// ---------------------------------------------------------------- a whole model in one call: the engine's step
struct LayerIdx { const float *attn_norm, *ffn_norm; int q, k, v, o, gate, up, down; };

typedef void (*ReduceFn)(float* buf, int64_t n);   // tensor parallelism: sums buf[0..n) over the group, in place (the caller's collective)

struct Plan {
    int64_t L, H, nh, nkv, hd, I, V; float eps;
    // a tensor-parallel shard (notebook 13a): nh, nkv, I and V are this rank's; the embedding holds vocabulary rows
    // emb_start..emb_start+emb_n (others embed as zeros); `reduce` sums the embeddings and the o/down products over the group
    ReduceFn reduce = nullptr; int64_t emb_start = 0, emb_n = -1;
    std::vector<Lin> lins; std::vector<LayerIdx> layers;
    std::vector<Rows16Copies> lin16;            // the copies rows16_a8 reads (moving the vector moves each buffer: the pointers stay valid)
    int add_linear(Lin L) {
        if (rows16_ok(L)) { lin16.emplace_back(); rows16_copies(L, lin16.back()); }
        lins.push_back(L); a8r |= L.a8r; return (int)lins.size() - 1;
    }
    const float *embed = nullptr, *norm = nullptr; int head = -1;
    Lin emb_q; bool emb_quant = false;   // an INT8 embedding (rows dequantized on lookup)
    std::vector<fvec> priv, privX; Barrier bar;
    std::mutex busy;   // one call at a time (ctypes releases the GIL): the buffers and the barrier are shared
    // optional timing of the step's phases (seconds summed over steps), read by thread 0 right after each barrier
    bool prof = false; double phase[7] = {0, 0, 0, 0, 0, 0, 0}, t_mark = 0; int64_t prof_steps = 0;
    std::atomic<int64_t> waited_ns{0};   // profiling: time the threads spent waiting at barriers (summed over the team)
    static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
    void mark(int i) { double t = now(); phase[i] += t - t_mark; t_mark = t; }
    void sync() {   // the barrier between phases; while profiling, the time each thread waits there is added up
        if (!prof) { bar.wait(); return; }
        const double t = now(); bar.wait(); waited_ns.fetch_add((int64_t)((now() - t) * 1e9), std::memory_order_relaxed);
    }

    Plan(int64_t L_, int64_t H_, int64_t nh_, int64_t nkv_, int64_t hd_, int64_t I_, int64_t V_, double eps_)
        : L(L_), H(H_), nh(nh_), nkv(nkv_), hd(hd_), I(I_), V(V_), eps((float)eps_), layers(L_) {}
    void embed_row(int64_t token, float* out) const {
        if (emb_n >= 0) {                                   // a vocabulary slice: rows of other ranks' tokens are zero here
            token -= emb_start;
            if (token < 0 || token >= emb_n) { std::memset(out, 0, H * sizeof(float)); return; }
        }
        if (!emb_quant) { std::memcpy(out, embed + token * H, H * sizeof(float)); return; }
        if (emb_q.kind == BF16) { for (int64_t i = 0; i < H; i++) out[i] = bf2f(emb_q.wb[token * H + i]); return; }
        for (int64_t i = 0; i < H; i++)
            out[i] = (float)emb_q.w8[token * H + i] * (emb_q.kind == Q8_ROW ? emb_q.srow[token] : h2f(emb_q.sg[token * emb_q.G + i / emb_q.gs]));
    }
    // ---- many rows in one call: a prompt, or an engine step's ragged batch of chunks of several sequences
    // Row r is token ids[r] at position pos[r]. Its K/V go to row wslot[r] of layer l's caches kb[l], vb[l] ([rows, nkv, hd]);
    // it attends to its sequence's positions 0..pos[r], stored at rows keys[koff[r] + t] (keys null: at row t, a contiguous
    // cache). cos/sin: tables [positions, hd]. Logits of rows out_rows[0..M) go to logits [M, V]; the final-norm hidden states of
    // rows hid_rows[0..Mh) go to hidden [Mh, H] (pooling: no head computed for them).
    // One parallel region for the whole call, phases separated by the barrier: waking sleeping OpenMP threads
    // for each of a layer's dozen phases costs tens of microseconds each time. The products are gemm_part on x packed once
    // per input (the row path below GEMM_MIN_ROWS rows). A few rows (a decode step, SMALL_ROWS or fewer) keep the residual
    // stream and its norms in each thread's own copy, every thread computing all rows: no barrier around the norms and the
    // residual adds (6 a layer instead of 9), the same sums in the same order, so the same bits.
    static constexpr int64_t SMALL_ROWS = 4;
    fvec X, XN, Q, Kr, Vr, A, Tmp, G, U;
    std::vector<int64_t> blk;   // attention blocks: rows blk[b]..blk[b+1]-1, consecutive positions of one sequence
    std::vector<int64_t> atask; // attention tasks, 3 values each: a block and its query heads h0..h1-1 (attention_tasks)
    Scratch XP;   // packed panels: 32-byte aligned (the GEMM's aligned loads)
#if XK_AVX2
    QScratch QS; QAct QA{};   // the int8 GEMM's quantized input (sized for the widest input, K = max(H, nq, I))
#endif
    bool a8r = false;          // some linear takes the int8 GEMM's residual pass (set as linears are added)
    std::atomic<int64_t> task{0};   // the GEMM's next block of rows
    // LoRA (lora.h): the adapters of the linears that have them (by index in lins), and the rows of the next call (set before
    // it, used by it alone). lora(0, ...) before the linears' product: the shrinks (they read its input only); lora(1, ...) after
    // it (its closing barrier between): the expands of this thread's rows r0..r1 (those the next phase gives it), then a barrier
    // only if `wait` (the next phase reads every row). Nothing without adapter rows.
    std::vector<LoraW> lora_w; LoraRows lrows; fvec LH; int64_t lora_R = 0;
    void lora(int phase, std::initializer_list<int> idx, const float* x, float* const* ys, int tid, int n, int64_t r0 = 0, int64_t r1 = 0, bool wait = false) {
        if (lrows.N == 0) return;
        LoraW ws[3]; int64_t Ks[3], Ns[3]; float* hs[3]; int nl = 0; bool any = false;
        for (int i : idx) {
            ws[nl] = i < (int)lora_w.size() ? lora_w[i] : LoraW(); Ks[nl] = lins[i].K; Ns[nl] = lins[i].N;
            hs[nl] = LH.data() + nl * lrows.N * lora_R; any |= ws[nl].A != nullptr; nl++;
        }
        if (!any) return;
        if (phase == 0) lora_shrinks(ws, Ks, nl, lrows, x, hs, tid, n);
        else { lora_expands(ws, Ns, nl, lrows, hs, ys, r0, r1); if (wait) sync(); }
    }
    template <class V> static void grow(V& v, int64_t n) { if ((int64_t)v.size() < n) v.resize(n); }
    // How lin computes several linears of T rows: the int8 GEMM, bf16 products, the float GEMM, or the row path (a few rows)
    enum class LinPath { ROWS, QGEMM, BF16, FGEMM };   // (scoped: BF16 is also a weight Kind)
    static LinPath lin_path(const Lin* ls, int nl, int64_t T) {
#if XK_AVX2
        if (T >= QGEMM_MIN_ROWS && all_a8(ls, nl)) return LinPath::QGEMM;
        if (bf16_kind(ls, nl, T)) return LinPath::BF16;
        if (T >= GEMM_MIN_ROWS) return LinPath::FGEMM;
#endif
        return LinPath::ROWS;
    }
    // Queue this thread's share of the linears `idx` (of T rows), fetched at the barriers' waits before their product, when
    // that product takes the row path, whose split is fixed (the GEMMs deal tasks as threads come free): nothing else
    void prefetch_next(std::initializer_list<int> idx, int64_t T, int tid, int n) {
        Lin ls[3]; int nl = 0;
        for (int i : idx) ls[nl++] = lins[i];
        if (lin_path(ls, nl, T) == LinPath::ROWS) prefetch_share(ls, nl, tid, n); else pf_next.clear();
    }
    // several linears of one input, this thread's share; ends with a barrier (ys complete, XP free again)
    void lin(const Lin* ls, int nl, const float* x, int64_t T, float* const* ys, int tid, int n) {
        const LinPath path = lin_path(ls, nl, T);
#if XK_AVX2
        if (path == LinPath::QGEMM) {     // int8 activations: rows quantized by their threads, then the integer GEMM
            QAct qa = QA; qa.K = ls[0].K; qa.nb = qa.K / 32;
            if (!any_a8r(ls, nl)) qa.q2 = nullptr;
            const bool amx = amx_use(ls, nl, T);
            int64_t t0, t1; split(T, tid, n, t0, t1, amx ? 16 : 1);     // the tiles: whole 16-row tiles a thread
            quantize_rows(x, t0, t1, qa);
#if XK_AMX
            if (amx) amx_pack_rows(qa, t0, t1, T);
#endif
            if (tid == 0) task.store(0);
            sync();
#if XK_AMX
            if (amx) amx_gemm_part(ls, nl, qa, T, ys, task); else
#endif
            qgemm_part(ls, nl, qa, T, ys, task);
            sync(); return;
        }
        if (path == LinPath::BF16) {    // bf16 weights: activations rounded to bf16 by their threads, then tiles or vdpbf16ps
            const int bk = bf16_kind(ls, nl, T);
            int64_t t0, t1; split(T, tid, n, t0, t1, 1);
            bf16_pack(bk, x, ls[0].K, t0, t1, T, (uint16_t*)XP.p);
            if (tid == 0) task.store(0);
            sync();
            bf16_part(bk, ls, nl, (const uint16_t*)XP.p, T, ys, task);
            sync(); return;
        }
        if (path == LinPath::FGEMM) {
            const int64_t P = (T + 15) / 16; int64_t p0, p1; split(P, tid, n, p0, p1, 1);
            pack_panels(x, T, ls[0].K, XP.p, p0, p1);
            if (tid == 0) task.store(0);
            sync();
            gemm_part(ls, nl, XP.p, T, ys, task);
            sync(); return;
        }
#endif
        (void)path;
        rows_part(ls, nl, x, T, ys, tid, n);
        sync();
    }
    // The attention tasks of a step's nblk blocks (atask): each a block and a range of its query heads, whose queries (rows x
    // heads <= cap, the scratch) meet the block's keys together. A block's heads go together in as few ranges as fit and as its
    // share of the step's work allows: a row's K/V heads lie side by side in the pool, so one task per row reads its keys and
    // values as contiguous rows, where a task per KV head read 1 head's 128 bytes of every 384 (SmolLM2, float16 K/V) and the
    // hardware prefetcher fetched the rest for nothing (30 layers' K/V of a 1536-token sequence, one thread: 197 -> 154 us a
    // layer, the same bits). A block doing a share w of the step's work (rows x keys) is split into about n w ranges, so that
    // a lone sequence, or one long one among short ones, keeps every thread busy. (With a few more blocks than threads, the
    // last threads' second blocks are whole: a coarser deal than by KV head.)
    void attention_tasks(int64_t nblk, int n, int64_t cap, const int64_t* pos) {
        atask.clear();
        auto work = [&](int64_t b) { const int64_t rows = blk[b + 1] - blk[b]; return rows > 0 ? (double)rows * (double)(pos[blk[b + 1] - 1] + 1) : 0.0; };
        double W = 0;
        for (int64_t b = 0; b < nblk; b++) W += work(b);
        for (int64_t b = 0; b < nblk; b++) {
            const int64_t rows = blk[b + 1] - blk[b];
            if (rows <= 0) continue;
            const int64_t maxh = std::max<int64_t>(1, cap / rows);
            const double w = work(b);
            const int64_t want = (int64_t)std::ceil(n * w / W - 1e-9);
            const int64_t k = std::min<int64_t>(nh, std::max<int64_t>(want, (nh + maxh - 1) / maxh));   // ranges, each <= maxh heads
            for (int64_t c = 0; c < k; c++) { atask.push_back(b); atask.push_back(nh * c / k); atask.push_back(nh * (c + 1) / k); }
        }
    }
    void forward(int64_t N, const int64_t* ids, const int64_t* pos, const int64_t* wslot, void* const* kb, void* const* vb, int kv16,
                 const int64_t* keys, const int64_t* koff, const float* cosT, const float* sinT, int64_t M, const int64_t* out_rows,
                 float* logits, int64_t Mh, const int64_t* hid_rows, float* hidden, int nt_) {
        std::lock_guard<std::mutex> hold(busy);
        std::shared_lock<std::shared_mutex> switches(kernel_switches);   // one AMX / bf16 setting for every thread of the call
        const int nt = nthreads_ok(nt_);
        const int64_t nq = nh * hd, nk = nkv * hd, grp = nh / nkv, P = (N + 15) / 16;
        int64_t maxlen = 1; for (int64_t r = 0; r < N; r++) maxlen = std::max(maxlen, pos[r] + 1);
        const int64_t QB = std::max<int64_t>(1, std::min<int64_t>(16, 256 / grp));   // rows per attention block (QB x grp <= 256 queries)
        blk.clear(); blk.push_back(0);
        for (int64_t r = 1; r < N; r++)
            if (r - blk.back() == QB || pos[r] != pos[r - 1] + 1 || (keys && koff[r] != koff[r - 1])) blk.push_back(r);
        blk.push_back(N);
        const int64_t nblk = (int64_t)blk.size() - 1;
        attention_tasks(nblk, nt, std::min<int64_t>(QB * grp, 256), pos);
        grow(X, N * H); grow(XN, N * H); grow(Q, N * nq); grow(Kr, N * nk); grow(Vr, N * nk); grow(A, N * nq); grow(Tmp, N * H);
        grow(G, N * I); grow(U, N * I); XP.get(P * 16 * std::max(std::max(H, nq), I));
        if (lrows.N != N) lrows.N = 0; else grow(LH, 3 * N * lora_R);   // LoRA rows set for another call: none
#if XK_AVX2
        QA = QS.get(N, std::max(std::max(H, nq), I), a8r);
#endif
        const bool small = N <= SMALL_ROWS && M <= N;
        if ((int)priv.size() < nt) { priv.resize(nt); privX.resize(nt); }
        for (int t = 0; t < nt; t++) { grow(priv[t], QB * grp * maxlen + 16); if (small) grow(privX[t], 2 * N * H); }
        const float scale = 1.0f / std::sqrt((float)hd);
        bar.count.store(0);
        if (prof) { t_mark = now(); prof_steps++; }
#pragma omp parallel num_threads(nt)
        {
#ifdef _OPENMP
            const int tid = omp_get_thread_num(), n = omp_get_num_threads();
#else
            const int tid = 0, n = 1;
#endif
            bar.n.store(n, std::memory_order_relaxed);   // every thread, before its first wait: the team's real size (all store the same)
            float* scores = priv[tid].data();
            int64_t r0, r1; split(N, tid, n, r0, r1, 1);                 // this thread's rows in the row-wise phases
            float* x = small ? privX[tid].data() : X.data();             // the residual stream (this thread's copy when small)
            float* xn = small ? x + N * H : XN.data();
            const int64_t x0 = small ? 0 : r0, x1 = small ? N : r1;     // the rows of x this thread updates
            if (reduce) {           // tensor parallel: each rank embeds the tokens of its slice, the sum has every row
                for (int64_t r = r0; r < r1; r++) embed_row(ids[r], X.data() + r * H);
                sync();
                if (tid == 0) reduce(X.data(), N * H);
                sync();
                if (small) std::memcpy(x, X.data(), N * H * sizeof(float));
            } else for (int64_t r = x0; r < x1; r++) embed_row(ids[r], x + r * H);
            for (int64_t l = 0; l < L; l++) {
                const LayerIdx& ly = layers[l];
                // 1. norm, then q|k|v as one product
                for (int64_t r = x0; r < x1; r++) rmsnorm(x + r * H, ly.attn_norm, eps, H, xn + r * H);
                if (!small) sync();
                if (small) prefetch_next({ly.o}, N, tid, n);     // (fetched at the next three barriers' waits)
                { const Lin ls[3] = {lins[ly.q], lins[ly.k], lins[ly.v]}; float* ys[3] = {Q.data(), Kr.data(), Vr.data()}; lora(0, {ly.q, ly.k, ly.v}, xn, ys, tid, n); lin(ls, 3, xn, N, ys, tid, n); lora(1, {ly.q, ly.k, ly.v}, xn, ys, tid, n, r0, r1); }
                if (prof && tid == 0) mark(0);
                // 2. RoPE on q and k, K/V written to their slots
                for (int64_t r = r0; r < r1; r++) {
                    const float *cs = cosT + pos[r] * hd, *sn = sinT + pos[r] * hd;
                    for (int64_t h = 0; h < nh; h++) rope_head(Q.data() + r * nq + h * hd, cs, sn, hd);
                    for (int64_t h = 0; h < nkv; h++) rope_head(Kr.data() + r * nk + h * hd, cs, sn, hd);
                    if (kv16) { store_kv((kvh*)kb[l] + wslot[r] * nk, Kr.data() + r * nk, nk); store_kv((kvh*)vb[l] + wslot[r] * nk, Vr.data() + r * nk, nk); }
                    else { store_kv((float*)kb[l] + wslot[r] * nk, Kr.data() + r * nk, nk); store_kv((float*)vb[l] + wslot[r] * nk, Vr.data() + r * nk, nk); }
                }
                sync(); if (prof && tid == 0) mark(1);
                // 3. attention by (block of rows, range of query heads): see attention_tasks. Dealt round-robin, which evens out
                //    causal lengths. Each query's sums are the same whatever its task, so the split never changes a bit.
                for (int64_t i = tid; i < (int64_t)atask.size() / 3; i += n) {
                    const int64_t b = atask[3 * i], h0 = atask[3 * i + 1], h1 = atask[3 * i + 2];
                    const float* qs[256]; float* os[256]; int64_t ql[256], ho[256]; int nq = 0;
                    for (int64_t r = blk[b]; r < blk[b + 1]; r++)
                        for (int64_t h = h0; h < h1; h++, nq++) {
                            qs[nq] = Q.data() + (r * nh + h) * hd; os[nq] = A.data() + (r * nh + h) * hd; ql[nq] = pos[r] + 1; ho[nq] = (h / grp) * hd;
                        }
                    const int64_t* ks = keys ? keys + koff[blk[b]] : nullptr;
                    if (kv16) attend_block(qs, ql, nq, (const kvh*)kb[l], (const kvh*)vb[l], ks, nk, hd, scale, scores, maxlen, os, ho);
                    else attend_block(qs, ql, nq, (const float*)kb[l], (const float*)vb[l], ks, nk, hd, scale, scores, maxlen, os, ho);
                }
                sync(); if (prof && tid == 0) mark(2);
                // 4. x += o_proj(att)
                if (small) prefetch_next({ly.gate, ly.up}, N, tid, n);
                { float* y = Tmp.data(); lora(0, {ly.o}, A.data(), &y, tid, n); lin(&lins[ly.o], 1, A.data(), N, &y, tid, n); lora(1, {ly.o}, A.data(), &y, tid, n, r0, r1, small || reduce); }
                if (reduce) { if (tid == 0) reduce(Tmp.data(), N * H); sync(); }   // tensor parallel: the ranks' partial products summed
                for (int64_t r = x0; r < x1; r++) for (int64_t i = r * H; i < (r + 1) * H; i++) x[i] += Tmp[i];
                if (prof && tid == 0) mark(3);
                // 5. norm, gate|up as one product, silu(gate) * up
                for (int64_t r = x0; r < x1; r++) rmsnorm(x + r * H, ly.ffn_norm, eps, H, xn + r * H);
                if (!small) sync();
                if (small) prefetch_next({ly.down}, N, tid, n);
                { const Lin ls[2] = {lins[ly.gate], lins[ly.up]}; float* ys[2] = {G.data(), U.data()}; lora(0, {ly.gate, ly.up}, xn, ys, tid, n); lin(ls, 2, xn, N, ys, tid, n); lora(1, {ly.gate, ly.up}, xn, ys, tid, n, r0, r1); }
                for (int64_t r = r0; r < r1; r++) silu_mul(G.data() + r * I, U.data() + r * I, G.data() + r * I, I);
                sync(); if (prof && tid == 0) mark(4);
                // 6. x += down(h)
                if (small) {   // the next layer's q|k|v, or the head
                    if (l + 1 < L) prefetch_next({layers[l + 1].q, layers[l + 1].k, layers[l + 1].v}, N, tid, n);
                    else if (M > 0) prefetch_next({head}, M, tid, n);
                    else pf_next.clear();
                }
                { float* y = Tmp.data(); lora(0, {ly.down}, G.data(), &y, tid, n); lin(&lins[ly.down], 1, G.data(), N, &y, tid, n); lora(1, {ly.down}, G.data(), &y, tid, n, r0, r1, small || reduce); }
                if (reduce) { if (tid == 0) reduce(Tmp.data(), N * H); sync(); }
                for (int64_t r = x0; r < x1; r++) for (int64_t i = r * H; i < (r + 1) * H; i++) x[i] += Tmp[i];
                if (prof && tid == 0) mark(5);
            }
            // the final norm and the head, for the asked rows only (any thread's rows: wait for all the residual updates)
            if (small) {
                for (int64_t i = 0; i < M; i++) rmsnorm(x + out_rows[i] * H, norm, eps, H, xn + i * H);   // xn: free again
                if (tid == 0) for (int64_t i = 0; i < Mh; i++) rmsnorm(x + hid_rows[i] * H, norm, eps, H, hidden + i * H);
            } else {
                sync();
                int64_t m0, m1; split(M, tid, n, m0, m1, 1);
                for (int64_t i = m0; i < m1; i++) rmsnorm(X.data() + out_rows[i] * H, norm, eps, H, XN.data() + i * H);
                split(Mh, tid, n, m0, m1, 1);
                for (int64_t i = m0; i < m1; i++) rmsnorm(X.data() + hid_rows[i] * H, norm, eps, H, hidden + i * H);
                sync();
            }
            if (small && M > 0 && L > 0) prefetch_next({layers[0].q, layers[0].k, layers[0].v}, N, tid, n);   // a next step like this one
            if (M > 0) lin(&lins[head], 1, small ? xn : XN.data(), M, &logits, tid, n);   // (its wait fetches the next step's first phase)
            pf_next.clear();
        }
        if (prof) mark(6);
        lrows.N = 0;
    }
};
