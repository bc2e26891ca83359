#!/usr/bin/env python
"""Run every code cell of a notebook in order, `#| cuda` cells included (`#| slow` ones skipped unless --slow), without nbdev
or Jupyter: for machines that have torch but not nbdev (the GPU box). nbdev_test --flags cuda does the same where nbdev exists.

    python scripts/run_nb_cells.py nbs/16_cuda_kernels.ipynb
"""
import json, sys, time, types

path, slow = sys.argv[1], "--slow" in sys.argv
try: import fastcore.test  # noqa: F401
except ImportError:                                    # minimal stand-in for the one helper the kernels notebook uses
    def test_fail(f, contains=""):
        try: f()
        except Exception as e:
            assert contains in str(e), f"{contains!r} not in {e!r}"; return
        raise AssertionError("expected an exception")
    def test_eq(a, b): assert a == b, f"{a!r} != {b!r}"
    def test_close(a, b, eps=1e-5): assert abs(a - b) < eps, f"{a!r} != {b!r} (eps {eps})"
    fc = types.ModuleType("fastcore"); fct = types.ModuleType("fastcore.test")
    fct.test_fail, fct.test_eq, fct.test_close = test_fail, test_eq, test_close; fc.test = fct
    sys.modules.update({"fastcore": fc, "fastcore.test": fct})
ns = {"__name__": "__main__"}
for i, cell in enumerate(json.load(open(path))["cells"]):
    if cell["cell_type"] != "code": continue
    src = "".join(cell["source"])
    first = src.lstrip().splitlines()[0] if src.strip() else ""
    if "nbdev" in src or (first.startswith("#| slow") and not slow): continue
    t = time.time()
    exec(compile(src, f"{path}[cell {i}]", "exec"), ns)
    if first.startswith("#| cuda"): print(f"cell {i} (cuda) ok in {time.time() - t:.1f}s")
print(f"{path}: all cells ran")
