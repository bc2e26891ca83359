#!/usr/bin/env bash
# xllm's GPU checks, made for a bare H200 lease: sections chosen by GPU_CHECK_SECTIONS, each with its own time limit, inside
# GPU_CHECK_BUDGET seconds (default 450); a failing or timed-out section is recorded and the next one runs, except `env`,
# whose failure stops the run (every other section would fail the same way).
#
# ---- Plan for one 15-minute H200 lease (device time runs from the machine's start, a minute or two, to its give-back) ----
# Here, first:  bash scripts/gpu_wheels.sh     -> .whl/, the 17 wheels the image lacks (8.8 MiB; tree + wheels 12.6 of 64 MiB)
# Call 1, run(carry=[".whl"], timeout_s=400): the speed table, then correctness
#   GPU_CHECK_BUDGET=370 GPU_CHECK_SECTIONS="env roofline xllm_graphs transformers correctness xllm_int8kv" bash scripts/gpu_check.sh
# Call 2 right away (the machine stays warm 30 s after a call: the wheels installed in /tmp and CuPy's kernel cache are
# still there), run(carry=[".whl"], timeout_s=270):
#   GPU_CHECK_BUDGET=240 GPU_CHECK_SECTIONS="env pytest_gpu tensor_parallel kernels xllm_int4 xllm_engine" bash scripts/gpu_check.sh
# Then give_back. Worst case about 120 s start + 400 + 270 + 30 s transfers = 820 s of the 900. Left for a later lease:
# cli (the same engine as xllm_graphs through the CLI) and notebooks (the cuda cells; pytest_gpu runs the same checks);
# engine_host needs no GPU (run it on any machine). A section that the budget cannot fit is recorded as skipped.
# What comes back (at most 8 files): $OUT/gpu_check.tar.gz (every log and record), $OUT/gpu_table.txt, $OUT/status.txt.
#
# Sections (in the order GPU_CHECK_SECTIONS names them; default all, in this order):
#   env              imports (fails fast), the carried wheels' requirements, NVRTC build timed, one real kernel launch
#   pytest_gpu       tests/test_cuda_{kernels,runner,compile}.py on the GPU (CI runs their emulated halves)
#   correctness      scripts/gpu_correctness.py: cuda vs cpu, engine and CUDA runner (graphs), fp32/fp16, int8 K/V, default model
#   tensor_parallel  scripts/gpu_tp_check.py: TP=1 over NCCL (TP=2 with 2 GPUs) against the single-process runner
#   roofline         scripts/bench_roofline.py: copy bandwidth and fp16 matmul rate measured, the model's sizes
#   xllm_graphs      scripts/gpu_bench.py: the engine with the CUDA runner (graphs), every workload, after a warm-up
#   transformers     scripts/bench_hf_generate.py: transformers generate on the same weights, same workloads
#   xllm_engine      the engine on the torch runner;  xllm_int8kv: CUDA runner, int8 K/V;  xllm_int4: CUDA runner, int4 weights
#   kernels          scripts/bench_cuda_kernels.py: each kernel against torch (rows written as they are measured)
#   cli              `xllm bench --random-weights` through the CLI;  engine_host: `xllm bench host` (the engine's work per step)
#   notebooks        the cuda cells of notebooks 16 and 16b
# Every log streams to its file, every record is appended as it is measured, and after each section the table is remade and
# everything is packed again, so a call cut short still brings back what it finished.
#
# GPU_CHECK_DRY_RUN=1: the same sections on this CPU (CI runs it: tests/test_gpu_check_dryrun.py): a tiny model, float32,
# tiny workloads, the CUDA runner on its TorchOps and the kernels in the emulator where the scripts support it (--device cpu);
# plumbing only, and the table says so. Other settings: GPU_CHECK_OUT (where the tarball and table go; default $OUT, else a
# temporary folder), GPU_CHECK_WHEELS (default .whl), GPU_CHECK_WORKLOADS (FILE:BATCH:MAX_TOKENS ...), PYTHON.
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-450}
DRY=${GPU_CHECK_DRY_RUN:-0}
ALL="env pytest_gpu correctness tensor_parallel roofline xllm_graphs transformers xllm_engine xllm_int8kv xllm_int4 kernels cli engine_host notebooks"
SECTIONS=${GPU_CHECK_SECTIONS:-$ALL}
for s in $SECTIONS; do [[ " $ALL " == *" $s "* ]] || { echo "error: unknown section '$s' in GPU_CHECK_SECTIONS; sections: $ALL" >&2; exit 2; }; done
DEST=${GPU_CHECK_OUT:-${OUT:-}}; [[ -n $DEST ]] || DEST=$(mktemp -d)
mkdir -p "$DEST" || exit 2
WORK=$(mktemp -d); RES=$WORK/gpu_check; mkdir -p "$RES"
export PIP_NO_INDEX=1 PYTHONUNBUFFERED=1 OMP_WAIT_POLICY=PASSIVE    # nothing is fetched: a missing package fails at once
PY=${PYTHON:-python3}
STATUS=$RES/status.txt; : > "$STATUS"
SITE=""

