"""Property test: a mutated model file (bit flips, truncation, overwritten bytes) either loads or raises ModelFormatError, nothing else,
and never allocates much memory: every load runs under an address-space limit (1 GiB above what the process has mapped), so a
corrupt header that drives a multi-GB allocation shows up as a RuntimeError/MemoryError and fails the test. Also: explicit absurd
headers (GGUF counts, lengths, dimensions; llama2.c dimensions) each raise ModelFormatError under that limit."""
import contextlib, json, os, re, resource, shutil, struct
from pathlib import Path
import numpy as np, pytest, torch
from hypothesis import HealthCheck, given, settings, strategies as st

from xllm.core import ModelFormatError
from xllm.weights import load_checkpoint


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    "A tiny random Llama saved with transformers (safetensors dir) and the same model as a GGUF written with gguf.GGUFWriter."
    transformers, gguf = pytest.importorskip("transformers"), pytest.importorskip("gguf")
    d = tmp_path_factory.mktemp("orig")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=1, max_position_embeddings=32, bos_token_id=1, eos_token_id=2)
    m = transformers.LlamaForCausalLM(cfg).eval()
    m.save_pretrained(d / "hf")
    w = gguf.GGUFWriter(str(d / "m.gguf"), "llama")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 1)
    w.add_block_count(1); w.add_context_length(32); w.add_embedding_length(16); w.add_feed_forward_length(32)
    w.add_head_count(2); w.add_head_count_kv(1); w.add_layer_norm_rms_eps(1e-5); w.add_rope_freq_base(10000.0); w.add_vocab_size(64)
    w.add_bos_token_id(1); w.add_eos_token_id(2)
    w.add_array("test.numbers", [1, 2, 3])
    for k, v in m.state_dict().items():
        if "rotary" not in k: w.add_tensor(names.get_name(k, try_suffixes=(".weight", ".bias")), v.numpy().astype(np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    write_llama2c(m, d / "m.bin")
    for p in (d / "hf", d / "m.gguf", d / "m.bin"): load_checkpoint(p)   # all load as written
    ck = load_checkpoint(d / "m.bin")
    assert ck.format == "llama2c" and torch.equal(ck.weights["model.embed_tokens.weight"], m.model.embed_tokens.weight)
    assert torch.equal(ck.weights["model.layers.0.mlp.down_proj.weight"], m.model.layers[0].mlp.down_proj.weight)
    st_bytes = (d / "hf" / "model.safetensors").read_bytes()
    return dict(dir=d, hf=d / "hf", gguf=d / "m.gguf", l2c=d / "m.bin", st_header=8 + struct.unpack_from("<Q", st_bytes)[0],
                gguf_header=gguf.GGUFReader(d / "m.gguf").data_offset)


def write_llama2c(m, path):
    """`m` as a legacy llama2.c checkpoint (run.c's layout): 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size
    (positive: classifier shared with the embedding), seq_len), then float32 embedding, per-layer attention norms, wq, wk, wv, wo,
    ffn norms, w1, w2, w3, the final norm, two RoPE tables, and wcls. q/k rows are left in HF order (only loading is tested here)."""
    c, sd = m.config, m.state_dict()
    L, hd = c.num_hidden_layers, c.hidden_size // c.num_attention_heads
    lay = lambda name: torch.stack([sd[f"model.layers.{i}.{name}.weight"] for i in range(L)])
    parts = [sd["model.embed_tokens.weight"], lay("input_layernorm")] + [lay(f"self_attn.{x}_proj") for x in "qkvo"]
    parts += [lay("post_attention_layernorm"), lay("mlp.gate_proj"), lay("mlp.down_proj"), lay("mlp.up_proj"), sd["model.norm.weight"],
              torch.zeros(c.max_position_embeddings, hd // 2), torch.zeros(c.max_position_embeddings, hd // 2), sd["lm_head.weight"]]
    head = struct.pack("<7i", c.hidden_size, c.intermediate_size, L, c.num_attention_heads, c.num_key_value_heads, -c.vocab_size,
                       c.max_position_embeddings)
    path.write_bytes(head + b"".join(t.detach().float().contiguous().numpy().tobytes() for t in parts))


# one mutation: ("flip", pos, bit) | ("truncate", frac) | ("overwrite", pos, bytes); positions in [0, 1) of the header or the file
_pos = st.tuples(st.booleans(), st.floats(0, 1, exclude_max=True))
mutation = st.one_of(st.tuples(st.just("flip"), _pos, st.integers(0, 7)),
                     st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True)),
                     st.tuples(st.just("overwrite"), _pos, st.binary(min_size=1, max_size=8)))


def _apply(data: bytes, header: int, muts) -> bytes:
    b = bytearray(data)
    for m in muts:
        if not b: break
        if m[0] == "truncate": b = b[:int(len(b) * m[1])]; continue
        in_header, frac = m[1]
        pos = min(int(frac * (min(header, len(b)) if in_header else len(b))), len(b) - 1)
        if m[0] == "flip": b[pos] ^= 1 << m[2]
        else: b[pos:pos + len(m[2])] = m[2]
    return bytes(b)


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))


