"The sampler on a CUDA device: same masks as on CPU, greedy = argmax, seeded draws reproducible and distributed right. Skips without CUDA."
import math, time
import numpy as np
import pytest
import torch

from xllm.sampling import Sampler, SamplingParams, NonFiniteLogitsError

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
dev = "cuda"
sampler = Sampler()


def test_greedy_is_argmax_on_cuda():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        x = (torch.randn(49152, generator=g) * 4).to(dev)
        r = sampler.sample(x, SamplingParams(temperature=0, logprobs=3))
        assert r.token_id == int(torch.argmax(x.cpu()))
        assert abs(r.logprob - float(torch.log_softmax(x.double().cpu(), 0)[r.token_id])) < 1e-4   # float32 log-softmax over 49k entries
        assert list(r.top_logprobs)[0] == r.token_id


def test_processing_matches_cpu():
    g = torch.Generator().manual_seed(1)
    for trial in range(60):
        x = torch.randn(5000, generator=g) * 3
        p = SamplingParams(temperature=[0.5, 1.0, 1.7][trial % 3], top_k=[-1, 50, 400][(trial // 3) % 3], top_p=[1.0, 0.9, 0.3][trial % 3 - 1],
                           min_p=[0.0, 0.05][trial % 2], repetition_penalty=[1.0, 1.2][trial % 2], frequency_penalty=0.3, presence_penalty=-0.2)
        out, prompt = list(range(0, 300, 3)), list(range(500, 520))
        a = Sampler.process(x, p, out, prompt)
        b = Sampler.process(x.to(dev), p, out, prompt).cpu()
        fa, fb = torch.isfinite(a), torch.isfinite(b)
        # kept sets equal except possibly one top-p boundary token whose cumulative mass is within float32 rounding
        assert (fa ^ fb).sum() <= 1, trial
        both = fa & fb
        assert torch.allclose(a[both], b[both], rtol=1e-5, atol=1e-5)


def test_seeded_draws_reproducible_on_cuda():
    x = torch.randn(1000, generator=torch.Generator().manual_seed(2)).to(dev)
    def draw(params, device=dev):
        gen = Sampler.make_generator(params, device)
        return [sampler.sample(x, params, gen).token_id for _ in range(40)]
    assert draw(SamplingParams(seed=1)) == draw(SamplingParams(seed=1))
    assert draw(SamplingParams(seed=1)) != draw(SamplingParams(seed=2))
    assert draw(SamplingParams()) != draw(SamplingParams())
    # a CPU generator with CUDA logits works too (the uniform number is drawn on the CPU)
    assert draw(SamplingParams(seed=5), "cpu") == draw(SamplingParams(seed=5), "cpu")


def test_distribution_on_cuda():
    x = torch.randn(16, generator=torch.Generator().manual_seed(7)) * 1.5
    N = 5000
    for i, kw in enumerate([dict(), dict(temperature=0.8, top_k=8, top_p=0.9)]):
        params = SamplingParams(seed=100 + i, **kw)
        gen = Sampler.make_generator(params, dev)
        counts = np.bincount([sampler.sample(x.to(dev), params, gen).token_id for _ in range(N)], minlength=16)
        probs = torch.softmax(Sampler.process(x.double(), params), 0).numpy()
        keep = probs > 0
        assert counts[~keep].sum() == 0
        chi2 = float(((counts[keep] - N * probs[keep]) ** 2 / (N * probs[keep])).sum())
        df = int(keep.sum()) - 1
        limit = df * (1 - 2 / (9 * df) + 3.0902 * math.sqrt(2 / (9 * df))) ** 3   # 0.999 quantile, Wilson-Hilferty
        print(f"cuda {kw}: chi2 {chi2:.2f} < {limit:.2f} (df {df})")
        assert chi2 < limit


def test_errors_and_batch_on_cuda():
    bad = torch.randn(10, device=dev); bad[3] = float("nan")
    with pytest.raises(NonFiniteLogitsError, match="first at token id 3"): sampler.sample(bad, SamplingParams())
    X = torch.randn(4, 100, device=dev)
    assert [r.token_id for r in sampler.sample(X, SamplingParams(temperature=0))] == X.argmax(-1).tolist()


def test_speed_on_cuda():
    x = torch.randn(49152, device=dev) * 3
    out, prompt = list(range(0, 2000, 7)), list(range(100))
    for kw in [dict(temperature=0), dict(), dict(temperature=0.7, top_k=50, top_p=0.9, repetition_penalty=1.1)]:
        params = SamplingParams(seed=0, **kw); gen = Sampler.make_generator(params, dev)
        for _ in range(5): sampler.sample(x, params, gen, out, prompt)
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(100): sampler.sample(x, params, gen, out, prompt)
        torch.cuda.synchronize()
        print(f"cuda {kw}: {(time.perf_counter() - t0) / 100 * 1e3:.2f} ms/token")
