"""Write README.md from nbs/index.ipynb (markdown cells as they are, code cells as python blocks, `#| echo: false` cells by their
output alone, Markdown outputs as Markdown).

nbdev_readme needs Quarto; this does the same job for our index without it:  python scripts/make_readme.py
(`--check`: exit 1, writing nothing, if README.md is not what the notebook gives.)
"""
import json, re, sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
nb = json.loads((root / "nbs/index.ipynb").read_text())
parts = []
for c in nb["cells"]:
    src = "".join(c["source"])
    if c["cell_type"] == "markdown":
        # a link to a notebook is relative to nbs/ in the docs; README.md sits at the repository root
        parts.append(re.sub(r"\]\((?!https?:|/|nbs/)([\w.-]+\.ipynb)\)", r"](nbs/\1)", src))
    elif c["cell_type"] == "code" and not src.lstrip().startswith("#| hide"):
        code = "\n".join(l for l in src.splitlines() if not l.startswith("#|"))
        if "#| echo: false" not in src: parts.append(f"```python\n{code}\n```")
        outs = []
        for o in c.get("outputs", []):                     # consecutive writes to one stream are one block of text
            if o.get("output_type") == "stream" and outs and outs[-1].get("name") == o.get("name") and "text" in outs[-1]:
                outs[-1] = {**outs[-1], "text": "".join(outs[-1]["text"]) + "".join(o["text"])}
            else: outs.append(o)
        for o in outs:
            if "application/vnd.jupyter.widget-view+json" in o.get("data", {}): continue   # a live widget has no text form
            if "text/markdown" in o.get("data", {}): parts.append("".join(o["data"]["text/markdown"]).rstrip()); continue   # a table made by code
            text = "".join(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
            text = "\n".join(l.rsplit("\r", 1)[-1] for l in text.split("\n"))           # progress bars: keep their last state
            text = "\n".join(l for l in text.split("\n") if l.strip() or not l)
            if text: parts.append("```\n" + text.rstrip() + "\n```")
text = "<!-- generated from nbs/index.ipynb by scripts/make_readme.py; edit the notebook -->\n\n" + "\n\n".join(parts) + "\n"
if "--check" in sys.argv:
    if (root / "README.md").read_text() != text: sys.exit("README.md differs from nbs/index.ipynb: run python scripts/make_readme.py")
else: (root / "README.md").write_text(text)
