// ---------------------------------------------------------------- a barrier for threads inside one parallel region
// What a thread reads next, fetched a cache line at a time into its L2 while it waits at a barrier: up to 8 byte ranges
// (a decode step queues its share of the next phase's weights; Plan::forward). Only a hint: nothing is read or changed.
struct PfCursor {
    const char* p[8]; int64_t left[8]; int k = 0, nr = 0;
    void clear() { k = nr = 0; }
    void add(const void* ptr, int64_t bytes) { if (ptr && bytes > 0 && nr < 8) { p[nr] = (const char*)ptr; left[nr] = bytes; nr++; } }
    bool step() {   // one line; false when none is left
        while (k < nr && left[k] <= 0) k++;
        if (k == nr) return false;
#if XK_AVX2
        _mm_prefetch(p[k], _MM_HINT_T1);
#endif
        p[k] += 64; left[k] -= 64; return true;
    }
};
static thread_local PfCursor pf_next;   // this thread's queue (empty outside a decode step)
// Spins briefly (fetching pf_next meanwhile), then yields the core: on a shared machine the other thread may be descheduled.
struct Barrier {
    std::atomic<int> count{0}; std::atomic<int> gen{0}; std::atomic<int> n{1};
    void wait() {
        const int n = this->n.load(std::memory_order_relaxed);
        if (n == 1) return;
        int g = gen.load(std::memory_order_acquire);
        if (count.fetch_add(1, std::memory_order_acq_rel) == n - 1) { count.store(0, std::memory_order_relaxed); gen.fetch_add(1, std::memory_order_release); return; }
        for (int it = 0; gen.load(std::memory_order_acquire) == g; it++) {
            if (it < 2000) {
                if (pf_next.step()) continue;
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
