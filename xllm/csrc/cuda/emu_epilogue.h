// ---- the launch entry point ------------------------------------------------------------------------------------------
// extents[i] > 0: argument i is a pointer to a tensor spanning that many bytes, run on a guarded copy (memcheck); else -1.
extern "C" int emu_launch(const char* name, const unsigned* grid, const unsigned* block, long long shared_bytes, void** args,
                          const long long* sizes, const long long* extents, int nargs, unsigned seed, char* err, int errlen) {
    using namespace emu;
    const std::string k(name);
    auto bad = [&](const std::string& m) { snprintf(err, errlen, "%s: %s", name, m.c_str()); return 1; };
    auto it = registry().find(k);
    if (it == registry().end()) return bad("no such kernel");
    const Entry& e = it->second;
    if (nargs != (int)e.sizes.size()) return bad(std::to_string(nargs) + " arguments given, the kernel takes " + std::to_string(e.sizes.size()));
    for (int i = 0; i < nargs; ++i)
        if ((size_t)sizes[i] != e.sizes[i])
            return bad("argument " + std::to_string(i) + " is " + std::to_string(sizes[i]) + " bytes, the parameter " + std::to_string(e.sizes[i]));
    const long long nt = (long long)block[0] * block[1] * block[2];
    if (!grid[0] || !grid[1] || !grid[2] || !nt) return bad("empty grid or block");
    if (nt > 1024 || block[2] > 64) return bad("a block of " + std::to_string(nt) + " threads (CUDA's limit: 1024, z <= 64)");
    if (grid[1] > 65535 || grid[2] > 65535) return bad("grid y or z above 65535");
    if (shared_bytes < 0 || shared_bytes > 48 * 1024)
        return bad(std::to_string(shared_bytes) + " bytes of dynamic shared memory (the limit without an opt-in is 49152)");
    S.grid = dim3{grid[0], grid[1], grid[2]}; S.block = dim3{block[0], block[1], block[2]};
    S.nthreads = (int)nt;
    const int nwarps = (S.nthreads + 31) / 32;
    if ((int)S.fibers.size() < S.nthreads) { S.fibers.resize(S.nthreads); S.stacks.resize(S.nthreads); }
    for (int t = 0; t < S.nthreads; ++t) if (S.stacks[t].size() < STACK) S.stacks[t].resize(STACK);
    S.warp_bar.assign(nwarps, Barrier{0, 0}); S.warp_done.assign(nwarps, 0);
    S.lane_val.assign(nwarps * 32, 0); S.order.assign(S.nthreads, 0);
    S.dyn.assign((shared_bytes + 7) / 8 + 1, 0);
    S.failed = S.faulted = false; S.error.clear(); S.shuffle = seed != 0; S.rng.seed(seed);
    std::vector<uint64_t> moved(nargs);                // guarded copies replace the tensors' addresses
    std::vector<void*> a(args, args + nargs);
    S.regions.clear();
    for (int i = 0; i < nargs; ++i)
        if (extents[i] > 0 && e.sizes[i] == 8) {
            Region r = guard(i, *reinterpret_cast<uint64_t*>(args[i]), (size_t)extents[i]);
            if (!r.map) { for (Region& q : S.regions) munmap(q.map, q.map_len); return bad("memcheck: mmap failed"); }
            S.regions.push_back(r);
            moved[i] = (uint64_t)(uintptr_t)r.copy; a[i] = &moved[i];
        }
    void** av = a.data();
    S.body = [&e, av]() { e.invoke(av); };
    struct sigaction sa, old_segv, old_bus;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault; sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, &old_segv); sigaction(SIGBUS, &sa, &old_bus);
    bool ok = true;
    for (unsigned z = 0; ok && z < grid[2]; ++z)
        for (unsigned y = 0; ok && y < grid[1]; ++y)
            for (unsigned x = 0; ok && x < grid[0]; ++x) {
                S.bidx = dim3{x, y, z};
                ok = run_block();
            }
    sigaction(SIGSEGV, &old_segv, nullptr); sigaction(SIGBUS, &old_bus, nullptr);
    for (Region& r : S.regions) {      // back to the tensors: only the bytes the kernel changed, as two views may overlap
        if (ok) {                      // (rope's q and k in one qkv buffer: each copy also holds the other's rows, unchanged)
            char* o = reinterpret_cast<char*>(r.orig);
            for (size_t j = 0; j < r.bytes; ++j) if (r.copy[j] != r.before[j]) o[j] = r.copy[j];
        }
        munmap(r.map, r.map_len);
    }
    S.regions.clear();
    return ok ? 0 : bad(S.error);
}
