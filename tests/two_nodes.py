"""Two 'nodes' of an xllm group on the loopback, for tests/test_tensor_parallel.py and tests/test_pipeline_parallel.py (not a test
module): node 0 started first prints the rendezvous port it binds (port 0: never a fixed one), node 1 joins it."""
import os, re, signal, subprocess, time
from pathlib import Path


def port_from(path: Path, proc, timeout: float = 180) -> int:
    "The rendezvous port node 0 prints on stderr (written to `path`) once it listens."
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if m := re.search(r"--master-port (\d+)", path.read_text()): return int(m.group(1))
        assert proc.poll() is None, path.read_text()[-3000:]
        time.sleep(0.2)
    raise AssertionError("node 0 did not say where it listens: " + path.read_text()[-3000:])


def run_two_nodes(cmd: list, tmp_path: Path, cwd, env) -> tuple:
    """Run `cmd` (an xllm command with `--nnodes 2`) as node 0, then as node 1 given node 0's port; returns (node 0's exit code,
    its stdout, node 1's CompletedProcess, node 0's stderr). Node 0 is killed (its whole session) if it outlives the test."""
    err0 = tmp_path / "node0.err"
    with open(err0, "w") as e0:
        n0 = subprocess.Popen(cmd + ["--node-rank", "0"], stdout=subprocess.PIPE, stderr=e0, text=True, cwd=cwd, env=env, start_new_session=True)
        try:
            port = port_from(err0, n0)
            n1 = subprocess.run(cmd + ["--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", str(port)],
                                capture_output=True, text=True, timeout=240, cwd=cwd, env=env)
            out, _ = n0.communicate(timeout=120)
        finally:
            if n0.poll() is None: os.killpg(n0.pid, signal.SIGKILL); n0.wait()
    return n0.returncode, out, n1, err0.read_text()
