"Property test: a mutated model file (bit flips, truncation, overwritten bytes) either loads or raises ModelFormatError, nothing else."
import json, shutil, struct
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
    for k, v in m.state_dict().items():
        if "rotary" not in k: w.add_tensor(names.get_name(k, try_suffixes=(".weight", ".bias")), v.numpy().astype(np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    load_checkpoint(d / "hf"); load_checkpoint(d / "m.gguf")   # both load as written
    st_bytes = (d / "hf" / "model.safetensors").read_bytes()
    return dict(dir=d, hf=d / "hf", gguf=d / "m.gguf", st_header=8 + struct.unpack_from("<Q", st_bytes)[0],
                gguf_header=gguf.GGUFReader(d / "m.gguf").data_offset)


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


def _load_ok_or_our_error(path):
    try: load_checkpoint(path)
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
