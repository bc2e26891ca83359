"""The CPU cache of LoRA adapters (#44, `max_cpu_loras`) on a running server: more adapters served by name than the cache holds,
cycled through concurrent requests of the official `openai` client. The cache never holds more than its bound, every answer is the
text its adapter gives alone, the adapters the cache dropped are read again from their paths (counted in `/metrics`), and an
adapter whose directory is deleted after it left the cache fails only the requests that name it (a 400 naming it)."""
import re, shutil, threading, urllib.request, warnings
from concurrent.futures import ThreadPoolExecutor

import pytest
from openai import BadRequestError, OpenAI

from xllm.llm import LLM
from xllm.lora import LoRARequest, random_adapter
from xllm.sampling import SamplingParams
from xllm.server import start_server
from xllm.stand_ins import stand_in_model

PROMPTS = ["Once upon a time", "The little dog", "She looked at the sky and"]
N_ADAPTERS, MAX_LORAS, MAX_CPU_LORAS, ROUNDS = 5, 1, 2, 2
GREEDY = SamplingParams(temperature=0, max_tokens=8)


def _metric(url: str, name: str) -> float:
    "One sample of `/metrics` (the model's label), read as Prometheus' text format."
    req = urllib.request.Request(url + "/metrics", headers={"Authorization": "Bearer k"})
    with urllib.request.urlopen(req, timeout=60) as r: text = r.read().decode()
    m = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M)
    assert m, f"{name} not in /metrics"
    return float(m[1])


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    "A stand-in LLM with 1 LoRA slot and a CPU cache of 2, 5 random adapters, and each (prompt, adapter)'s text alone."
    d = tmp_path_factory.mktemp("cpucache")
    llm = LLM(stand_in_model(d / "m"), enable_lora=True, max_loras=MAX_LORAS, max_cpu_loras=MAX_CPU_LORAS, max_lora_rank=16)
    paths = {f"a{k}": str(random_adapter(llm.config, d / f"a{k}", r=(8, 16, 4, 8, 2)[k], seed=k, std=1.5)) for k in range(N_ADAPTERS)}
    alone = {(p, name): llm.generate(p, GREEDY, use_tqdm=False, lora_request=LoRARequest(name, 100 + k, path))[0].outputs[0].text
             for k, (name, path) in enumerate(paths.items()) for p in PROMPTS}
    assert len({alone[PROMPTS[0], n] for n in paths}) == N_ADAPTERS, alone        # each adapter changes the text
    return llm, paths, alone


def test_bounded_cache_under_concurrent_requests(setup):
    llm, paths, alone = setup
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        srv = start_server(llm, model_name="base", api_key="k", lora_modules=paths)
    with srv:
        slots, c = srv.app.state.xllm.core.lora, OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0)
        reads0, peak, stop = slots.num_reads, [0], threading.Event()
        def watch():                                   # the cache's size, sampled while the requests run
            while not stop.is_set(): peak[0] = max(peak[0], len(slots.known)); stop.wait(0.001)
        jobs = [(PROMPTS[k % len(PROMPTS)], f"a{k % N_ADAPTERS}") for k in range(ROUNDS * N_ADAPTERS * len(PROMPTS))]
        ask = lambda job: c.completions.create(model=job[1], prompt=job[0], temperature=0, max_tokens=GREEDY.max_tokens).choices[0].text
        t = threading.Thread(target=watch); t.start()
        try:
            with ThreadPoolExecutor(8) as ex: got = list(ex.map(ask, jobs))
        finally: stop.set(); t.join()
        assert got == [alone[j] for j in jobs]
        assert peak[0] <= MAX_CPU_LORAS and len(slots.known) <= MAX_CPU_LORAS, peak
        reads = _metric(srv.url, "xllm:lora_adapter_reads_total")
        assert reads == slots.num_reads and reads - reads0 > N_ADAPTERS, (reads, reads0)     # dropped adapters were read again
        assert _metric(srv.url, "xllm:lora_cpu_cache_evictions_total") == slots.num_evictions > 0
        assert _metric(srv.url, "xllm:lora_cpu_cache_adapters") <= MAX_CPU_LORAS

        # a0 leaves the cache (two other adapters used since), then its directory goes: its requests fail, the others' do not
        for name in ("a1", "a2"): assert ask((PROMPTS[0], name)) == alone[PROMPTS[0], name]
        assert 1 not in slots.known                     # a0 was served as id 1 (the first of lora_modules)
        shutil.rmtree(paths["a0"])
        with ThreadPoolExecutor(4) as ex:
            futs = [ex.submit(ask, (PROMPTS[k % 3], name)) for k, name in enumerate(["a0", "a3", "a0", "a4"])]
            outcomes = [f.exception() or f.result() for f in futs]
        for k in (0, 2):
            e = outcomes[k]
            assert isinstance(e, BadRequestError) and e.code == "lora_adapter_unreadable", e
            assert "LoRA adapter 'a0'" in str(e) and "adapter_config.json: not found" in str(e), e
        assert outcomes[1] == alone[PROMPTS[1], "a3"] and outcomes[3] == alone[PROMPTS[0], "a4"]
        assert "a0" in [m.id for m in c.models.list()]   # still served by name (its files may come back) until unloaded
        assert len(slots.known) <= MAX_CPU_LORAS
