"""Priority scheduling end to end (issue #37, item 9): `Engine(..., scheduling_policy="priority")` with `SamplingParams(priority=...)`
on a tiny random Llama (tests/_tiny.py). vLLM's semantics: a lower value runs first, first come first served within a level; a
better newcomer preempts the worst running request when nothing is free; a starved low-priority request still finishes once the
better ones are done. Every output must equal the request's greedy tokens alone (the contiguous-cache path): priorities change
when a request runs, never what it says."""
import sys
from pathlib import Path

import pytest, torch

sys.path.insert(0, str(Path(__file__).parent))
from _tiny import tiny_config, random_weights, greedy
from xllm.engine import Engine
from xllm.model import Llama
from xllm.sampling import SamplingParams

POOL = dict(block_size=4, num_blocks=64, max_num_seqs=2, max_num_batched_tokens=64)


def _model() -> Llama:
    torch.manual_seed(0)
    cfg = tiny_config()
    return Llama.from_weights(cfg, random_weights(cfg, seed=0)).eval()




@pytest.fixture(scope="module")
def model():
    return _model()


def _params(priority: int, n: int) -> SamplingParams:
    return SamplingParams(temperature=0, max_tokens=n, ignore_eos=True, priority=priority)


def run(eng: Engine, arrivals: dict[int, list]) -> tuple[dict, dict, dict]:
    """Step `eng` to the end; `arrivals[step]` lists `(name, prompt, params)` added before that step. Returns each request's tokens,
    the step of its first token and the step it finished, by name; checks the pool after every step."""
    names, toks, first, done, step = {}, {}, {}, {}, 0
    while step <= max(arrivals) or eng.has_unfinished():
        for name, prompt, params in arrivals.get(step, []):
            rid = eng.add_request(prompt, params)
            names[rid], toks[name] = name, []
            assert eng.scheduler.seqs[rid].priority == params.priority, "add_request must put SamplingParams.priority on the Sequence"
        for o in eng.step():
            name = names[o.request_id]
            if o.new_token_ids: first.setdefault(name, step)
            toks[name] += o.new_token_ids
            if o.finished: done[name] = step; assert o.finish_reason == "length", o
        eng.block_manager.check_invariants()
        step += 1
        assert step < 500, "did not finish"
    assert eng.block_manager.num_used_blocks == 0 and not eng.scheduler.has_unfinished
    return toks, first, done


def _prompt(k: int, n: int = 9) -> list[int]:
    return [3 + (k * 37 + 11 * i) % 380 for i in range(n)]


def test_starved_low_priority_finishes(model):
    """A low-priority request that arrived first waits while six better ones run two at a time, then finishes; under 'fcfs' it
    runs at once. Everyone's tokens are their greedy tokens alone."""
    reqs = [("low", _prompt(0), _params(5, 8))] + [(f"high{k}", _prompt(k + 1), _params(0, 8)) for k in range(6)]
    alone = {name: greedy(model, p, 8) for name, p, _ in reqs}
    assert len({tuple(t) for t in alone.values()}) == len(alone)             # not a vacuous comparison
    toks, first, done = run(Engine(model, None, scheduling_policy="priority", **POOL), {0: reqs})
    assert toks == alone
    assert first["low"] > max(done[f"high{k}"] for k in range(6)), (first, done)   # admitted once the last better one is done
    assert [first[f"high{k}"] for k in range(6)] == sorted(first[f"high{k}"] for k in range(6))   # FCFS within the level
    toks, first, _ = run(Engine(model, None, scheduling_policy="fcfs", **POOL), {0: reqs})
    assert toks == alone and first["low"] == 0


def test_newcomer_preempts_worst(model):
    """Two low-priority requests fill both sequence slots; a better one arrives at step 3 and gets its first token in that step,
    the later of the two (the worst: same level, later arrival) is preempted and recomputed, and every output is unchanged."""
    lows = [(f"low{k}", _prompt(k, 13), _params(5, 20)) for k in range(2)]
    vip = ("vip", _prompt(7, 6), _params(-1, 5))
    alone = {name: greedy(model, p, sp.max_tokens) for name, p, sp in lows + [vip]}
    eng = Engine(model, None, scheduling_policy="priority", **POOL)
    toks, first, done = run(eng, {0: lows, 3: [vip]})
    assert toks == alone
    assert first["vip"] == 3 and eng.scheduler.num_preemptions >= 1
    assert done["vip"] < min(done["low0"], done["low1"])
    assert done["low0"] < done["low1"]                                     # low1 was the victim: it finished later
    eng = Engine(model, None, scheduling_policy="fcfs", **POOL)             # fcfs: the newcomer waits for a free slot
    toks, first, done = run(eng, {0: lows, 3: [vip]})
    assert toks == alone and first["vip"] > 3 and eng.scheduler.num_preemptions == 0
