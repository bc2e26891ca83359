"""Two hosts on one machine (issue #43): two Linux network namespaces joined by a veth pair stand in for two machines on a network,
each with its own interfaces, addresses and loopback, so nothing one node binds on its loopback is reachable from the other. One
`xllm serve --nnodes 2` process per namespace: node 0 serves on its veth address and holds the rendezvous; node 1 joins it from
the other namespace with `--master-addr` set to node 0's address. The official `openai` client (run inside node 0's namespace)
gets the single-process greedy text; then every process of node 1's namespace is SIGKILLed (its machine gone) and node 0 names
the rank from its silent heartbeat, stops the server and exits 1, with no process left in either namespace. Once for tensor
parallelism and once for pipeline parallelism. Making namespaces needs root (CAP_NET_ADMIN) and iproute2's `ip`; without them the
tests skip, saying which command failed and why."""
import itertools, json, os, re, shutil, signal, subprocess, sys, threading, time
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
_made = itertools.count()


def ip(*args, check=False) -> subprocess.CompletedProcess:
    "Run `ip ARGS`; with `check`, a RuntimeError naming the command and its stderr when it fails."
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode: raise RuntimeError(f"`ip {' '.join(args)}` failed (exit code {r.returncode}): {r.stderr.strip()}")
    return r


def ns_pids(ns: str) -> list[int]:
    "The processes in namespace `ns` (`ip netns pids`)."
    return [int(p) for p in ip("netns", "pids", ns).stdout.split()]


def kill_namespace(ns: str):
    "SIGKILL every process in `ns`, waiting (bounded) until none is left."
    end = time.monotonic() + 30
    while (pids := ns_pids(ns)) and time.monotonic() < end:
        for p in pids:
            try: os.kill(p, signal.SIGKILL)
            except ProcessLookupError: pass
        time.sleep(0.1)


@pytest.fixture
def hosts():
    """Two namespaces and a veth pair between them, named after this process and a counter (parallel runs never collide):
    [(namespace, address), (namespace, address)]. Afterwards, pass or fail, every process in them is killed and all is deleted."""
    if shutil.which("ip") is None: pytest.skip("no `ip` binary (iproute2): cannot make network namespaces")
    tag = f"{os.getpid()}x{next(_made)}"
    ns, veth, addr = [f"xllm{tag}a", f"xllm{tag}b"], [f"xv{tag}a", f"xv{tag}b"], ["10.77.0.1", "10.77.0.2"]
    steps = [("netns", "add", ns[0]), ("netns", "add", ns[1]), ("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])]
    for k in (0, 1):
        steps += [("link", "set", veth[k], "netns", ns[k]), ("-n", ns[k], "addr", "add", f"{addr[k]}/24", "dev", veth[k]),
                  ("-n", ns[k], "link", "set", veth[k], "up"), ("-n", ns[k], "link", "set", "lo", "up")]
    def teardown():
        for k in (0, 1): kill_namespace(ns[k])
        ip("-n", ns[0], "link", "del", veth[0]); ip("link", "del", veth[0])     # wherever it is (deleting one end deletes both)
        for k in (0, 1): ip("netns", "del", ns[k])
    try:
        for s in steps: ip(*s, check=True)
    except RuntimeError as e:
        teardown(); pytest.skip(f"cannot make two network namespaces joined by a veth pair (needs root / CAP_NET_ADMIN): {e}")
    try: yield list(zip(ns, addr))
    finally: teardown()
    left = ip("netns", "list").stdout
    assert not any(name in left for name in ns), left


class Node:
    "An xllm process run in namespace `ns`, its stdout and stderr read together on a thread (so no pipe fills)."
    def __init__(self, ns: str, args: list, env: dict):
        self.p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "xllm", *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
        self.lines = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.p.stdout), daemon=True)
        self.reader.start()
    @property
    def out(self) -> str: return "".join(self.lines)
    def wait_for(self, pattern: str, timeout: float = 240) -> re.Match:
        "The first match of `pattern` in the output; an AssertionError with the output's end if the process exits or `timeout` passes first."
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if m := re.search(pattern, self.out): return m
            if self.p.poll() is not None: self.reader.join(5); break
            time.sleep(0.2)
        if m := re.search(pattern, self.out): return m
        raise AssertionError(f"no {pattern!r} (exit code {self.p.poll()}): {self.out[-3000:]}")


CLIENT = """
import json, sys, openai
c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="none", max_retries=0, timeout=120)
r = c.completions.create(model=c.models.list().data[0].id, prompt=sys.argv[2], max_tokens=int(sys.argv[3]), temperature=0)
print(json.dumps({"text": r.choices[0].text, "completion_tokens": r.usage.completion_tokens}))
"""


@pytest.mark.parametrize("layout,label", [(["--tensor-parallel-size", "2"], "tensor-parallel rank 1"),
                                          (["--pipeline-parallel-size", "2"], "pipeline-parallel rank 1 (pipeline stage 1 of 0-1)")])
def test_two_hosts(hosts, tmp_path, layout, label):
    pytest.importorskip("openai")
    from xllm.stand_ins import stand_in_model
    from xllm.llm import LLM
    from xllm.sampling import SamplingParams
    (ns0, a0), (ns1, a1) = hosts
    model = stand_in_model(tmp_path / "m")
    prompt, n = "Once upon a time", 12
    ref = LLM(model, runner="torch").generate(prompt, SamplingParams(temperature=0, max_tokens=n), use_tqdm=False)[0].outputs[0]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("GLOO_SOCKET_IFNAME", None)                    # each node finds its own interface (`bind_gloo`)
    cmd = ["serve", "-m", str(model), *layout, "--nnodes", "2"]
    n0 = Node(ns0, cmd + ["--host", a0, "--port", "0", "--master-addr", a0], env)
    n1 = None
    try:
        port = int(n0.wait_for(rf"start the other 1 with --master-addr {re.escape(a0)} --master-port (\d+)\n", 180).group(1))
        n1 = Node(ns1, cmd + ["--node-rank", "1", "--master-addr", a0, "--master-port", str(port)], env)
        url = n0.wait_for(r"xllm: serving .* on (http://\S+)/v1 ").group(1)
        assert url.startswith(f"http://{a0}:"), url
        c = subprocess.run(["ip", "netns", "exec", ns0, sys.executable, "-c", CLIENT, url, prompt, str(n)], capture_output=True,
                           text=True, timeout=180, env=env)
        assert c.returncode == 0, c.stderr[-3000:]
        got = json.loads(c.stdout)
        assert got == {"text": ref.text, "completion_tokens": len(ref.token_ids)}, (got, ref.text)
        assert n1.p.poll() is None and ns_pids(ns1), n1.out[-3000:]
        kill_namespace(ns1)                               # node 1's machine is gone: no exit code reaches node 0
        n1.p.wait(30); killed = time.monotonic()
        n0.p.wait(120)                                    # a generous bound: node 0 names the rank after HEALTH_SILENCE (10 s)
        print(f"{layout[0]}: node 0 exited {time.monotonic() - killed:.1f} s after node 1's namespace was killed")
    finally:
        for node in (n0, n1):
            if node is not None and node.p.poll() is None: node.p.kill(); node.p.wait()
    n0.reader.join(10)
    out = n0.out
    assert n0.p.returncode == 1, out[-3000:]
    assert f"the engine cannot run any more ({label} stopped answering (no heartbeat for" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert f"joining {a0}:{port}" in n1.out, n1.out[-3000:]
    assert ns_pids(ns0) == [] and ns_pids(ns1) == []      # no orphans: node 0's process and anything it started are gone
