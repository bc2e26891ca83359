"""xllm.model on every available device (CPU always, CUDA when present) against a float64 CPU run of the same model.

The float64 reference is our own forward pass, which 06_model.ipynb checks against Hugging Face transformers; these tests
check that moving the weights to another device / dtype keeps the results (logits, KV-cache decode, greedy tokens)."""
import pytest, torch
from xllm.model import Llama
from _tiny import tiny_config, random_weights, rel, greedy

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

def random_model(seed=0, **kw):
    cfg = tiny_config(**{"tie_word_embeddings": False, "rope_theta": 500000.0,
                         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 64}, **kw})
    return cfg, random_weights(cfg, seed)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tied", [False, True])
def test_float32_matches_float64(device, tied):
    cfg, w = random_model(tie_word_embeddings=tied)
    if tied: w.pop("lm_head.weight")
    ref_m = Llama.from_weights(cfg, w, dtype=torch.float64)
    m = Llama.from_weights(cfg, {k: v.to(device) for k, v in w.items()}, dtype=torch.float32)
    assert m.device.type == device and m.new_cache(8).k.device.type == device
    ids = torch.randint(0, cfg.vocab_size, (200,), generator=torch.Generator().manual_seed(1))
    ref = ref_m(ids)
    if device == "cuda": torch.backends.cuda.matmul.allow_tf32 = False   # TF32 would be a 1e-3 effect; we test float32
    assert rel(m(ids.to(device)), ref) < 1e-4
    cache = m.new_cache(256)
    inc = torch.cat([m(ids[:77].to(device), cache), m(ids[77:78].to(device), cache), m(ids[78:].to(device), cache)])
    assert cache.length == 200 and rel(inc, ref) < 1e-4
    assert greedy(m, ids[:10].to(device), 30) == greedy(ref_m, ids[:10], 30)

@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_close_to_float64(device):
    # bfloat16 rounds to 8 mantissa bits at every op; 3 layers of large random weights drift by a few percent of max|logit|
    cfg, w = random_model(1)
    ref = Llama.from_weights(cfg, w, dtype=torch.float64)
    m = Llama.from_weights(cfg, {k: v.to(device) for k, v in w.items()}, dtype=torch.bfloat16)
    ids = torch.randint(0, cfg.vocab_size, (64,), generator=torch.Generator().manual_seed(2))
    out = m(ids.to(device))
    assert out.dtype == torch.float32 and rel(out, ref(ids)) < 0.1

@pytest.mark.parametrize("device", DEVICES)
def test_context_error(device):
    cfg, w = random_model()
    m = Llama.from_weights(cfg, {k: v.to(device) for k, v in w.items()})
    with pytest.raises(ValueError, match="prompt of 9 tokens exceeds the context of 8"):
        m(torch.arange(9, device=device), m.new_cache(8))
