"""Write README.md from nbs/index.ipynb (markdown cells as they are, code cells as python blocks).

nbdev_readme needs Quarto; this does the same job for our index without it:  python scripts/make_readme.py
"""
import json, re
from pathlib import Path

root = Path(__file__).resolve().parent.parent
nb = json.loads((root / "nbs/index.ipynb").read_text())
parts = []
for c in nb["cells"]:
    src = "".join(c["source"])
    if c["cell_type"] == "markdown":
        parts.append(re.sub(r"^> ", "> ", src))
    elif c["cell_type"] == "code" and not src.lstrip().startswith("#| hide"):
        code = "\n".join(l for l in src.splitlines() if not l.startswith("#|"))
        parts.append(f"```python\n{code}\n```")
        for o in c.get("outputs", []):
            text = "".join(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
            if text: parts.append("```\n" + text.rstrip() + "\n```")
(root / "README.md").write_text("<!-- generated from nbs/index.ipynb by scripts/make_readme.py; edit the notebook -->\n\n" + "\n\n".join(parts) + "\n")
