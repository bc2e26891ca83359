__version__ = "0.1.0"

import os as _os
# Idle OpenMP threads sleep instead of spin-waiting. Measured on a busy 2-core machine: spinning made decode 3-10x slower.
# It only takes effect when torch is imported after xllm (as `from xllm import LLM` does); set OMP_WAIT_POLICY to override.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The public API, imported lazily so that `import xllm` stays cheap (no torch import until it is needed).
_API = {
    "LLM": "xllm.llm", "RequestOutput": "xllm.llm", "CompletionOutput": "xllm.llm",
    "SamplingParams": "xllm.sampling", "Tokenizer": "xllm.tokenizer", "LlamaConfig": "xllm.core",
    "ModelFormatError": "xllm.core", "load_checkpoint": "xllm.weights", "Llama": "xllm.model",
}
__all__ = list(_API)

def __getattr__(name):
    if name in _API:
        import importlib
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'xllm' has no attribute {name!r}")