@contextlib.contextmanager
def memory_limit(extra=1 << 30):
    "Limit this process's address space to what it has mapped now plus `extra` bytes (Linux), restoring the old limit after."
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    lim = _vm_bytes() + extra
    if hard != resource.RLIM_INFINITY: lim = min(lim, hard)
    resource.setrlimit(resource.RLIMIT_AS, (lim, hard))
    try: yield
    finally: resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_memory_limit_catches_big_allocations():
    "The limit the loads run under really refuses a 2 GiB allocation (torch and numpy), and is lifted afterwards."
    with memory_limit():
        with pytest.raises((RuntimeError, MemoryError)): torch.empty(2 << 30, dtype=torch.uint8)
        with pytest.raises(MemoryError): np.ones(2 << 30, dtype=np.uint8)
    assert torch.empty(2 << 30, dtype=torch.uint8).numel() == 2 << 30


def _load_ok_or_our_error(path):
    try:
        with memory_limit(): load_checkpoint(path)
    except ModelFormatError as e:
        assert str(e) and e.path is not None, repr(e)
    # anything else (IndexError, struct.error, KeyError, RuntimeError, a plain ValueError, MemoryError) fails the test


_settings = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], database=None)


@_settings
@given(muts=st.lists(mutation, min_size=1, max_size=3), target=st.sampled_from(["model.safetensors", "config.json"]))
def test_mutated_safetensors_dir(originals, muts, target):
    d = originals["dir"] / "mut_hf"
    if d.exists(): shutil.rmtree(d)
    shutil.copytree(originals["hf"], d)
    f = d / target
    f.write_bytes(_apply(f.read_bytes(), originals["st_header"] if target == "model.safetensors" else 1 << 20, muts))
    _load_ok_or_our_error(d)