if [[ $DRY == 1 ]]; then
  DEV=cpu DTYPE=float32 CFG=$RES/tiny.json
  echo '{"vocab_size": 512, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}' > "$CFG"
  WORKLOADS=${GPU_CHECK_WORKLOADS:-bench/hello.txt:8:6 bench/prompts.txt:6:16 bench/prompts.txt:1:8}
  RUNNER=()                                     # the device's own runner: --runner cuda needs a GPU
  echo "DRY RUN on the CPU: tiny model, plumbing only" > "$RES/dry_run.txt"
else
  DEV=cuda DTYPE=float16 CFG=llama2-7b
  WORKLOADS=${GPU_CHECK_WORKLOADS:-bench/hello.txt:200:18 bench/prompts.txt:48:512 bench/prompts.txt:160:512 bench/prompts.txt:1:128}
  RUNNER=(--runner cuda)
  WHEELS=${GPU_CHECK_WHEELS:-.whl}
  if compgen -G "$WHEELS/*.whl" >/dev/null; then             # the carried wheels (scripts/gpu_wheels.sh), outside site-packages
    SITE=/tmp/xllm-site
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl \
      || { echo "error: could not install the wheels in $WHEELS" >&2; exit 1; }
  else echo "no wheels in $WHEELS (bash scripts/gpu_wheels.sh makes them): the image's packages only"; fi
fi
export PYTHONPATH="${SITE:+$SITE:}$PWD${PYTHONPATH:+:$PYTHONPATH}"
WL=(); for w in $WORKLOADS; do WL+=(--workload "$w"); done
BENCH=(scripts/gpu_bench.py --random-weights "$CFG" --device "$DEV" --dtype "$DTYPE" "${WL[@]}")

left() { echo $(( BUDGET - ($(date +%s) - START) )); }
pack() {   # the table remade from what is there, and everything packed into $DEST (at most 8 files come back from a GPU run)
  $PY scripts/gpu_table.py "$RES" > "$RES/gpu_table.txt" 2>&1
  cp "$RES/gpu_table.txt" "$STATUS" "$DEST/"
  tar -czf "$DEST/gpu_check.tar.gz.tmp" -C "$WORK" gpu_check && mv "$DEST/gpu_check.tar.gz.tmp" "$DEST/gpu_check.tar.gz"
}
ABORT=""
section() {   # section NAME LIMIT_S COMMAND...: when selected, run with a time limit, log to $RES/NAME.log, record the outcome
  local name=$1 limit=$2; shift 2
  [[ " $SECTIONS " == *" $name "* ]] || return 0
  if [[ -n $ABORT ]]; then echo "$name: skipped ($ABORT)" >> "$STATUS"; return 0; fi
  local l; l=$(left)
  if (( l < 20 )); then echo "$name: skipped (time budget spent)" >> "$STATUS"; echo "=== $name: skipped, no time left ==="; return 0; fi
  (( limit > l - 10 )) && limit=$(( l - 10 ))
  echo "=== $name (limit ${limit}s, $(left)s of the budget left) ==="
  local s rc msg; s=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$RES/$name.log" 2>&1; rc=$?
  tail -n 12 "$RES/$name.log" | cut -c1-300
  case $rc in 0) msg=ok;; 124|137) msg="TIMEOUT after ${limit}s";; *) msg="FAILED (exit $rc)";; esac
  echo "$name: $msg, $(( $(date +%s) - s ))s" >> "$STATUS"
  [[ $name == env && $rc != 0 ]] && ABORT="env failed: see env.log"
  pack
}
dry_skip() {  # a section with no CPU form: recorded, not run
  [[ " $SECTIONS " == *" $1 "* ]] && echo "$1: skipped (dry run: $2)" >> "$STATUS"; return 0
}
in_order() {  # the sections in the order GPU_CHECK_SECTIONS names them
  for s in $SECTIONS; do run_$s; done
}

