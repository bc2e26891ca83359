"""Data parallelism (notebook 19a): `xllm serve MODEL --data-parallel-size 2` starts two replicas behind SGLang's router. The
official `openai` client, 64 requests on concurrent threads, gets the greedy texts of one replica; a replica killed with SIGKILL
while requests wait on it loses none of them (the router retries them on the other), and requests sent while it is down are all
answered; the launcher restarts it on its port and, once healthy, the router sends to it again. SIGTERM to the launcher stops the
router and both replicas (the restarted one included), leaving no process of its group."""
import json, os, random, re, signal, subprocess, sys, time, urllib.request
import concurrent.futures as cf
from pathlib import Path
import pytest

pytest.importorskip("sglang_router")
openai = pytest.importorskip("openai")
from _waits import wait_for
from xllm.server import launch

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = [f"{head} {tail}" for head in ("Once upon a time", "The little dog", "In the morning", "She said that", "The big tree",
                                          "Tom and Sue", "One day the", "There was a") for tail in ("there was", "it rained", "they ran",
                                                                                                    "he saw", "we ate", "a cat", "the sun", "and then")]
COMMON = ["--max-num-seqs", "4", "--uvicorn-log-level", "warning", "--disable-log-stats"]   # 4 at a time: requests wait on each replica


def _answers(url: str, prompts, max_tokens=24) -> list[str]:
    "The greedy text of each prompt, all sent at once on their own threads."
    client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
    one = lambda p: client.completions.create(model="model", prompt=p, max_tokens=max_tokens, temperature=0).choices[0].text
    with cf.ThreadPoolExecutor(len(prompts)) as ex: return list(ex.map(one, prompts))


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r: return json.loads(r.read())


def _launch_dp(model, env):
    "The data-parallel server on a port tried at random, another one tried when the router finds it taken (never assumed free)."
    for _ in range(6):
        port = random.randrange(20000, 32000)
        cmd = [sys.executable, "-m", "xllm", "serve", str(model), "--data-parallel-size", "2", "--port", str(port), *COMMON]
        try: return launch(cmd, timeout=240, cwd=ROOT, env=env, start_new_session=True)   # its own group: the test checks it empties
        except RuntimeError as e:
            if "cannot listen on" not in str(e): raise
    raise AssertionError("six ports in a row were taken")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from xllm.stand_ins import stand_in_model
    model = stand_in_model(tmp_path_factory.mktemp("dp") / "model")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    one, one_url = launch([sys.executable, "-m", "xllm", "serve", str(model), "--port", "0", "-t", "1", *COMMON], timeout=240, cwd=ROOT, env=env)
    try: reference = _answers(one_url, PROMPTS)
    finally: one.terminate(); one.wait(60)
    p, url = _launch_dp(model, env)
    line = next(l for l in p.out if "data parallel" in l)
    replicas = [(u, int(pid)) for u, pid in re.findall(r"(http://\S+) pid (\d+)", line)]
    yield p, url, replicas, reference
    if p.poll() is None: os.killpg(p.pid, signal.SIGKILL); p.wait()


def test_start_up_line(served):
    p, url, replicas, _ = served
    line = next(l for l in p.out if "data parallel" in l)
    assert "2 replicas behind sglang-router, policy cache_aware" in line and "thread" in line, line
    assert len(replicas) == 2 and all(w["is_healthy"] for w in _get(url + "/workers")["workers"])


def test_same_text_as_one_replica(served):
    p, url, replicas, reference = served
    assert _answers(url, PROMPTS) == reference
    served_by = [_prompt_tokens(u) for u, _ in replicas]
    assert all(n > 0 for n in served_by), f"a replica got no request: prompt tokens {served_by}"


def _prompt_tokens(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r: text = r.read().decode()
    return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("vllm:prompt_tokens_total"))


def test_killed_replica_loses_no_request_and_comes_back(served):
    """64 requests, 4 running at a time on each replica, the rest waiting there: replica 1 is killed while it holds some (its
    /get_load says so just before), and every request still gets the reference text; so do requests sent while it is down. The
    launcher logs the exit with its status and restarts it on its port; once the router finds it healthy it serves again."""
    p, url, replicas, reference = served
    (_, _), (url1, pid1) = replicas
    with cf.ThreadPoolExecutor(1) as ex:
        answers = ex.submit(_answers, url, PROMPTS)
        held = wait_for(lambda: _get(url1 + "/get_load")[0]["num_reqs"], timeout=60, what="requests on replica 1")
        os.kill(pid1, signal.SIGKILL)
        assert answers.result() == reference, f"a request was lost or changed (replica 1 held {held} when killed)"
    wait_for(lambda: any("replica 1" in l and "(killed by signal 9); restarting it on the same port in 1 s" in l for l in p.err), timeout=10,
             what="the launcher's report of the exit")
    down = not any("replica 1 serves again" in l for l in p.err)
    assert _answers(url, PROMPTS[:16]) == reference[:16], f"a request sent while replica 1 was down failed (down when sent: {down})"
    back = wait_for(lambda: next((l for l in p.err if "replica 1 serves again on " in l), None), timeout=240, what="replica 1 restarted")
    assert f"serves again on {url1} " in back and f"pid {pid1})" not in back, back                # its old address, a new process
    wait_for(lambda: next(w for w in _get(url + "/workers")["workers"] if w["url"] == url1)["is_healthy"], timeout=60,
             what="the router to find the restarted replica healthy")
    assert _answers(url1, PROMPTS[:4]) == reference[:4]           # it answers, with the same text
    direct = _prompt_tokens(url1)                                # what it has served so far: those 4, sent to it directly
    for k in range(8):           # and the router sends to it again: prompts no replica has seen (a digit first), which cache-aware
        if _prompt_tokens(url1) > direct: break                  # routing gives to the replica with the least cached, the new one
        _answers(url, [f"{k}{j} birds sang in the garden" for j in range(16)])
    assert _prompt_tokens(url1) > direct, ("the router sent nothing to the restarted replica", _get(url + "/workers"),
                                           [l for l in p.err if l.startswith("xllm:")])


def test_sigterm_leaves_no_process(served):
    p = served[0]
    os.kill(p.pid, signal.SIGTERM)                                # the launcher alone: it stops the router and the replicas
    try: assert p.wait(60) == 0
    except subprocess.TimeoutExpired: raise AssertionError("the launcher did not stop") from None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try: os.killpg(p.pid, 0)
        except ProcessLookupError: return                         # no process of the group is left
        time.sleep(0.1)
    raise AssertionError("a process of the launcher's group is still running")