@_settings
@given(muts=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_gguf(originals, muts):
    f = originals["dir"] / "mut.gguf"
    f.write_bytes(_apply(originals["gguf"].read_bytes(), originals["gguf_header"], muts))
    _load_ok_or_our_error(f)


@_settings
@given(muts=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_llama2c(originals, muts):
    f = originals["dir"] / "mut.bin"
    f.write_bytes(_apply(originals["l2c"].read_bytes(), 28, muts))
    _load_ok_or_our_error(f)


def _gguf_field(b: bytes, key: bytes, after: int) -> int:
    "Offset of the field `after` bytes past the end of the length-prefixed string `key` in GGUF bytes `b`."
    return b.index(struct.pack("<Q", len(key)) + key) + 8 + len(key) + after


def _absurd_cases(o):
    g, l2c = o["gguf"].read_bytes(), o["l2c"].read_bytes()
    emb = _gguf_field(g, b"token_embd.weight", 0)                       # n_dims u32, then dims u64
    arr = _gguf_field(g, b"test.numbers", 0)                            # value type u32 (9), element type u32, count u64
    first_key = 24                                                      # after magic, version, tensor count, kv count
    put = lambda b, off, data: b[:off] + data + b[off + len(data):]
    return {
        "gguf tensor count 2^62": put(g, 8, struct.pack("<Q", 1 << 62)),
        "gguf key/value count 2^62": put(g, 16, struct.pack("<Q", 1 << 62)),
        "gguf tensor count 2^20 (more than the header holds)": put(g, 8, struct.pack("<Q", 1 << 20)),
        "gguf key length 2^60": put(g, first_key, struct.pack("<Q", 1 << 60)),
        "gguf array count 2^60": put(g, arr + 8, struct.pack("<Q", 1 << 60)),
        "gguf array count 2^28": put(g, arr + 8, struct.pack("<Q", 1 << 28)),
        "gguf n_dims 2^31": put(g, emb, struct.pack("<I", 1 << 31)),
        "gguf dimension 2^40": put(g, emb + 4, struct.pack("<Q", 1 << 40)),
        "gguf dimensions 2^32 x 2^32 (product overflows 64 bits)": put(g, emb + 4, struct.pack("<QQ", 1 << 32, 1 << 32)),
        "gguf tensor offset past the end": put(g, emb + 4 + 16 + 4, struct.pack("<Q", 1 << 40)),
        "gguf unknown tensor type 99": put(g, emb + 4 + 16, struct.pack("<I", 99)),
        "gguf wrong magic": put(g, 0, b"GGUX"),
        "llama2.c dim 2^30": put(l2c, 0, struct.pack("<i", 1 << 30)),
        "llama2.c n_layers 2^30, vocab 2^30": put(put(l2c, 8, struct.pack("<i", 1 << 30)), 20, struct.pack("<i", 1 << 30)),
        "llama2.c hidden_dim -64": put(l2c, 4, struct.pack("<i", -64)),
        "llama2.c n_kv_heads 0": put(l2c, 16, struct.pack("<i", 0)),
        "llama2.c seq_len 2^31-1": put(l2c, 24, struct.pack("<i", 2**31 - 1)),
    }


def test_absurd_headers(originals):
    "Each absurd header value raises ModelFormatError naming the file, quickly and under the memory limit."
    import time
    for case, data in _absurd_cases(originals).items():
        f = originals["dir"] / ("absurd" + (".bin" if case.startswith("llama2.c") else ".gguf"))
        f.write_bytes(data)
        t0 = time.perf_counter()
        with pytest.raises(ModelFormatError) as e:
            with memory_limit(): load_checkpoint(f)
        assert f.name in str(e.value), (case, str(e.value))
        assert time.perf_counter() - t0 < 30, case                  # no hang or giant allocation (a bound, not a benchmark)


def _patch_config(o, name, **patch):
    d = o["dir"] / name
    if d.exists(): shutil.rmtree(d)
    shutil.copytree(o["hf"], d)
    cfg = json.loads((d / "config.json").read_text()); cfg.update(patch); (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("patch,field", [
    (dict(num_hidden_layers=0 + 2), "num_hidden_layers"),                # the file has 1 layer
    (dict(num_hidden_layers=1, vocab_size=128), "vocab_size"), (dict(num_key_value_heads=2), "num_key_value_heads"),
    (dict(rope_theta=float("inf")), "rope_theta"), (dict(rope_theta=float("nan")), "rope_theta"), (dict(rms_norm_eps=float("inf")), "rms_norm_eps"),
    (dict(rope_parameters={"rope_type": "linear", "rope_theta": 1e4, "factor": -1.0}), "factor"),
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0, "original_max_position_embeddings": 32}), "high_freq_factor"),
    (dict(torch_dtype="float7"), "torch_dtype"), (dict(dtype=["float16"]), "dtype"), (dict(attention_bias="no"), "attention_bias")])
def test_config_that_lies(originals, patch, field):
    "A config.json that disagrees with the tensors, or holds a non-finite or impossible value, is refused naming the file and the field."
    d = _patch_config(originals, "lie", **patch)
    with pytest.raises(ModelFormatError) as e: load_checkpoint(d)
    assert field in str(e.value) and d.name in str(e.value), str(e.value)


def test_layers_beyond_the_config(originals):
    "Tensors of a layer the config does not count (HF: num_hidden_layers; GGUF: llama.block_count) are refused, not dropped."
    from safetensors.torch import load_file, save_file
    d = _patch_config(originals, "extra_layer")
    sd = load_file(d / "model.safetensors")
    sd.update({k.replace("layers.0.", "layers.1."): v.clone() for k, v in sd.items() if k.startswith("model.layers.0.")})
    save_file(sd, d / "model.safetensors")
    with pytest.raises(ModelFormatError, match="num_hidden_layers is 1, but the safetensors files hold tensors for layer 1"): load_checkpoint(d)
    g = bytearray(originals["gguf"].read_bytes())
    for n in (0, 2):
        i = _gguf_field(g, b"llama.block_count", 4)
        g[i:i + 4] = struct.pack("<I", n); f = originals["dir"] / f"blocks{n}.gguf"; f.write_bytes(bytes(g))
        with pytest.raises(ModelFormatError, match=f"blocks{n}.gguf") as e: load_checkpoint(f)
        assert "llama.block_count" in str(e.value), str(e.value)


