#!/usr/bin/env python
"""The INT4 decode row kernels side by side in one program (not a test): rows4_a8 (4 weight rows a pass) against rows16_a8
(16 rows a pass: 512-bit vpdpbusd on AVX-512 VNNI builds, two passes of 8 rows on AVX2 and AVX-VNNI ones), on the
default model's gate|up shape (3072 x 576, groups of 32 with minimums, as Q4_1), 64 copies of the layer (60 MB, more
than the last-level cache) read in turn, as a decode step reads its layers. Also a plain read of 256 MiB (512-bit loads,
256-bit without AVX-512) on 1 and 2 threads: the memory's ceiling in the same run. The program is
xllm/csrc/cpu/xllm_cpu.cpp (as `read_source` inlines it) plus a main() written here, compiled with the library's first
flags; it first checks the two kernels give the same bits. Rounds alternate the two kernels; medians per thread count.

    python scripts/bench_rows16.py [--rounds 5] [--json bench/results/rows16_kernel.json]
"""
import argparse, json, statistics, subprocess, sys, tempfile
from pathlib import Path
from xllm.bench import environment, save_results
from xllm.core import read_source
from xllm.cpu_kernels import _flag_sets

# A random INT4 linear N x K as GGUF's Q4_1 layers are (groups of 32 with minimums), its codes, scales and minimums in w, s, m
# (kept by the caller): for the programs here and scripts/bench_int8_ceiling.py's
RANDOM_Q4 = r'''
#include <random>
static Lin random_q4(std::mt19937& rng, int64_t N, int64_t K, std::vector<uint8_t>& w, std::vector<uint16_t>& s, std::vector<uint16_t>& m) {
    const int64_t G = K / 32;
    w.resize(N * K / 2); for (auto& c : w) c = (uint8_t)rng();
    s.resize(N * G); m.resize(N * G);
    for (auto& v : s) v = f2h(0.001f + (rng() % 1000) * 1e-5f);
    for (auto& v : m) v = f2h(-0.01f + (rng() % 1000) * 1e-5f);
    return make_lin(Q4, N, K, G, w.data(), s.data(), m.data(), nullptr, 1);
}
'''


