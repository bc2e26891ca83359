// ---- xllm.cuda_emu: CUDA C compiled as C++ and run on the CPU, one fiber per CUDA thread ----------------------------------
#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include <csignal>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

namespace emu {
struct dim3 { unsigned x, y, z; };
struct Fiber {                              // one CUDA thread: its own stack; runs until it waits at a barrier or ends
    jmp_buf ctx; ucontext_t uc;
    int tid; bool started, done;
    const long* wait_gen; long wait_val;    // parked while *wait_gen == wait_val
};
struct Barrier { int count; long gen; };
struct Region {                             // memcheck: a pointer argument's tensor, copied between two inaccessible pages
    int arg; uintptr_t orig; size_t bytes;
    char* map; size_t map_len; char* copy;  // copy ends exactly where the trailing guard page starts
    std::vector<char> before;               // the bytes at launch: what the kernel changed is what differs from them
};
struct State {
    dim3 grid, block, bidx;
    int nthreads, done_count;
    std::vector<Fiber> fibers;
    std::vector<std::vector<char>> stacks;
    std::vector<Barrier> warp_bar;          // one per warp: shuffles
    std::vector<int> warp_done;             // lanes of each warp that have ended
    std::vector<uint64_t> lane_val;         // what each lane publishes in a shuffle
    std::vector<int> order;
    Barrier block_bar;                      // __syncthreads
    std::vector<uint64_t> dyn;              // dynamic shared memory (extern __shared__), 8-byte words
    std::vector<std::vector<uint64_t>> stat;   // static __shared__ arrays, by declaration
    Fiber* cur;
    jmp_buf sched;
    std::function<void()> body;
    std::string error;
    bool failed, shuffle;
    std::mt19937 rng;
    std::vector<Region> regions;
    volatile uintptr_t fault_addr;          // set by the SIGSEGV/SIGBUS handler
    volatile int fault_tid;
    volatile bool faulted;
};
static State S;
static const size_t STACK = 256 * 1024;

static std::string where() {
    char b[96];
    snprintf(b, sizeof b, " (block (%u,%u,%u), thread %d)", S.bidx.x, S.bidx.y, S.bidx.z, S.cur ? S.cur->tid : -1);
    return b;
}
[[noreturn]] static void fail(const std::string& m) {     // on a fiber: keep the first error, return to the scheduler for good
    if (!S.failed) { S.failed = true; S.error = m + where(); }
    _longjmp(S.sched, 2);
}
static inline void yield() { if (!_setjmp(S.cur->ctx)) _longjmp(S.sched, 1); }
static inline void arrive(Barrier& b, int expected) {       // the last to arrive opens the barrier; the others park
    const long g = b.gen;
    if (++b.count == expected) { b.count = 0; b.gen++; return; }
    S.cur->wait_gen = &b.gen; S.cur->wait_val = g;
    do yield(); while (b.gen == g);
    S.cur->wait_gen = nullptr;
}
static inline void syncthreads() {
    if (S.done_count) fail("__syncthreads reached after other threads of the block ended (a divergent barrier)");
    arrive(S.block_bar, S.nthreads);
}
template <typename T> inline T shfl_xor(unsigned mask, T v, int lane_mask) {
    const int tid = S.cur->tid, w = tid >> 5, lane = tid & 31;
    if (mask != 0xffffffffu) fail("__shfl_xor_sync with a partial mask (not emulated)");
    if ((w + 1) * 32 > S.nthreads) fail("__shfl_xor_sync in a warp of fewer than 32 threads");
    if (S.warp_done[w]) fail("__shfl_xor_sync after other lanes of the warp ended");
    uint64_t bits = 0; std::memcpy(&bits, &v, sizeof(T));
    S.lane_val[tid] = bits;
    arrive(S.warp_bar[w], 32);                          // every lane has published
    bits = S.lane_val[w * 32 + (lane ^ (lane_mask & 31))];
    arrive(S.warp_bar[w], 32);                          // every lane has read before any publishes again
    T r; std::memcpy(&r, &bits, sizeof(T)); return r;
}
static inline dim3 thread_idx() {
    const unsigned t = (unsigned)S.cur->tid;
    return dim3{t % S.block.x, t / S.block.x % S.block.y, t / (S.block.x * S.block.y)};
}
template <typename T> inline T* dyn_smem() { return reinterpret_cast<T*>(S.dyn.data()); }
template <typename T> inline T* static_smem(int id, size_t n) {   // the block's copy of one __shared__ array
    if ((int)S.stat.size() <= id) S.stat.resize(id + 1);
    std::vector<uint64_t>& v = S.stat[id];
    const size_t words = (n * sizeof(T) + 7) / 8;
    if (v.size() < words) v.assign(words, ~0ull);     // new: poisoned like the rest
    return reinterpret_cast<T*>(v.data());
}
template <typename P, typename Q> inline P checked_cast(Q q) {   // reinterpret_cast, with the GPU's alignment rule for wide loads and stores
    typedef typename std::remove_cv<typename std::remove_pointer<P>::type>::type E;
    uintptr_t a = reinterpret_cast<uintptr_t>(q);
    for (const Region& r : S.regions)              // inside a memcheck copy: the address it stands for in the tensor
        if (a >= (uintptr_t)r.copy && a < (uintptr_t)r.copy + r.bytes) { a = r.orig + (a - (uintptr_t)r.copy); break; }
    if (a % alignof(E))
        fail("misaligned " + std::to_string(sizeof(E)) + "-byte access: address not a multiple of " + std::to_string(alignof(E)));
    return reinterpret_cast<P>(q);
}
// A memory fault on a fiber (a guard page, or any invalid address) ends the launch with an error instead of the process.
static void on_fault(int sig, siginfo_t* si, void*) {
    if (!S.cur) { signal(sig, SIG_DFL); return; }     // not inside a kernel: fault again, as without the emulator
    S.fault_addr = (uintptr_t)si->si_addr; S.fault_tid = S.cur->tid; S.faulted = true; S.failed = true;
    _longjmp(S.sched, 3);
}
static Region guard(int arg, uintptr_t orig, size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), data = (bytes + 16 + page - 1) / page * page;
    Region r{arg, orig, bytes, nullptr, data + 2 * page, nullptr, {}};
    void* m = mmap(nullptr, r.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return r;
    r.map = (char*)m;
    mprotect(r.map, page, PROT_NONE);
    mprotect(r.map + page + data, page, PROT_NONE);
    r.copy = r.map + page + data - bytes;              // flush against the guard (alignment is checked on the original address)
    std::memcpy(r.copy, (const void*)orig, bytes);
    r.before.assign(r.copy, r.copy + bytes);
    return r;
}
static std::string describe_fault() {
    const uintptr_t a = S.fault_addr;
    char b[256];
    for (const Region& r : S.regions) {
        const uintptr_t lo = (uintptr_t)r.copy, hi = lo + r.bytes;
        if (a >= (uintptr_t)r.map && a < (uintptr_t)r.map + r.map_len) {
            if (a >= hi) snprintf(b, sizeof b, "out-of-bounds access: argument %d, byte %zu of a tensor that spans %zu bytes (%zu past its end)",
                                  r.arg, (size_t)(a - lo), r.bytes, (size_t)(a - hi));
            else snprintf(b, sizeof b, "out-of-bounds access: argument %d, %zu bytes before the start of its tensor (%zu bytes)",
                          r.arg, (size_t)(lo - a), r.bytes);
            return b;
        }
    }
    snprintf(b, sizeof b, "invalid memory access at address 0x%llx (in no argument's tensor)", (unsigned long long)a);
    return b;
}

static inline float h2f(unsigned short b) { _Float16 h; std::memcpy(&h, &b, 2); return (float)h; }
static inline unsigned short f2h(float f) { _Float16 h = (_Float16)f; unsigned short b; std::memcpy(&b, &h, 2); return b; }

static void entry() {
    S.body();
    Fiber* f = S.cur;
    f->done = true; S.done_count++; S.warp_done[f->tid >> 5]++;
    if (S.block_bar.count) fail("a thread ended while others wait at __syncthreads");
    if (S.warp_bar[f->tid >> 5].count) fail("a lane ended while others of its warp wait in a shuffle");
    _longjmp(S.sched, 1);
}

static bool run_block() {                      // every thread of block S.bidx to its end; false on an error (S.error)
    const int n = S.nthreads;
    S.done_count = 0; S.block_bar = Barrier{0, 0};
    for (auto& b : S.warp_bar) b = Barrier{0, 0};
    for (auto& d : S.warp_done) d = 0;
    std::memset(S.dyn.data(), 0xff, S.dyn.size() * 8);          // shared memory starts as NaN: reading it unwritten shows
    for (auto& v : S.stat) std::memset(v.data(), 0xff, v.size() * 8);
    for (int t = 0; t < n; ++t) {
        Fiber& f = S.fibers[t];
        f.tid = t; f.started = f.done = false; f.wait_gen = nullptr;
        getcontext(&f.uc);
        f.uc.uc_stack.ss_sp = S.stacks[t].data(); f.uc.uc_stack.ss_size = STACK; f.uc.uc_link = nullptr;
        makecontext(&f.uc, entry, 0);
        S.order[t] = t;
    }
    while (S.done_count < n) {                 // round robin over the threads that can run; a shuffled order per round
        if (S.shuffle) std::shuffle(S.order.begin(), S.order.begin() + n, S.rng);
        bool progress = false;
        for (int i = 0; i < n; ++i) {
            Fiber* f = &S.fibers[S.order[i]];
            if (f->done || (f->wait_gen && *f->wait_gen == f->wait_val)) continue;
            progress = true;
            S.cur = f;
            if (_setjmp(S.sched) == 0) {
                if (!f->started) { f->started = true; setcontext(&f->uc); }
                _longjmp(f->ctx, 1);
            }
            S.cur = nullptr;
            if (S.faulted) S.error = describe_fault() + " (block (" + std::to_string(S.bidx.x) + "," + std::to_string(S.bidx.y) + "," +
                                     std::to_string(S.bidx.z) + "), thread " + std::to_string(S.fault_tid) + ")";
            if (S.failed) return false;
        }
        if (!progress) {
            S.failed = true;
            S.error = "deadlock: every thread left waits at a barrier the others never reach" + where();
            return false;
        }
    }
    return true;
}

struct Entry { std::vector<size_t> sizes; std::function<void(void**)> invoke; };
template <typename... A, size_t... I> void call(void (*k)(A...), void** a, std::index_sequence<I...>) { k(*reinterpret_cast<A*>(a[I])...); }
template <typename... A> Entry make_entry(void (*k)(A...)) {      // the parameter sizes, and a call from an array of argument addresses
    return Entry{{sizeof(A)...}, [k](void** a) { call(k, a, std::index_sequence_for<A...>{}); }};
}
std::map<std::string, Entry>& registry();
}  // namespace emu

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define threadIdx (emu::thread_idx())
#define blockIdx (emu::S.bidx)
#define blockDim (emu::S.block)
#define gridDim (emu::S.grid)
#define __syncthreads() emu::syncthreads()
#define __shfl_xor_sync(mask, v, m) emu::shfl_xor(mask, v, m)
typedef emu::dim3 dim3;
struct alignas(8) uint2 { unsigned int x, y; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
static inline float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
static inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