def test_deep_and_huge_json(originals):
    "config.json nested 100,000 deep, or holding a 5,000-digit number, is a ModelFormatError (not RecursionError / a bare ValueError)."
    for name, text in [("deep", "{\"a\": " * 100_000 + "1" + "}" * 100_000), ("digits", '{"vocab_size": 1' + "0" * 5000 + "}")]:
        d = _patch_config(originals, name); (d / "config.json").write_text(text)
        with pytest.raises(ModelFormatError, match="config.json: not valid JSON"): load_checkpoint(d)


def test_chat_template_limits():
    """A chat template from a model file renders in a worker process under the operating system's limits: huge loops, outputs and
    numbers are refused by name, within the wall clock's bound, at the default limits."""
    import time
    from xllm.chat import ChatTemplate, TemplateError, MAX_RENDER_SECONDS
    hi = [{"role": "user", "content": "hi"}]
    for src, why in [("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "more than 10000"),
                     ("{% for i in range(5000) %}{% for j in range(5000) %}{{ j }}{% endfor %}{% endfor %}", "exceeds its limits"),
                     ("{% for i in messages * 1000 %}{% for j in messages * 1000 %}{% for k in messages * 1000 %}{% endfor %}{% endfor %}{% endfor %}",
                      "exceeds its limits"),
                     ("{{ 'ab' * 10**9 }}", "exceeds its limits"), ("{{ (10 ** 1000) ** 1000 }}", "Exceeds the limit (4300 digits)"),
                     ("{{ 'x' | center(10**12) }}", "exceeds its limits"), ("{{ '%0999999999d' % 1 }}", "exceeds its limits")]:
        t0 = time.perf_counter()
        with pytest.raises(TemplateError, match=re.escape(why)): ChatTemplate(src).render(hi)
        assert time.perf_counter() - t0 < 2 * MAX_RENDER_SECONDS + 1 + 10, src   # the wall clock's bound (slack for a loaded machine)

def _zombies() -> list[int]:
    "Children of this process that exited and were never reaped."
    out = []
    for d in Path("/proc").iterdir():
        try: stat = (d / "stat").read_text()
        except OSError: continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state == "Z" and int(ppid) == os.getpid(): out.append(int(d.name))
    return out


def _rss_kib() -> int:
    return next(int(l.split()[1]) for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS:"))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_template_workers_survive_hostile_renders(monkeypatch):
    """1,000 hostile renders in a row (refusals, memory bombs, CPU overruns, outputs over the cap, workers killed in a long C call)
    leave no zombie process, do not grow this process's RSS, and the pool renders honest templates after them."""
    import xllm.chat as chat
    from xllm.chat import ChatTemplate, TemplateError, template_workers
    monkeypatch.setattr(chat, "MAX_RENDER_SECONDS", 0.05)
    hi = [{"role": "user", "content": "hi"}]
    hostile = ["{{ raise_exception('no') }}", "{{ 'x' * 10**10 }}", "{{ 'x' * 2000000 }}", "{{ range(10**6)|list }}", "{{ x.y.z }}",
               "{% for i in range(9999) %}{% for j in range(9999) %}{% endfor %}{% endfor %}"]
    killer = "{% set ns = namespace(t='a') %}{% for i in range(40) %}{% set ns.t = (ns.t, ns.t) %}{% endfor %}{{ {}.get(ns.t) }}"
    pool, rss = template_workers(), None
    replaced = pool.replaced
    for i in range(1000):
        if i == 100: rss = _rss_kib()                            # after the warm-up
        src = killer if i % 200 == 199 else hostile[i % len(hostile)] + f"{{# {i} #}}"   # distinct sources: compiled every time
        with pytest.raises(TemplateError): ChatTemplate(src).render(hi)
    assert pool.replaced - replaced == 5                          # the five killed in C, each replaced
    assert _zombies() == []
    assert _rss_kib() - rss < 20_000, (rss, _rss_kib())
    assert ChatTemplate("{{ messages[0].content }}!").render(hi) == "hi!"
