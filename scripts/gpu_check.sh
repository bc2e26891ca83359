#!/usr/bin/env bash
# xllm's GPU checks in one call (target: under 8 minutes on an H200; GPU_CHECK_BUDGET seconds, default 450).
# Installs nothing but CuPy (cupy-cuda13x for a CUDA 13 driver, else cupy-cuda12x) when it is missing. Sections, in priority
# order, each with its own time limit; a failing or timed-out section is reported and the next one runs:
#   env, pytest GPU tests, correctness (cuda vs cpu), tensor parallelism (TP=1 through the TP path on NCCL, TP=2 with 2 GPUs), speed (`xllm bench` with the CUDA runner, transformers generate, roofline, the
#   CLI), the engine's host work per step (`xllm bench host`), the cuda cells of the kernel/runner notebooks, kernel timings, the
#   engine on the torch runner, the CUDA runner over an int8 K/V pool, the CUDA runner on int4 weights (GEMV kernels in decode,
#   dequantize + cuBLAS in prefill). Every speed result is a record of xllm.bench's schema (notebook 20).
# Logs and JSON results go to $OUT/gpu_check (or a temp dir); one summary table is printed at the end.
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-450}
RES="${OUT:-$(mktemp -d)}/gpu_check"
mkdir -p "$RES"
export PYTHONUNBUFFERED=1 OMP_WAIT_POLICY=PASSIVE PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
STATUS="$RES/status.txt"; : > "$STATUS"
CFG=${XLLM_CHECK_CONFIG:-llama2-7b}          # dry run on a CPU: XLLM_CHECK_CONFIG=tiny.json XLLM_CHECK_DEVICE=cpu XLLM_CHECK_WORKLOADS="..."
DEV=${XLLM_CHECK_DEVICE:-cuda}
WL=(); MAXB=1                                 # `xllm bench` workloads FILE:BATCH:MAX_TOKENS, one engine sized for the largest batch
for w in ${XLLM_CHECK_WORKLOADS:-bench/hello.txt:200:18 bench/prompts.txt:48:512 bench/prompts.txt:160:512 bench/prompts.txt:1:128}; do
  WL+=(--workload "$w"); b=${w%:*}; b=${b##*:}; (( b > MAXB )) && MAXB=$b
done
BENCH=(-m xllm bench --random-weights "$CFG" --device "$DEV" --ignore-eos --max-num-seqs "$MAXB")   # throughput on a random model of the shape
CUDA_RUNNER=(--runner cuda); [[ $DEV == cuda* ]] || CUDA_RUNNER=()                              # a CPU dry run: the device's own runner

left() { echo $(( BUDGET - ($(date +%s) - START) )); }
section() {   # section NAME LIMIT_S COMMAND...: run with a time limit, log to $RES/NAME.log, record the outcome
  local name=$1 limit=$2; shift 2
  local l; l=$(left)
  if (( l < 20 )); then echo "$name: skipped (time budget spent)" >> "$STATUS"; echo "=== $name: skipped, no time left ==="; return; fi
  (( limit > l - 10 )) && limit=$(( l - 10 ))
  echo "=== $name (limit ${limit}s, $(left)s of the budget left) ==="
  local s rc msg; s=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$RES/$name.log" 2>&1; rc=$?
  tail -n 15 "$RES/$name.log" | cut -c1-400
  case $rc in 0) msg=ok;; 124|137) msg="TIMEOUT after ${limit}s";; *) msg="FAILED (exit $rc)";; esac
  echo "$name: $msg, $(( $(date +%s) - s ))s" >> "$STATUS"
}

env_check() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || { echo "no nvidia-smi: not a GPU machine"; return 1; }
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available()); assert torch.cuda.is_available()" || return 1
  if ! $PY -c "import cupy" 2>/dev/null; then
    local major; major=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -1)
    [[ "$major" == 13 ]] && pkg=cupy-cuda13x || pkg=cupy-cuda12x
    echo "CuPy missing: pip install $pkg (driver CUDA ${major:-?})"
    $PY -m pip install -q "$pkg" || { echo "could not install $pkg"; return 1; }
  fi
  $PY -c "import cupy; print('cupy', cupy.__version__)"
  # build the kernels once here (NVRTC, timed): first the part a Llama-2-7B runner needs (what LLM builds at its first start),
  # then all of them; CuPy keeps the results in its disk cache, so later sections only load them
  $PY -c "
