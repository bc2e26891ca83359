"`python -m xllm ...`: the same as the `xllm` command (see `xllm.cli`)."
from xllm.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
