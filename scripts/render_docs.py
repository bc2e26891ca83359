#!/usr/bin/env python
"""Render the notebooks to a static HTML site in _docs/ without Quarto.

`nbdev_docs` needs the Quarto binary; the `quarto-cli` package on PyPI is a 5 kB source package that downloads
that binary from GitHub while it builds, so it cannot be installed on a machine that reaches only PyPI.
This script does the same job with what pip can install: nbdev's own notebook processors (front matter,
show_doc, hide/export directives), run in one kernel per notebook that executes *every* cell in order
(so cells that mix imports with code work, and figures come from real runs; cells flagged `#| slow` or
`#| cuda` keep their saved outputs), then nbconvert's HTML exporter, plus a navigation bar.

    python scripts/render_docs.py                 # all notebooks -> _docs/*.html
    python scripts/render_docs.py nbs/13_widgets.ipynb nbs/index.ipynb
    python scripts/render_docs.py --no-execute    # saved outputs only (fast)

Needs: nbdev, execnb, nbconvert (pip install nbconvert). Screenshots: scripts/screenshot_docs.sh.
"""
from __future__ import annotations
import argparse, html, json, os, re, sys, time, warnings
from pathlib import Path

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parents[1]
SKIP_FLAGS = {"slow", "cuda"}


def _flags(cell) -> set[str]:
    first = (cell.source or "").lstrip().splitlines()[:1]
    m = re.match(r"#\|\s*([\w ]+)$", first[0].strip()) if first else None
    return set(m.group(1).split()) if m else set()


def _make_exec_proc(slow=False):
    from nbdev.processors import Processor, _do_eval
    from execnb.shell import CaptureShell

    class exec_all(Processor):
        "Execute every code cell in order in one shell (slow/cuda-flagged cells and `eval: false` cells keep saved outputs)."
        def begin(self):
            self.k = CaptureShell(path=str(ROOT / "nbs"))
            self.k.run_cell("from nbdev.showdoc import show_doc")
            self.errors, self.slow = [], slow
        def __call__(self, cell):
            if cell.cell_type != "code" or not cell.source: return
            if not self.slow and (_flags(cell) | set(cell.directives_)) & SKIP_FLAGS: return
            if cell.directives_.get("eval:", [""])[0].lower() == "false": return
            self.k.cell(cell)
            if self.k.exc: self.errors.append((cell.idx_, str(self.k.exc[1])[:200])); self.k.exc = None
        def end(self):
            try: from ipywidgets import Widget
            except ImportError: return
            state = Widget.get_manager_state(drop_defaults=True)
            if state.get("state"): self.nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": state}
    return exec_all


def process(path: Path, execute: bool, slow: bool = False):
    from execnb.nbio import read_nb
    from nbdev.processors import FilterDefaults, exec_show_docs, NBProcessor
    nb = read_nb(path)
    procs = list(FilterDefaults().procs())
    errors = []
    if execute:
        ex = _make_exec_proc(slow)
        procs = [ex if p is exec_show_docs else p for p in procs]
    else: procs = [p for p in procs if p is not exec_show_docs]
    cwd = os.getcwd(); os.chdir(ROOT / "nbs")
    os.environ["IN_TEST"] = "1"
    try:
        proc = NBProcessor(path, procs=procs, nb=nb)
        proc.process()
        errors = next((p.errors for p in proc.procs if hasattr(p, "errors")), [])
    finally: os.chdir(cwd); os.environ.pop("IN_TEST", None)
    return proc.nb, errors