def library_program(main: str, args: list[str], name: str) -> dict:
    """C++ `main` (a main() and what it needs) compiled after xllm/csrc/cpu/xllm_cpu.cpp (as `read_source` inlines it) with
    the library's first flags, then run with `args`: the JSON it prints. A failed compile or run, or an {"error": ...}, ends
    the script with the message."""
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / f"{name}.cpp", Path(d) / name
        src.write_text(read_source("cpu/xllm_cpu.cpp") + main)
        flags = [f for f in _flag_sets()[0] if f not in ("-shared", "-fPIC")]
        c = subprocess.run(["g++", *flags, str(src), "-o", str(exe)], capture_output=True, text=True)
        if c.returncode: sys.exit(f"compile failed:\n{c.stderr[-3000:]}")
        p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=3600)
        if p.returncode: sys.exit(f"run failed:\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout)
    if "error" in out: sys.exit(out["error"])
    return out


MAIN = RANDOM_Q4 + r'''
int main(int argc, char** argv) {
    const int64_t N = 3072, K = 576, G = K / 32, NL = 64; const int rounds = atoi(argv[1]);
    std::mt19937 rng(1);
    std::vector<std::vector<uint8_t>> W(NL); std::vector<std::vector<uint16_t>> S(NL), M(NL); std::vector<Rows16Copies> C(NL); std::vector<Lin> Ls;
    for (int l = 0; l < NL; l++) {
        Lin L = random_q4(rng, N, K, W[l], S[l], M[l]);
        if (!rows16_ok(L)) { printf("{\"error\": \"rows16_a8 does not apply in this build (AVX2 needed)\"}\n"); return 0; }
        rows16_copies(L, C[l]);                     // as a Plan adds the linear
        Ls.push_back(L);
    }
    std::vector<float> x(K); for (auto& v : x) v = (rng() % 2000) / 1000.0f - 1.0f;
    std::vector<float> scratch(prep_floats(Ls[0]) + 64); Prep p; prepare(Ls[0], x.data(), scratch.data(), p);
    std::vector<float> y0(N), y1(N);
    for (int64_t n = 0; n < N; n += 16) { for (int k = 0; k < 16; k += 4) rows4_a8(Ls[0], n + k, p, y0.data() + n + k); rows16_a8(Ls[0], n, p, y1.data() + n); }
    const bool same = !std::memcmp(y0.data(), y1.data(), N * sizeof(float));
    const double bytes = N * K / 2 + 2.0 * N * G * 2;
    std::vector<uint8_t> big(256ull << 20, 1);
    printf("{\"same_bits\": %s, \"layer_bytes\": %.0f, \"runs\": [", same ? "true" : "false", bytes);
    bool first = true;
    for (int r = 0; r < rounds; r++) for (int nt = 1; nt <= 2; nt++) for (int var = 0; var < 3; var++) {
        const double t0 = Plan::now(); const int iters = var == 2 ? 4 : 20; long long sink = 0;
        for (int it = 0; it < iters; it++) {
            if (var == 2) {
#pragma omp parallel num_threads(nt) reduction(+:sink)
                { int64_t a, b; split((int64_t)big.size() / 64, omp_get_thread_num(), nt, a, b, 1);
#if XK_ISA >= 3
                  __m512i acc = _mm512_setzero_si512();
                  for (int64_t i = a; i < b; i++) acc = _mm512_add_epi64(acc, _mm512_loadu_si512((const void*)(big.data() + i * 64)));
                  sink += _mm512_reduce_add_epi64(acc);
#else
                  __m256i acc = _mm256_setzero_si256();
                  for (int64_t i = a; i < b; i++) acc = _mm256_add_epi64(acc, _mm256_add_epi64(_mm256_loadu_si256((const __m256i*)(big.data() + i * 64)),
                                                                                             _mm256_loadu_si256((const __m256i*)(big.data() + i * 64 + 32))));
                  sink += _mm256_extract_epi64(acc, 0) + _mm256_extract_epi64(acc, 1) + _mm256_extract_epi64(acc, 2) + _mm256_extract_epi64(acc, 3);
#endif
                }
                continue;
            }
            for (int l = 0; l < NL; l++) {
#pragma omp parallel num_threads(nt)
                { int64_t a, b; split(N, omp_get_thread_num(), nt, a, b, 16);
                  for (int64_t n = a; n < b; n += 16) {
                      if (var == 0) for (int k = 0; k < 16; k += 4) rows4_a8(Ls[l], n + k, p, y0.data() + n + k);
                      else rows16_a8(Ls[l], n, p, y1.data() + n); } }
            }
        }
        const double dt = Plan::now() - t0, gbs = (var == 2 ? (double)big.size() * iters : bytes * NL * iters) / dt / 1e9;
        printf("%s{\"kernel\": \"%s\", \"threads\": %d, \"gb_s\": %.2f, \"us_per_layer\": %.2f}", first ? "" : ", ",
               var == 0 ? "rows4_a8" : var == 1 ? "rows16_a8" : "read", nt, gbs, var == 2 ? 0.0 : dt / (NL * iters) * 1e6);
        first = false; if (sink == 42) printf(" ");
    }
    printf("]}\n");
}
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None, help="append the record to this .jsonl file or write it to this .json")
    a = ap.parse_args()
    env = environment()
    out = library_program(MAIN, [a.rounds], "rows16")
    med = {f"{k}_{t}t": statistics.median(r["gb_s"] for r in out["runs"] if r["kernel"] == k and r["threads"] == t)
           for k in ("rows4_a8", "rows16_a8", "read") for t in (1, 2)}
    rec = {"name": "rows16-kernel", "workload": "INT4 3072x576 (Q4_1 gate|up), 64 layers in turn, one int8 input row; a 256 MiB read",
           "runner": "cpu", **env, "rounds": a.rounds, "same_bits": out["same_bits"], "medians_gb_s": med,
           "speedup_1t": med["rows16_a8_1t"] / med["rows4_a8_1t"], "speedup_2t": med["rows16_a8_2t"] / med["rows4_a8_2t"], "runs": out["runs"]}
    for t in (1, 2):
        print(f"{t} thread(s): rows4_a8 {med[f'rows4_a8_{t}t']:.1f} GB/s, rows16_a8 {med[f'rows16_a8_{t}t']:.1f} GB/s "
              f"({rec[f'speedup_{t}t']:.2f}x), plain read {med[f'read_{t}t']:.1f} GB/s")
    print(f"same bits: {out['same_bits']}; {env['cpu']}, load {env['load_avg']}")
    if a.json: save_results([rec], a.json)


if __name__ == "__main__":
    main()
