// ---------------------------------------------------------------- a barrier for threads inside one parallel region
// Spins briefly, then yields the core: on a shared machine the other thread may be descheduled.
struct Barrier {
    std::atomic<int> count{0}; std::atomic<int> gen{0}; std::atomic<int> n{1};
    void wait() {
        const int n = this->n.load(std::memory_order_relaxed);
        if (n == 1) return;
        int g = gen.load(std::memory_order_acquire);
        if (count.fetch_add(1, std::memory_order_acq_rel) == n - 1) { count.store(0, std::memory_order_relaxed); gen.fetch_add(1, std::memory_order_release); return; }
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
