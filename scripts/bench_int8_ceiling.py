#!/usr/bin/env python
"""How near the int8 GEMM (qgemm.h, int8 activations) runs to the ceiling its own instructions set, on this CPU (not a test).

Three figures in one program, as multiply-adds per second (GMAC/s), at T activation rows (--rows):
  * `ceiling` (one thread): the instructions qmicro issues for an INT4 tile of QG_ROWS weight rows x 4 activation rows (q_dot
    per 4 codes, q_block_end, then the float epilogue: cvt, the scale product, two FMAs, its scales loaded from L1), without
    the loads of weight and activation codes (those operands stay in registers). What the core's vector pipes allow for this
    mix (on AVX2: vpmaddubsw, vpaddw, vpmaddwd, vcvtdq2ps, vmulps, vfmadd).
  * `tile_l1` (one thread): the library's qmicro itself on one repacked tile of QG_ROWS rows of K = 1024 (16 rows: 20 KB with
    its scales, in L1, on AVX2 and AVX-VNNI builds; 32 rows, 40 KB, on AVX-512 ones) times the T activation rows.
  * `gemm` (one thread, then two): qgemm_part on the default model's shapes -- gate|up (3072 x 576), down (576 x 1536),
    q|k|v (960 x 576), o (576 x 576), 30 layers of distinct weights (more than the last-level cache), as a prefill reads them,
    the linears set up as a Plan adds them (rows16_copies) -- the inputs quantized once beforehand (not timed), each product
    its own parallel region.
The program is xllm/csrc/cpu/xllm_cpu.cpp (as `read_source` inlines it) plus a main() written here, compiled with the
library's first flags. Rounds repeat the three; medians are recorded with the CPU, flags and load average.

    python scripts/bench_int8_ceiling.py [--rounds 5] [--rows 128] [--json bench/results/int8_ceiling.jsonl]
"""
import argparse, json, statistics, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rows16 import RANDOM_Q4, library_program                    # random Q4_1 linears; the library plus a main(), run
from xllm.bench import environment, save_results

