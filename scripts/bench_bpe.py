"""Speed of xllm's pure-Python byte-level BPE (`xllm.bpe.ByteLevelBPE`) vs HF `tokenizers` (Rust) on ~1 MB of English.

The text is the docstrings of the Python standard library (English prose with some code), so the run needs no download.
Tokenizer: the SmolLM2-135M-Instruct GGUF vocabulary (49152 tokens, 48900 merges, pre-type 'smollm'); HF tokenizers gets the
same vocab/merges with SmolLM2's upstream pre-tokenizer. For scale, sentencepiece (C++) on the Llama 2 tokenizer.model too.
Speeds are MB of UTF-8 per CPU-second (time.process_time), so a busy shared machine does not distort the comparison.
Usage: python scripts/bench_bpe.py [--mb 1.0]
"""
import argparse, ast, json, os, sys, sysconfig, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository's xllm, also when the package is not installed

def english_corpus(n_bytes: int) -> str:
    "Docstrings of stdlib modules, in sorted file order, until n_bytes of UTF-8."
    parts, size = [], 0
    for f in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "test" in f.parts or "site-packages" in f.parts: continue
        try: tree = ast.parse(f.read_text(encoding="utf-8"))
        except Exception: continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                d = ast.get_docstring(node)
                if d and len(d) > 80:
                    parts.append(d); size += len(d.encode()) + 2
                    if size >= n_bytes: return "\n\n".join(parts)
    return "\n\n".join(parts)

def timeit(fn, reps=3):
    "Best of `reps` CPU seconds of this process (all its threads): fair on a shared machine, where wall time is noise."
    best = float("inf")
    for _ in range(reps):
        t = time.process_time(); r = fn(); best = min(best, time.process_time() - t)
    return best, r

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--mb", type=float, default=1.0); a = ap.parse_args()
    from xllm.core import default_model_path, find_shared
    from xllm.bpe import ByteLevelBPE
    text = english_corpus(int(a.mb * 1e6)); mb = len(text.encode()) / 1e6
    print(f"corpus: {mb:.2f} MB, {len(text)} chars")
    try:
        from xllm.gguf import GGUFFile
        md = GGUFFile(default_model_path(download=False)).metadata
    except ImportError:
        import gguf
        r = gguf.GGUFReader(default_model_path(download=False))
        md = {k: r.fields[k].contents() for k in r.fields if k.startswith("tokenizer.ggml")}
    t = time.perf_counter(); ours = ByteLevelBPE.from_gguf_metadata(md); t_build = time.perf_counter() - t
    from tokenizers import Tokenizer, models, pre_tokenizers
    hf = Tokenizer(models.BPE({p: i for i, p in enumerate(ours.pieces)}, [tuple(m.split(" ", 1)) for m in md["tokenizer.ggml.merges"]]))
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    lines = [l + "\n" for l in text.split("\n")]
    def ours_lines(): return [i for l in lines for i in ours.encode(l)]
    ours._cache.clear()
    t_cold, ids = timeit(lambda: (ours._cache.clear(), ours.encode(text))[1])
    t_warm, ids2 = timeit(lambda: ours.encode(text))
    t_warm_l, ids3 = timeit(ours_lines)
    t_hf, ref = timeit(lambda: hf.encode(text, add_special_tokens=False).ids)
    t_hf_l, ref3 = timeit(lambda: [i for l in lines for i in hf.encode(l, add_special_tokens=False).ids])
    t_hfb, _ = timeit(lambda: hf.encode_batch(lines, add_special_tokens=False))
    assert ids == ids2 == ref and ids3 == ref3, "xllm and HF tokenizers disagree on the benchmark corpus"
    rel = lambda ours_t, other_t: f"xllm takes {ours_t / other_t:.2f}x its time"
    print(f"xllm build from GGUF metadata: {t_build:.2f} s; {len(ids)} tokens ({len(ids)/mb/1e3:.0f} k/MB); ids equal to HF: True")
    print(f"(MB per CPU-second of this process, best of 3; threads' CPU time adds up)")
    print(f"xllm ByteLevelBPE, whole text, cold cache : {mb/t_cold:6.2f} MB/s")
    print(f"xllm ByteLevelBPE, whole text, warm cache : {mb/t_warm:6.2f} MB/s")
    print(f"xllm ByteLevelBPE, line by line, warm     : {mb/t_warm_l:6.2f} MB/s")
    print(f"HF tokenizers, whole text                 : {mb/t_hf:6.2f} MB/s  ({rel(t_warm, t_hf)})")
    print(f"HF tokenizers, line by line               : {mb/t_hf_l:6.2f} MB/s  ({rel(t_warm_l, t_hf_l)})")
    print(f"HF tokenizers, encode_batch(lines)        : {mb/t_hfb:6.2f} MB/s  (Rust threads; {rel(t_warm_l, t_hfb)})")
    sh = find_shared()
    if sh is not None and (sh / "models/tokenizer.model").exists():
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=str(sh / "models/tokenizer.model"))
        t_sp, _ = timeit(lambda: sp.encode(text))
        t_sp_l, _ = timeit(lambda: sp.encode(lines))
        print(f"sentencepiece (Llama 2, C++), whole text  : {mb/t_sp:6.2f} MB/s  ({rel(t_warm, t_sp)})")
        print(f"sentencepiece (Llama 2, C++), lines       : {mb/t_sp_l:6.2f} MB/s  ({rel(t_warm_l, t_sp_l)})")

if __name__ == "__main__": main()
