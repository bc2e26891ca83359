"""Tokenizer throughput: xllm's SentencePiece BPE vs `sentencepiece` (Llama 2 tokenizer.model) and, when the default
SmolLM2 GGUF is in the cache, xllm's byte-level BPE vs Hugging Face `tokenizers` on the same vocabulary.

The text is ~1 MB of English: the docstrings of the Python standard library (sorted, so it is the same text for a given
Python version), repeated to the size. Each encoder gets (a) the whole text as one string and (b) one call per paragraph
(split on blank lines), single-threaded; best of --repeat runs of CPU time (process_time, robust on a shared machine); ids are checked to be equal. "cold" is our first pass with
an empty word cache.
Run: python scripts/bench_tokenizer.py [--mb 1.0] [--repeat 3]
"""
import argparse, importlib, inspect, sys, time

def corpus(n_bytes: int) -> str:
    mods = ["os", "re", "json", "collections", "itertools", "functools", "pathlib", "typing", "argparse", "logging", "subprocess",
            "threading", "asyncio", "email", "http.client", "urllib.request", "unittest", "decimal", "fractions", "statistics",
            "random", "datetime", "calendar", "textwrap", "string", "difflib", "csv", "sqlite3", "zipfile", "tarfile", "shutil"]
    docs = []
    for name in mods:
        try: m = importlib.import_module(name)
        except ImportError: continue
        for _, obj in sorted(vars(m).items()):
            d = inspect.getdoc(obj) if (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj)) else None
            if d: docs.append(d)
    text = "\n\n".join(dict.fromkeys(docs))
    while len(text.encode()) < n_bytes: text += "\n\n" + text
    return text.encode()[:n_bytes].decode("utf-8", "ignore")

def timeit(f, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.process_time(); out = f(); best = min(best, time.process_time() - t)
    return best, out

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from xllm.tokenizer import Tokenizer
    from xllm.core import find_shared, default_model_path
    text = corpus(int(a.mb * 1e6))
    mb = len(text.encode()) / 1e6
    print(f"text: {mb:.2f} MB, {len(text.split())} words; Python {sys.version.split()[0]}")
    shared = find_shared()
    paras = [p for p in text.split("\n\n") if p]
    def bench(label, ref_enc, tok, ref_name):
        ours_enc = tok.encode
        for how, run_ref, run_ours in [("whole text", lambda: ref_enc(text), lambda: ours_enc(text)),
                                       ("per paragraph", lambda: [ref_enc(p) for p in paras], lambda: [ours_enc(p) for p in paras])]:
            tok.model._cache.clear()
            t_ref, ref = timeit(run_ref, a.repeat)
            t_cold, ours = timeit(run_ours, 1)
            t_warm, ours = timeit(run_ours, a.repeat)
            n = len(ref) if how == "whole text" else sum(map(len, ref))
            same = "ids equal" if ours == ref else "IDS DIFFER"
            print(f"{label:12s} {how:13s} {ref_name} {mb / t_ref:6.2f} MB/s | xllm cold {mb / t_cold:6.2f} MB/s ({t_cold / t_ref:4.1f}x the time), "
                  f"warm {mb / t_warm:6.2f} MB/s ({t_warm / t_ref:4.1f}x); {n} tokens, {same}")
    if shared and (shared / "models" / "tokenizer.model").exists():
        import sentencepiece as spm
        path = shared / "models" / "tokenizer.model"
        sp = spm.SentencePieceProcessor(model_file=str(path), num_threads=1)
        bench("Llama 2 SPM", sp.encode, Tokenizer.from_file(path), "sentencepiece")
    else: print("shared/models/tokenizer.model not found: skipping the sentencepiece comparison")
    try: gguf_path = default_model_path(download=False)
    except FileNotFoundError: gguf_path = None
    try: importlib.import_module("xllm.bpe")
    except ImportError: gguf_path = None
    if gguf_path:
        from transformers import AutoTokenizer
        from tokenizers import pre_tokenizers as pt
        hf = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name).backend_tokenizer
        # SmolLM2's real pre-tokenizer (llama.cpp 'smollm'; transformers' GGUF converter keeps only the GPT-2 regex)
        hf.pre_tokenizer = pt.Sequence([pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False, use_regex=True)])
        bench("SmolLM2 BPE", lambda s: hf.encode(s, add_special_tokens=False).ids, Tokenizer.from_file(gguf_path), "tokenizers")
    else: print("SmolLM2 GGUF or xllm.bpe not available: skipping the tokenizers comparison")

if __name__ == "__main__": main()