MAIN = RANDOM_Q4 + r'''
#if !XK_AVX2
int main() { printf("{\"error\": \"the int8 GEMM needs an AVX2 build\"}\n"); }
#else
// qmicro's instructions for an INT4 tile without its code loads: QG_MR x RN accumulators, 8 q_dot steps a block on weights
// and activation words held in registers, then qmicro's epilogue with its scales read from L1 (ws, wm: a block's weight
// rows; d, s: the activation rows'). The asm barriers keep the compiler from hoisting the products out of the loop.
template <int RN> static double ceiling_gmac(int64_t blocks) {
    alignas(64) float ws[2 * QG_ROWS], wm[2 * QG_ROWS], d[2 * RN], sq[2 * RN];
    for (int i = 0; i < 2 * QG_ROWS; i++) { ws[i] = 0.01f * (i + 1); wm[i] = -0.02f * (i + 1); }
    for (int j = 0; j < 2 * RN; j++) { d[j] = 0.5f + j; sq[j] = 0.1f * j; }
    alignas(64) uint8_t wb[64];
    qvi w[QG_MR]; qvf acc[QG_MR][RN];
    for (int m = 0; m < QG_MR; m++) { std::memset(wb, 3 + m, 64); w[m] = qi_load(wb); for (int j = 0; j < RN; j++) acc[m][j] = qf_zero(); }
    const double t0 = Plan::now();
    for (int64_t b = 0; b < blocks; b++) {
        qvi ia[QG_MR][RN];
        for (int m = 0; m < QG_MR; m++) for (int j = 0; j < RN; j++) ia[m][j] = qi_zero();
#pragma GCC unroll 8
        for (int k4 = 0; k4 < 8; k4++)
            for (int m = 0; m < QG_MR; m++) {
                __asm__("" : "+x"(w[m]));
                for (int j = 0; j < RN; j++) ia[m][j] = q_dot<true>(ia[m][j], w[m], 0x01020304 + j);
            }
        const int64_t o = b & 1;    // two blocks' scales in turn
        for (int m = 0; m < QG_MR; m++) {
            const qvf sv = qf_load(ws + o * QG_ROWS + m * QG_NR);
            for (int j = 0; j < RN; j++) {
                acc[m][j] = qf_fma(qf_cvt(q_block_end<true>(ia[m][j])), qf_mul(sv, qf_set1(d[o * RN + j])), acc[m][j]);
                acc[m][j] = qf_fma(qf_load(wm + o * QG_ROWS + m * QG_NR), qf_set1(sq[o * RN + j]), acc[m][j]);
            }
        }
    }
    const double dt = Plan::now() - t0;
    float sink = 0; alignas(64) float out[QG_NR];
    for (int m = 0; m < QG_MR; m++) for (int j = 0; j < RN; j++) { qf_store(out, acc[m][j]); sink += out[0]; }
    if (sink == 12345.0f) printf(" ");
    return blocks * 32.0 * QG_ROWS * RN / dt / 1e9;
}
int main(int argc, char** argv) {
    const int rounds = atoi(argv[1]); const int64_t T = atoll(argv[2]);
    std::mt19937 rng(1);
    // the L1 tile: QG_ROWS weight rows of K = 1024, repacked once, times the T activation rows
    const int64_t KT = 1024, TT = T, nbt = KT / 32;
    std::vector<uint8_t> tw; std::vector<uint16_t> ts, tm; const Lin LT = random_q4(rng, QG_ROWS, KT, tw, ts, tm);
    std::vector<float> xt(TT * KT); for (auto& v : xt) v = (rng() % 2000) / 1000.0f - 1.0f;
    QScratch qst; QAct AT = qst.get(TT, KT, false); quantize_rows(xt.data(), 0, TT, AT);
    avec<uint8_t> wq(QG_ROWS * nbt * 32 + 64); avec<float> wsm(2 * QG_ROWS * nbt);
    qrepack(LT, 0, wq.data(), wsm.data(), wsm.data() + QG_ROWS * nbt);
    std::vector<float> yt(TT * QG_ROWS);
    // the model's shapes, 30 layers of each
    struct Shape { const char* name; int64_t N, K; };
    const Shape shapes[] = {{"gate|up", 3072, 576}, {"down", 576, 1536}, {"q|k|v", 960, 576}, {"o", 576, 576}};
    const int NL = 30;
    std::vector<std::vector<uint8_t>> W(4 * NL); std::vector<std::vector<uint16_t>> S(4 * NL), M(4 * NL); std::vector<Lin> Ls(4 * NL);
    std::vector<Rows16Copies> C(4 * NL);
    for (int s = 0; s < 4; s++) for (int l = 0; l < NL; l++) {
        const int i = s * NL + l; Ls[i] = random_q4(rng, shapes[s].N, shapes[s].K, W[i], S[i], M[i]);
        if (rows16_ok(Ls[i])) rows16_copies(Ls[i], C[i]);      // as a Plan adds the linear (the repack reads its interleaved scales)
    }
    std::vector<float> x(T * 1536); for (auto& v : x) v = (rng() % 2000) / 1000.0f - 1.0f;
    std::vector<float> y(T * 3072);
    QScratch qs576, qs1536;      // the two inputs' quantized forms (K = 576, 1536), made once: the products alone are timed
    QAct A576 = qs576.get(T, 576, false), A1536 = qs1536.get(T, 1536, false);
    quantize_rows(x.data(), 0, T, A576); quantize_rows(x.data(), 0, T, A1536);
    double macs_row = 0; for (const Lin& L : Ls) macs_row += (double)L.N * L.K;   // the 120 linears' multiply-adds for one activation row
    printf("{\"isa\": \"%s\", \"rows\": %lld, \"macs_per_row\": %.0f, \"runs\": [", XK_ISA >= 3 ? "avx512-vnni" : XK_ISA == 2 ? "avx-vnni" : "avx2", (long long)T, macs_row);
    bool first = true;
    for (int r = 0; r < rounds; r++) {
        const double ceil = ceiling_gmac<4>(2000000);
        double t0 = Plan::now(); const int reps = 20;
        for (int it = 0; it < reps; it++)
            for (int64_t j0 = 0; j0 < TT; j0 += 4) qmicro<true, false, 4, false>(wq.data(), wsm.data(), wsm.data() + QG_ROWS * nbt, AT, j0, yt.data(), QG_ROWS, 0, nullptr);
        const double tile = reps * (double)QG_ROWS * KT * TT / (Plan::now() - t0) / 1e9;
        double gemm[3] = {0, 0, 0};
        for (int nt = 1; nt <= 2; nt++) {
            double macs = 0; t0 = Plan::now();
            for (int l = 0; l < NL; l++) for (int s = 0; s < 4; s++) {
                const Lin& L = Ls[s * NL + l];
                const QAct& A = L.K == 576 ? A576 : A1536;
                std::atomic<int64_t> next{0}; float* ys[1] = {y.data()};
#pragma omp parallel num_threads(nt)
                qgemm_part(&L, 1, A, T, ys, next);
                macs += (double)L.N * L.K * T;
            }
            gemm[nt] = macs / (Plan::now() - t0) / 1e9;
        }
        printf("%s{\"ceiling_gmac_s\": %.2f, \"tile_l1_gmac_s\": %.2f, \"gemm_1t_gmac_s\": %.2f, \"gemm_2t_gmac_s\": %.2f}", first ? "" : ", ", ceil, tile, gemm[1], gemm[2]);
        first = false; fflush(stdout);
    }
    printf("]}\n");
}
#endif
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=128, help="activation rows T of the whole GEMM (128: a prefill; 32: a 32-sequence decode step)")
    ap.add_argument("--json", default=None, help="append the record here (JSON Lines)")
    a = ap.parse_args()
    if a.rows < 4 or a.rows % 4: ap.error(f"--rows: a positive multiple of 4 (the tile's activation rows), got {a.rows}")
    env = environment()
    out = library_program(MAIN, [a.rounds, a.rows], "ceiling")
    med = {k: statistics.median(r[k] for r in out["runs"]) for k in out["runs"][0]}
    rec = {"name": "int8-gemm-ceiling", "workload": f"INT4 (Q4_1) tiles; the default model's 4 linears x 30 layers at {out['rows']} rows",
           "runner": "cpu", **env, "kernel_isa": out["isa"], "rows": out["rows"], "macs_per_row": out["macs_per_row"], "rounds": a.rounds,
           "median": med, "tile_of_ceiling": med["tile_l1_gmac_s"] / med["ceiling_gmac_s"],
           "gemm_1t_of_tile": med["gemm_1t_gmac_s"] / med["tile_l1_gmac_s"], "runs": out["runs"]}
    print(json.dumps({k: v for k, v in rec.items() if k != "runs"}, indent=1))
    if a.json: save_results([rec], a.json)


if __name__ == "__main__":
    main()
