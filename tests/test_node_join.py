"""A node that cannot join its group ends, within its `--join-timeout`, saying what it saw and what to check (notebook 13a,
"Joining: bounded, and saying why"). Each case is a real `xllm generate --nnodes 2` process on the loopback, never a fixed port:
- node 1 given a port where nothing listens: a socket bound to port 0 and held open without listening keeps the port (no other
  program can take it while the test runs) and makes the kernel refuse every connection: "connection refused";
- node 1 given a port where a socket listens but never accepts or answers (another program's port): torch's own store client waits
  there without a limit; xllm's gives up at the deadline, saying nothing answered;
- node 1 whose node 0 dies during the rendezvous (node 0 here is a torch TCPStore in this test, closed once node 1 reached it);
- node 0 whose node 1 never comes: it names rank 1 (node 1).
The wall-time limits are hang detectors (generous: the join timeout is a few seconds, the limit minutes), not measurements."""
import datetime, os, socket, subprocess, sys, time
from pathlib import Path
import pytest
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[1]
HANG = 180                                     # seconds: far past any join timeout below plus starting python and torch


@pytest.fixture(scope="module")
def generate(tmp_path_factory):
    from xllm.stand_ins import stand_in_model
    model = stand_in_model(tmp_path_factory.mktemp("join") / "m")
    return [sys.executable, "-m", "xllm", "generate", "The cat", "-m", str(model), "--max-tokens", "4", "-tp", "2", "--nnodes", "2"]


def _node1(cmd, port: int, join_timeout: float = 3):
    return [*cmd, "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", str(port), "--join-timeout", str(join_timeout)]


def _run(cmd) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    try: return subprocess.run(cmd, capture_output=True, text=True, timeout=HANG, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired as e: raise AssertionError(f"the node hung: still running after {HANG} s: {(e.stderr or b'')[-2000:]}") from None


def test_refused(generate):
    with socket.socket() as held:                       # bound, not listening: connections to it are refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        r = _run(_node1(generate, port))
    assert r.returncode != 0, r.stderr[-2000:]
    assert f"rank 1 could not join the group at 127.0.0.1:{port} within 3 s (--join-timeout): connection refused (nothing listens there): " \
           "check that node 0 is running" in r.stderr, r.stderr[-2000:]
    assert f"xllm: node 0's rendezvous at 127.0.0.1:{port}: refused; retrying for up to 3 s" in r.stderr, r.stderr[-2000:]   # said at once
    assert "Traceback" not in r.stderr, r.stderr[-2000:]


def test_listener_that_never_answers(generate):
    with socket.socket() as srv:                        # listens (the kernel completes connections), never accepts nor answers
        srv.bind(("127.0.0.1", 0)); srv.listen()
        port = srv.getsockname()[1]
        r = _run(_node1(generate, port))
    assert r.returncode != 0, r.stderr[-2000:]
    assert f"rank 1 could not join the group at 127.0.0.1:{port} within 3 s (--join-timeout): the connection was accepted but nothing " \
           "answered as a torch.distributed store" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]


def test_node0_dies_during_the_rendezvous(generate):
    """Node 0's store (held here) sees node 1's rank arrive, then goes away before the group forms: node 1 says so at once, long
    before its join timeout (60 s)."""
    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, timeout=datetime.timedelta(seconds=60), wait_for_workers=False)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    p = subprocess.Popen(_node1(generate, store.port, 60), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        end = time.monotonic() + HANG
        while not store.check(["xllm_tp_up_1"]):
            assert p.poll() is None and time.monotonic() < end, p.communicate()[1][-2000:] if p.poll() is not None else "node 1 never reached the store"
            time.sleep(0.1)
        del store                                       # node 0 is gone
        _, err = p.communicate(timeout=HANG)
    finally:
        if p.poll() is None: p.kill(); p.wait()
    assert p.returncode != 0, err[-2000:]
    assert "node 0's rendezvous closed before the group formed: node 0 exited or its machine went down" in err, err[-2000:]
    assert "Traceback" not in err, err[-2000:]


def test_node0_names_the_ranks_that_never_came(generate):
    r = _run([*generate, "--join-timeout", "3"])
    assert r.returncode != 0, r.stderr[-2000:]
    assert "the tensor-parallel group did not form within 3 s (--join-timeout): rank 1 (node 1) never reached the rendezvous at 127.0.0.1:" \
           in r.stderr, r.stderr[-2000:]
    assert "start the other nodes with --master-addr 127.0.0.1 --master-port" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]


def test_join_timeout_is_checked(generate):
    r = _run([*generate, "--join-timeout", "0"])
    assert r.returncode != 0 and "join_timeout" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
