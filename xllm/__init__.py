__version__ = "0.1.0"

# The public API, imported lazily so that `import xllm` stays cheap (no torch import until it is needed).
_API = {
    "LLM": "xllm.llm", "RequestOutput": "xllm.llm", "CompletionOutput": "xllm.llm",
    "SamplingParams": "xllm.sampling", "Tokenizer": "xllm.tokenizer", "LlamaConfig": "xllm.core",
    "ModelFormatError": "xllm.core", "load_checkpoint": "xllm.weights", "Llama": "xllm.model",
    "LoRARequest": "xllm.lora",
}
__all__ = list(_API)

def __getattr__(name):
    if name in _API:
        import importlib
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'xllm' has no attribute {name!r}")
