// ---------------------------------------------------------------- a barrier for threads inside one parallel region
// What a thread reads next, fetched a cache line at a time into its L2 while it waits at a barrier: up to 12 byte ranges
// (a decode step queues its share of the next phase's weights; Plan::prefetch_next). Only a hint: a prefetch reads nothing
// into a register, changes nothing and never faults.
struct PfCursor {
    static constexpr int MAX = 12;
    const char* p[MAX]; int64_t left[MAX]; int k = 0, nr = 0;
    void clear() { k = nr = 0; }
    void add(const void* ptr, int64_t bytes) { if (ptr && bytes > 0 && nr < MAX) { p[nr] = (const char*)ptr; left[nr] = bytes; nr++; } }
    bool step() {   // one line; false when none is left
        while (k < nr && left[k] <= 0) k++;
        if (k == nr) return false;
        __builtin_prefetch(p[k], 0, 2);   // read, into L2 (as _MM_HINT_T1)
        left[k] -= 64; if (left[k] > 0) p[k] += 64;
        return true;
    }
};
static thread_local PfCursor pf_next;   // this thread's queue (empty outside a decode step)
// Spins briefly, then yields the core: on a shared machine the other thread may be descheduled. Before its spins it issues
// up to PF_LINES of its queued prefetches, one per turn, each turn checking whether the barrier opened.
struct Barrier {
    static constexpr int PF_LINES = 4096;   // 256 KB a wait at most: half an L2 of the CPUs measured (AMD Zen 3: 512 KB a core)
    std::atomic<int> count{0}; std::atomic<int> gen{0}; std::atomic<int> n{1};
    void wait() {
        const int n = this->n.load(std::memory_order_relaxed);
        if (n == 1) return;
        int g = gen.load(std::memory_order_acquire);
        if (count.fetch_add(1, std::memory_order_acq_rel) == n - 1) { count.store(0, std::memory_order_relaxed); gen.fetch_add(1, std::memory_order_release); return; }
        for (int pf = 0; pf < PF_LINES && gen.load(std::memory_order_acquire) == g && pf_next.step(); pf++) {}
        for (int it = 0; gen.load(std::memory_order_acquire) == g; it++) {
            if (it < 2000) {
#if XK_AVX2
                _mm_pause();
#endif
            } else sched_yield();
        }
    }
};

static inline void split(int64_t n, int tid, int nt, int64_t& r0, int64_t& r1, int64_t align = 4) {
    int64_t per = (n + nt - 1) / nt; per = (per + align - 1) / align * align;
    r0 = std::min<int64_t>(n, per * tid); r1 = std::min<int64_t>(n, r0 + per);
}
static inline int nthreads_ok(int nt) { return nt < 1 ? 1 : nt; }
// The kernels' switches (xk_amx, xk_bf16_dot) change under this lock held alone; a Plan's forward holds it shared for the
// whole call, in which each thread decides for itself which product a phase takes (Plan::lin): so every thread of one call
// sees the same setting, and a switch flipped from another thread waits for the calls under way
static std::shared_mutex kernel_switches;
static inline int team_size() {   // the threads of the enclosing parallel region (1 outside one)
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}
// Tasks 0..ntask-1 dealt from `next` as threads come free, in runs of consecutive tasks (guided: a run is the tasks left over
// 2 n, at least one): a thread then walks adjacent rows of the weights, a stream the hardware prefetcher follows, where one
// task at a time gave each thread every n-th block of rows; the runs shrink as the tasks run out, so the threads still finish
// together. False when none are left; else this thread's run is t0..t1-1.
// The GEMMs' tasks over several linears: blocks of `rows` weight rows, numbered across the linears in order (a block never
// straddles two). How many there are; and which linear task t falls in, and its first row there
static inline int64_t row_tasks(const Lin* Ls, int nl, int64_t rows) {
    int64_t n = 0; for (int l = 0; l < nl; l++) n += (Ls[l].N + rows - 1) / rows;
    return n;
}
static inline void task_rows(const Lin* Ls, int64_t rows, int64_t t, int& l, int64_t& n0) {
    l = 0;
    while (t >= (Ls[l].N + rows - 1) / rows) { t -= (Ls[l].N + rows - 1) / rows; l++; }
    n0 = t * rows;
}
static inline bool claim_run(std::atomic<int64_t>& next, int64_t ntask, int n, int64_t& t0, int64_t& t1) {
    int64_t cur = next.load(std::memory_order_relaxed);
    while (cur < ntask) {
        const int64_t c = std::max<int64_t>(1, (ntask - cur) / (2 * (int64_t)n));
        if (next.compare_exchange_weak(cur, cur + c, std::memory_order_relaxed)) { t0 = cur; t1 = cur + c; return true; }
    }
    return false;
}