run_env() { section env 120 $PY scripts/gpu_env.py --device "$DEV" ${SITE:+--site "$SITE"}; }
run_pytest_gpu() {
  local files=(tests/test_cuda_kernels.py tests/test_cuda_runner.py tests/test_cuda_compile.py)
  if [[ $DRY == 1 ]]; then section pytest_gpu 60 $PY -m pytest -q -p no:cacheprovider --collect-only "${files[@]}"   # their GPU cases skip here
  else section pytest_gpu 130 $PY -m pytest -q -s -p no:cacheprovider -k "not emulated" "${files[@]}"; fi   # CI runs the emulated ones
}
run_correctness() { section correctness 90 $PY scripts/gpu_correctness.py --device "$DEV"; }
run_tensor_parallel() { section tensor_parallel 100 $PY scripts/gpu_tp_check.py --device "$DEV"; }
run_roofline() { section roofline 30 bash -c "$PY scripts/bench_roofline.py '$CFG' --device $DEV > '$RES/roofline.json.tmp' && mv '$RES/roofline.json.tmp' '$RES/roofline.json' && cat '$RES/roofline.json'"; }
run_xllm_graphs() { section xllm_graphs 110 $PY "${BENCH[@]}" "${RUNNER[@]}" --json "$RES/xllm_graphs.jsonl"; }
run_transformers() { section transformers 100 $PY scripts/bench_hf_generate.py --random-weights "$CFG" --device "$DEV" --dtype "$DTYPE" "${WL[@]}" --json "$RES/hf.jsonl"; }
run_xllm_engine() { section xllm_engine 100 $PY "${BENCH[@]}" --runner torch --json "$RES/xllm_engine.jsonl"; }
run_xllm_int8kv() { section xllm_int8kv 110 $PY "${BENCH[@]}" "${RUNNER[@]}" --kv-cache-dtype int8 --json "$RES/xllm_int8kv.jsonl"; }
run_xllm_int4() {
  local w=(--workload bench/prompts.txt:1:128 --workload bench/hello.txt:200:18); [[ $DRY == 1 ]] && w=(--workload bench/prompts.txt:1:8 --workload bench/hello.txt:8:6)
  section xllm_int4 90 $PY scripts/gpu_bench.py --random-weights "$CFG" --device "$DEV" --dtype "$DTYPE" "${RUNNER[@]}" --quantization int4 "${w[@]}" --json "$RES/xllm_int4.jsonl"
}
run_kernels() {
  [[ $DRY == 1 ]] && ! command -v "${CXX:-g++}" >/dev/null && { dry_skip kernels "no C++ compiler for the CUDA emulator"; return 0; }
  section kernels 75 $PY scripts/bench_cuda_kernels.py "$RES/kernels.jsonl" --device "$DEV"; }
run_cli() {
  local b=200 n=18; [[ $DRY == 1 ]] && b=8 n=6
  section cli 50 $PY -m xllm bench --random-weights "$CFG" --device "$DEV" --dtype "$DTYPE" --file bench/hello.txt --batch $b --max-tokens $n --ignore-eos --max-num-seqs $b --json "$RES/cli.json"
}
run_engine_host() {
  local runs=("--batch 200 --prompt-tokens 8 --max-tokens 18" "--batch 160 --prompt-tokens 30 --max-tokens 128" "--batch 160 --prompt-tokens 30 --max-tokens 128 --temperature 0.8")
  [[ $DRY == 1 ]] && runs=("--batch 8 --prompt-tokens 8 --max-tokens 6 --reps 1")
  local cmd="" r; for r in "${runs[@]}"; do cmd+="$PY -m xllm bench host --threads 1 $r --json '$RES/engine_host.jsonl' && "; done
  section engine_host 40 bash -c "${cmd}true"
}
run_notebooks() {
  [[ $DRY == 1 ]] && { dry_skip notebooks "the notebooks' cuda cells need a GPU"; return 0; }
  section notebooks 70 bash -c "for nb in nbs/16_cuda_kernels.ipynb nbs/16b_cuda_runner.ipynb; do $PY scripts/run_nb_cells.py \$nb || exit 1; done"
}

echo "xllm gpu_check: sections '$SECTIONS', budget ${BUDGET}s, device $DEV$([[ $DRY == 1 ]] && echo ' (DRY RUN)'); results in $DEST"
in_order
pack
cat "$RES/gpu_table.txt"
echo "total $(( $(date +%s) - START ))s; everything in $DEST/gpu_check.tar.gz (the table: $DEST/gpu_table.txt)"
! grep -q -e FAILED -e TIMEOUT -e "env failed" "$STATUS"