def to_html(nb, title: str, nav: str) -> str:
    import nbformat
    from nbconvert import HTMLExporter
    fm = getattr(nb, "frontmatter_", {}) or {}
    raw = _plain(nb); raw.setdefault("metadata", {}); raw["nbformat"], raw["nbformat_minor"] = 4, 4
    d = nbformat.reads(json.dumps(raw), as_version=4)   # joins list-of-lines sources and outputs
    d.cells = [c for c in d.cells if not (c.cell_type == "raw" and c.source.lstrip().startswith("---"))]
    head = f"# {fm.get('title', title)}\n\n" + (f"> {fm['description']}\n" if fm.get("description") else "")
    d.cells.insert(0, nbformat.v4.new_markdown_cell(head))
    cells = []
    for c in d.cells:
        c.pop("id", None)
        if c.cell_type == "code":
            lines = c.source.splitlines()
            dirs = [l for l in lines if l.startswith("#|")]
            c.source = "\n".join(l for l in lines if not l.startswith("#|")).strip("\n")
            c.setdefault("outputs", []); c.setdefault("execution_count", None)
            if any(re.match(r"#\|\s*echo:\s*false", l) for l in dirs):   # Quarto's `echo: false`: output only
                mds = [o.get("data", {}).get("text/markdown") for o in c.outputs]
                if c.outputs and all(mds):
                    cells.append(nbformat.v4.new_markdown_cell(_quarto_md("\n\n".join(mds)))); continue
                c.metadata.setdefault("tags", []).append("remove_input")
            c.outputs = [o for o in c.outputs if not (o.get("name") == "stderr" and _PROGRESS.search(o.get("text", "")))]
            for o in c.outputs:
                if "text/markdown" in o.get("data", {}): o["data"]["text/markdown"] = _quarto_md(o["data"]["text/markdown"])
        elif c.cell_type == "markdown": c.source = _quarto_md(c.source)
        cells.append(c)
    d.cells = cells
    d.nbformat, d.nbformat_minor = 4, 4
    from traitlets.config import Config
    cfg = Config(); cfg.TagRemovePreprocessor.remove_input_tags = {"remove_input"}; cfg.TagRemovePreprocessor.enabled = True
    ex = HTMLExporter(config=cfg, template_name="lab", exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = ex.from_notebook_node(d)
    css = ("<style>.xllm-nav{position:sticky;top:0;z-index:10;display:flex;flex-wrap:wrap;row-gap:2px;background:#20344f;padding:6px 12px;font:14px sans-serif}"
           ".xllm-nav a{color:#fff;margin-right:12px;text-decoration:none}.xllm-nav a.cur{font-weight:bold;text-decoration:underline}"
           "</style>")
    body = body.replace("<title>Notebook</title>", f"<title>xllm - {html.escape(fm.get('title', title))}</title>")
    return re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + css + nav, body, count=1)


_PROGRESS = re.compile(r"\|\s*\d+/\d+ \[")   # tqdm progress bars on stderr


def _quarto_md(s: str) -> str:
    "Drop Quarto-only markdown attributes (`{target=...}`, `{.class}`) that plain markdown would print."
    return re.sub(r"\{(?:target|style|\.)[^}\n]*\}", "", s)


def _plain(o):
    "execnb's AttrDict notebook -> plain dicts/lists for nbformat."
    if isinstance(o, dict): return {k: _plain(v) for k, v in o.items() if not k.endswith("_")}
    if isinstance(o, (list, tuple)): return [_plain(v) for v in o]
    return o


def screenshot(page: Path, png: Path, width=1280, height=2400):
    "Screenshot `page` with headless Chromium (Debian's `chromium` package)."
    import shutil, subprocess
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None: print("  no chromium found: skipping the screenshot"); return
    png.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},{height}",
                    f"--screenshot={png}", page.resolve().as_uri()], capture_output=True, timeout=120)
    print(f"  screenshot -> {png}" if png.exists() else "  screenshot failed")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", help="notebooks to render (default: all of nbs/*.ipynb)")
    ap.add_argument("--out", default=str(ROOT / "_docs"))
    ap.add_argument("--no-execute", action="store_true", help="use saved outputs only")
    ap.add_argument("--slow", action="store_true", help="also execute cells flagged slow/cuda")
    ap.add_argument("--screenshot", action="store_true", help="save a PNG of each page with headless Chromium into OUT/shots/")
    a = ap.parse_args(argv)
    every = sorted((ROOT / "nbs").glob("*.ipynb"))
    nbs = [Path(p).resolve() for p in a.notebooks] or every
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    page = lambda p: "index.html" if p.stem == "index" else p.stem + ".html"
    order = sorted(every, key=lambda p: (p.stem != "index", p.stem))
    failed = 0
    for p in nbs:
        t0 = time.time()
        nb, errors = process(p, execute=not a.no_execute, slow=a.slow)
        nav = '<div class="xllm-nav">' + "".join(
            f'<a href="{page(q)}"{" class=cur" if q == p else ""}>{"xllm" if q.stem == "index" else html.escape(q.stem)}</a>' for q in order) + "</div>"
        (out / page(p)).write_text(to_html(nb, p.stem, nav))
        failed += bool(errors)
        print(f"{p.name} -> {out / page(p)} ({time.time() - t0:.1f} s){'  ERRORS in cells ' + str(errors) if errors else ''}")
        if a.screenshot: screenshot(out / page(p), out / "shots" / (p.stem + ".png"))
    return 1 if failed else 0


if __name__ == "__main__": sys.exit(main())
