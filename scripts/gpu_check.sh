#!/usr/bin/env bash
# GPU checks for xllm's CUDA kernels (one device call): CuPy if missing, the GPU pytest, the cuda notebook cells, the timings.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
if ! $PY -c "import cupy" 2>/dev/null; then
  major=$($PY -c "import torch; print((torch.version.cuda or '12').split('.')[0])")
  $PY -m pip install -q "cupy-cuda${major}x" || echo "could not install cupy-cuda${major}x"
fi
$PY -c "import cupy; print('cupy', cupy.__version__)"
$PY -m pytest -q -s -p no:cacheprovider tests/test_cuda_kernels.py tests/test_cuda_compile.py 2>&1; rc=$?
if command -v nbdev_test >/dev/null; then nbdev_test --path nbs/14_cuda_kernels.ipynb --flags cuda || rc=1
else $PY scripts/run_nb_cells.py nbs/14_cuda_kernels.ipynb || rc=1; fi
$PY scripts/bench_cuda_kernels.py || rc=1
exit $rc
