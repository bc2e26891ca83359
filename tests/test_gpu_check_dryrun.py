"""scripts/gpu_check.sh as a dry run on this CPU (GPU_CHECK_DRY_RUN=1): every section runs its CPU form (a tiny model, the CUDA
runner on its TorchOps, the kernels in the emulator, tensor parallelism on gloo), so the plumbing a GPU lease depends on --
section selection, the logs and records, the one tarball, the table -- cannot rot before a GPU is lent. Also what the
tensor_parallel section checks (scripts/gpu_tp_check.py --device cpu): TP=1 bit for bit, TP=2 within 1e-5, both timings."""
import json, os, subprocess, tarfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("env pytest_gpu correctness tensor_parallel roofline xllm_graphs transformers xllm_engine xllm_int8kv xllm_int4 kernels "
            "cli engine_host notebooks").split()


def run_check(out: Path, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPU_CHECK_SECTIONS", "GPU_CHECK_WORKLOADS")}
    return subprocess.run(["bash", "scripts/gpu_check.sh"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**e, "GPU_CHECK_DRY_RUN": "1", "GPU_CHECK_OUT": str(out), **env})


def test_dry_run_of_every_section(tmp_path):
    t = time.perf_counter()
    r = run_check(tmp_path)
    took = time.perf_counter() - t
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_check.tar.gz", "gpu_table.txt", "status.txt"]   # at most 8 come back
    with tarfile.open(tmp_path / "gpu_check.tar.gz") as tar:
        files = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
        read = lambda n: tar.extractfile(files[n]).read().decode()
        ran = [s for s in SECTIONS if s != "notebooks"]
        assert {f"{s}.log" for s in ran} <= set(files), sorted(files)
        assert {"gpu_table.txt", "status.txt", "dry_run.txt", "roofline.json", "xllm_graphs.jsonl", "hf.jsonl", "kernels.jsonl"} <= set(files)
        status = dict(l.split(": ", 1) for l in read("status.txt").splitlines())
        tp = [json.loads(l) for l in read("tensor_parallel.log").splitlines() if l.startswith("{")]
        corr = [json.loads(l) for l in read("correctness.log").splitlines() if l.startswith("{")]
        graphs = [json.loads(l) for l in read("xllm_graphs.jsonl").splitlines()]
        table = read("gpu_table.txt")
    assert list(status) == SECTIONS and all(status[s].startswith("ok") for s in ran), status
    assert status["notebooks"].startswith("skipped (dry run")
    assert table == (tmp_path / "gpu_table.txt").read_text() and "DRY RUN on the CPU" in table
    assert all(f"{s}: " in table.splitlines()[-1] for s in SECTIONS), table      # the table's last line lists every section
    assert [g["workload"] for g in graphs] == ["bench/hello.txt:8:6", "bench/prompts.txt:6:16", "bench/prompts.txt:1:8"]
    assert all(g["warmed_up"] and g["prefix_caching"] is False and g["output_tokens"] == g["requests"] * g["max_tokens"] for g in graphs)
    for w in ("hello.txt batch 8 x 6", "prompts.txt batch 6 x 16", "prompts.txt batch 1 x 8"):
        row = next(l for l in table.splitlines() if l.startswith(w))
        assert row[len(w):].split()[0].replace(",", "").isdigit() and ("(compute)" in row or "(memory)" in row), row   # measured, its roofline
    assert all(c.get("pass") or "skipped" in c for c in corr) and all(c["dry_run"] for c in corr) and len(corr) == 9
    assert len(tp) == 4 and tp[0]["max_rel_logits"] == 0.0 and tp[0]["tokens_equal"] and tp[1]["max_rel_logits"] < 1e-5 and tp[1]["tokens_equal"]
    assert all(row["tp1_ms"] > 0 and row["tp2_ms"] > 0 for row in tp[2:])
    print(f"gpu_check.sh dry run: {took:.0f} s")


def test_sections_are_chosen_and_checked(tmp_path):
    "GPU_CHECK_SECTIONS runs those sections only, in its order; an unknown name is refused before anything runs."
    r = run_check(tmp_path, GPU_CHECK_SECTIONS="roofline engine_host")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    status = [l.split(":")[0] for l in (tmp_path / "status.txt").read_text().splitlines()]
    assert status == ["roofline", "engine_host"]
    r = run_check(tmp_path / "x", GPU_CHECK_SECTIONS="env speed")
    assert r.returncode == 2 and "unknown section 'speed'" in r.stderr and not (tmp_path / "x" / "gpu_check.tar.gz").exists()