import time, xllm.cuda_kernels as ck
from xllm.stand_ins import random_config
t = time.perf_counter(); n = ck.load_kernels('cuda', ck.model_kernel_names(random_config('llama2-7b'))); a = time.perf_counter() - t
t = time.perf_counter(); m = ck.load_kernels('cuda'); b = time.perf_counter() - t
print(f'NVRTC build: {n} kernels of a llama2-7b runner {a:.1f} s (first start), then the other {m - n} {b:.1f} s')" || return 1
  for m in pytest transformers nbdev; do $PY -c "import $m" 2>/dev/null && echo "$m: present" || echo "$m: MISSING (its section will fail)"; done
}

notebooks() {
  local rc=0 nb
  for nb in nbs/16_cuda_kernels.ipynb nbs/16b_cuda_runner.ipynb; do
    if command -v nbdev_test >/dev/null; then nbdev_test --path "$nb" --flags cuda || rc=1
    else $PY scripts/run_nb_cells.py "$nb" || rc=1; fi
  done
  return $rc
}

export -f env_check notebooks
export PY
section env 150 bash -c env_check
section pytest_gpu 130 $PY -m pytest -q -s -p no:cacheprovider -k "not emulated" tests/test_cuda_kernels.py tests/test_cuda_runner.py tests/test_cuda_compile.py   # CI runs the emulated ones
section correctness 90 $PY scripts/gpu_correctness.py
section tensor_parallel 100 $PY scripts/gpu_tp_check.py --device "$DEV"
section xllm_graphs 110 $PY "${BENCH[@]}" "${CUDA_RUNNER[@]}" "${WL[@]}" --json "$RES/xllm_graphs.jsonl"
section transformers 100 $PY scripts/bench_hf_generate.py --random-weights $CFG --device $DEV "${WL[@]}" --json "$RES/hf.jsonl"
section roofline 20 bash -c "$PY scripts/bench_roofline.py $CFG > '$RES/roofline.json' && cat '$RES/roofline.json'"
section engine_host 40 bash -c "$PY -m xllm bench host --threads 1 --batch 200 --prompt-tokens 8 --max-tokens 18 --json '$RES/engine_host.jsonl' && $PY -m xllm bench host --threads 1 --batch 160 --prompt-tokens 30 --max-tokens 128 --json '$RES/engine_host.jsonl' && $PY -m xllm bench host --threads 1 --batch 160 --prompt-tokens 30 --max-tokens 128 --temperature 0.8 --json '$RES/engine_host.jsonl'"
section cli 50 $PY -m xllm bench --random-weights $CFG --device $DEV --file bench/hello.txt --batch 200 --max-tokens 18 --ignore-eos --max-num-seqs 200 --json "$RES/cli.json"
section notebooks 70 bash -c notebooks
section kernels 75 $PY scripts/bench_cuda_kernels.py "$RES/kernels.jsonl"
section xllm_engine 100 $PY "${BENCH[@]}" --runner torch "${WL[@]}" --json "$RES/xllm_engine.jsonl"
section xllm_int8kv 110 $PY "${BENCH[@]}" "${CUDA_RUNNER[@]}" --kv-cache-dtype int8 "${WL[@]}" --json "$RES/xllm_int8kv.jsonl"

section xllm_int4 90 $PY "${BENCH[@]}" "${CUDA_RUNNER[@]}" --quantization int4 --workload bench/prompts.txt:1:128 --workload bench/hello.txt:200:18 --json "$RES/xllm_int4.jsonl"

$PY scripts/gpu_table.py "$RES"
echo "total $(( $(date +%s) - START ))s; logs and JSON in $RES"
! grep -q -e FAILED -e TIMEOUT "$STATUS"
