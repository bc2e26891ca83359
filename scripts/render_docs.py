#!/usr/bin/env python
"""Render the notebooks to a static HTML site in _docs/ without Quarto.

`nbdev_docs` needs the Quarto binary; the `quarto-cli` package on PyPI is a 5 kB source package that downloads
that binary from GitHub while it builds, so it cannot be installed on a machine that reaches only PyPI.
This script does the same job with what pip can install: nbdev's own notebook processors (front matter,
show_doc, hide/export directives), run in one kernel per notebook that executes *every* cell in order
(so cells that mix imports with code work, and figures come from real runs; cells flagged `#| slow` or
`#| cuda` keep their saved outputs), then nbconvert's HTML exporter, plus a navigation bar.

    python scripts/render_docs.py                 # all notebooks -> _docs/*.html
    python scripts/render_docs.py nbs/18_widgets.ipynb nbs/index.ipynb
    python scripts/render_docs.py --no-execute    # saved outputs only (fast)
    python scripts/render_docs.py --force         # render every page again (by default an unchanged page comes from the cache)

Each notebook runs in a process of its own (`--jobs` at once, one per CPU by default, the longest first, as timed by the last build), so
no notebook inherits another's state (13a sets torch to one thread, for one), and what a notebook's subprocesses write outside its
cells' captured output (the traceback a tensor-parallel worker prints in a deliberate failure test) goes to OUT/.cache/NAME.log, named
in the summary line, not to the console. A page whose notebook, package sources (xllm/), this script and flags are unchanged since
the last build is taken from OUT/.cache.

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
    from nbdev.processors import Processor
    from execnb.shell import CaptureShell

    class exec_all(Processor):
        "Execute every code cell in order in one shell (slow/cuda-flagged cells and `eval: false` cells keep saved outputs)."
        def begin(self):
            self.k = CaptureShell(path=str(ROOT / "nbs"))
            self.k.run_cell("from nbdev.showdoc import show_doc")
            self.k.run_cell("%matplotlib inline")   # figures become outputs, whatever backend an earlier notebook chose
            self.errors, self.slow = [], slow
        def __call__(self, cell):
            if cell.cell_type != "code" or not cell.source: return
            if not self.slow and (_flags(cell) | set(cell.directives_)) & SKIP_FLAGS: return
            if cell.directives_.get("eval:", [""])[0].lower() == "false": return
            self.k.cell(cell)
            if self.k.exc: self.errors.append((cell.idx_, str(self.k.exc[1])[:200])); self.k.exc = None
            if any(WIDGET_VIEW in o.get("data", {}) for o in cell.get("outputs", [])):   # snapshot widgets as they are now
                from ipywidgets import Widget
                state = Widget.get_manager_state(drop_defaults=True)["state"]
                cell.outputs = [static_widget_output(o, state) for o in cell.outputs]
    return exec_all


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_BUTTON_COLORS = {"primary": "#2196f3", "success": "#4caf50", "info": "#00bcd4", "warning": "#ff9800", "danger": "#f44336"}
_LAYOUT_CSS = ("width", "height", "max_height", "min_height", "max_width", "overflow", "overflow_y", "overflow_x", "margin", "padding", "border")


def widget_html(state: dict, model_id: str) -> str:
    """Static HTML for the ipywidget `model_id` from a widget-manager `state` ({id: {model_name, state}}), children included.

    A static page has no kernel, and the ipywidgets HTML manager (JavaScript) would come from a CDN that a page opened
    offline cannot reach, so each widget is drawn from its saved state as plain HTML form elements. Values equal to the
    widget's default are absent from a `drop_defaults` state, hence the defaults below."""
    e = state.get(model_id)
    if e is None: return f'<span class="xllm-w-missing">[widget {html.escape(model_id[:8])}: no saved state]</span>'
    name, st = e["model_name"], e.get("state", {})
    ref = lambda v: v[len("IPY_MODEL_"):] if isinstance(v, str) and v.startswith("IPY_MODEL_") else v
    lay = state.get(ref(st.get("layout", "")), {}).get("state", {})
    css = ";".join(f"{k.replace('_', '-')}:{lay[k]}" for k in _LAYOUT_CSS if lay.get(k))
    desc = st.get("description", "")
    label = f'<label class="xllm-w-desc">{html.escape(desc)}</label>' if desc else ""
    esc = lambda v: html.escape(str(v), quote=True)
    if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel"):
        kids = "".join(widget_html(state, ref(c)) for c in st.get("children", []))
        return f'<div class="xllm-w-{"vbox" if name == "VBoxModel" else "hbox"}" style="{css}">{kids}</div>'
    if name == "HTMLModel": return f'<div class="xllm-w-html" style="{css}">{label}<div>{st.get("value", "")}</div></div>'
    if name == "LabelModel": return f'<div class="xllm-w-row" style="{css}">{label}<span>{esc(st.get("value", ""))}</span></div>'
    if name == "ButtonModel":
        bg = _BUTTON_COLORS.get(st.get("button_style", ""), "#eeeeee"); fg = "#fff" if bg != "#eeeeee" else "#000"
        dis = " disabled" if st.get("disabled") else ""
        return f'<button class="xllm-w-button" style="background:{bg};color:{fg};{css}"{dis}>{esc(desc)}</button>'
    if name in ("TextModel", "PasswordModel"):
        return (f'<div class="xllm-w-row" style="{css}">{label}<input type="text" value="{esc(st.get("value", ""))}" '
                f'placeholder="{esc(st.get("placeholder", ""))}"></div>')
    if name == "TextareaModel":
        return (f'<div class="xllm-w-row" style="{css}">{label}<textarea rows="{st.get("rows") or 2}" '
                f'placeholder="{esc(st.get("placeholder", ""))}">{esc(st.get("value", ""))}</textarea></div>')
    if name in ("DropdownModel", "SelectModel"):
        opts, i = st.get("_options_labels", []), st.get("index")
        o = "".join(f'<option{" selected" if j == i else ""}>{esc(t)}</option>' for j, t in enumerate(opts))
        return f'<div class="xllm-w-row" style="{css}">{label}<select>{o}</select></div>'
    if name in ("FloatSliderModel", "IntSliderModel"):
        is_int = name == "IntSliderModel"
        lo, hi, step, v = st.get("min", 0), st.get("max", 100 if is_int else 10.0), st.get("step", 1 if is_int else 0.1), st.get("value", 0)
        shown = f"{v:d}" if is_int else f"{v:.2f}"
        return (f'<div class="xllm-w-row" style="{css}">{label}<input type="range" min="{lo}" max="{hi}" step="{step}" value="{v}">'
                f'<span class="xllm-w-readout">{shown}</span></div>')
    if name in ("FloatProgressModel", "IntProgressModel"):   # e.g. a tqdm.notebook bar
        return f'<div class="xllm-w-row" style="{css}">{label}<progress max="{st.get("max", 100)}" value="{st.get("value", 0)}"></progress></div>'
    if name in ("CheckboxModel", "ToggleButtonModel"):
        return f'<div class="xllm-w-row" style="{css}"><input type="checkbox"{" checked" if st.get("value") else ""}> {esc(desc)}</div>'
    return f'<span class="xllm-w-missing">[{esc(name)}]</span>'


WIDGET_CSS = ("<style>.xllm-widget{border:1px solid #ddd;border-radius:6px;padding:8px;margin:4px 0;font:13px sans-serif;max-width:1000px}"
              ".xllm-w-vbox{display:flex;flex-direction:column;gap:4px}.xllm-w-hbox{display:flex;flex-direction:row;gap:6px;align-items:center}"
              ".xllm-w-hbox>.xllm-w-row{flex:1 1 auto;min-width:0}.xllm-w-row select{max-width:100%}"
              ".xllm-w-row{display:flex;align-items:center;gap:6px}.xllm-w-row textarea,.xllm-w-row input[type=text]{flex:1;font:13px sans-serif;min-width:120px}"
              ".xllm-w-desc{min-width:72px;text-align:right;color:#333}.xllm-w-button{border:0;border-radius:2px;padding:4px 14px;font:13px sans-serif;min-width:70px}"
              ".xllm-w-button[disabled]{opacity:.5}.xllm-w-readout{min-width:36px}.xllm-w-html{overflow-y:auto}"
              ".xllm-widget-note{color:#777;font-size:11px;margin-top:4px}"
              ".jp-RenderedMarkdown pre{background:#f5f5f5;padding:6px 10px;border-radius:4px}</style>")


def static_widget_output(o: dict, state: dict) -> dict:
    "An output showing a widget (widget-view mime) -> the same output as static HTML drawn from `state`."
    view = o.get("data", {}).get(WIDGET_VIEW)
    if view is None: return o
    body = widget_html(state, view["model_id"])
    note = '<div class="xllm-widget-note">a snapshot of the live widget when this page was built; run the notebook to use it</div>'
    o["data"], o["metadata"] = {"text/html": f'<div class="xllm-widget">{body}{note}</div>'}, {}
    return o


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
    widgets = raw["metadata"].pop("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})   # saved outputs
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
            c.outputs = [static_widget_output(o, widgets) for o in c.outputs if not (o.get("name") == "stderr" and (_PROGRESS.search(o.get("text", "")) or not o.get("text", "").strip()))
                         and not o.get("data", {}).get("text/html", "").startswith(OFFLINE_WIDGETS)]
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
           "</style>" + WIDGET_CSS)
    body = body.replace("<title>Notebook</title>", f"<title>xllm - {html.escape(fm.get('title', title))}</title>")
    return re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + css + nav, body, count=1)


OFFLINE_WIDGETS = '<script data-xllm="offline-widgets">'   # xllm.widgets.offline_widgets(): 1 MB of widget JavaScript, for nbconvert's pages;
                                                              # these pages draw widgets as static HTML (static_widget_output) and leave it out
_PROGRESS = re.compile(r"\|\s*\d+/\d+ \[")   # tqdm progress bars on stderr


def _quarto_md(s: str) -> str:
    "Drop Quarto-only markdown attributes (`{target=...}`, `{.class}`) that plain markdown would print."
    return re.sub(r"\{(?:target|style|\.)[^}\n]*\}", "", s)


def _plain(o):
    "execnb's AttrDict notebook -> plain dicts/lists for nbformat."
    if isinstance(o, dict): return {k: _plain(v) for k, v in o.items() if not k.endswith("_")}
    if isinstance(o, (list, tuple)): return [_plain(v) for v in o]
    return o


def _chromium():
    import shutil
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _run_chromium(*args, timeout=120):
    import subprocess
    return subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=timeout)


_MEASURE = ('<script>addEventListener("load",()=>{const w=document.querySelectorAll(".xllm-widget"),n=document.querySelector(".xllm-nav");'
            'const e=w[w.length-1];document.documentElement.setAttribute("data-shot",[e?Math.round(e.getBoundingClientRect().top+scrollY):-1,'
            'e?e.offsetHeight:0,n?Math.ceil(n.getBoundingClientRect().bottom+scrollY):0,document.documentElement.scrollHeight].join(","))})</script>')


def screenshot(page: Path, png: Path, width=1280, height=2400, widget_context=420) -> list[Path]:
    """Screenshot `page` with headless Chromium (Debian's `chromium` package): the top `height` pixels -> `png`, and, when the page
    shows a widget, the last one with `widget_context` pixels above it (the code that made it) under the nav bar -> `<png stem>_widget.png`.
    (Headless Chromium draws a blank image for a page scrolled to an anchor, so the widget shot is cut out of a full-height one,
    at the position a measuring script reports through `--dump-dom`.)"""
    if _chromium() is None: print("  no chromium found: skipping the screenshot"); return []
    png.parent.mkdir(parents=True, exist_ok=True)
    _run_chromium(f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri())
    if not png.exists(): print("  screenshot failed"); return []
    shots = [png]
    measured = page.with_name(page.stem + "._measure.html")
    measured.write_text(page.read_text().replace("</body>", _MEASURE + "</body>", 1))
    try:
        dom = _run_chromium(f"--window-size={width},{height}", "--dump-dom", measured.resolve().as_uri()).stdout
        m = re.search(r'data-shot="(-?\d+),(\d+),(\d+),(\d+)"', dom)
        if m and int(m.group(1)) >= 0:
            top, h, nav, total = map(int, m.groups())
            full = png.with_name(png.stem + "._full.png")
            _run_chromium(f"--window-size={width},{total}", f"--screenshot={full}", measured.resolve().as_uri(), timeout=240)
            from PIL import Image
            with Image.open(full) as im:
                y0 = max(nav, top - widget_context); y1 = min(im.height, top + h + 10)
                out = Image.new("RGB", (width, nav + y1 - y0), "white")
                out.paste(im.crop((0, 0, width, nav)), (0, 0)); out.paste(im.crop((0, y0, width, y1)), (0, nav))
                wpng = png.with_name(png.stem + "_widget.png"); out.save(wpng); shots.append(wpng)
            full.unlink()
    finally: measured.unlink()
    for p in shots: print(f"  screenshot -> {p}")
    return shots


def _digest(files, *extra: str) -> str:
    import hashlib
    h = hashlib.sha256(" ".join(extra).encode() + b"\n")
    for f in files: h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _package_digest() -> str:
    "What every page depends on besides its notebook: the package it imports (Python, C++ and CUDA sources), this script, settings.ini."
    src = sorted(p for p in (ROOT / "xllm").rglob("*") if p.is_file() and p.suffix in (".py", ".cpp", ".h", ".cu", ".cuh", ".txt"))
    return _digest([Path(__file__).resolve(), ROOT / "settings.ini", *src])


NAV = "<!--xllm-nav-->"


def render_one(path: str, execute: bool, slow: bool, log: str, threads: int | None) -> tuple[str, list, float]:
    """Render one notebook in this process (a fresh one per notebook, see `main`): (page HTML with a nav placeholder, errors, seconds).
    File descriptors 1 and 2 go to `log` first, so what the notebook's subprocesses and C++ code write outside the cells' captured
    output (a tensor-parallel worker's traceback from a deliberate failure, a compiler's messages) lands there, not on the console."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1); os.dup2(fd, 2); os.close(fd)
    if threads:                                                         # this notebook's share of the cores
        os.environ["OMP_NUM_THREADS"] = str(threads)
        if "torch" in sys.modules: sys.modules["torch"].set_num_threads(threads)
    t0 = time.time()
    p = Path(path)
    nb, errors = process(p, execute=execute, slow=slow)
    return to_html(nb, p.stem, NAV), errors, time.time() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", help="notebooks to render (default: all of nbs/*.ipynb)")
    ap.add_argument("--out", default=str(ROOT / "_docs"))
    ap.add_argument("--no-execute", action="store_true", help="use saved outputs only")
    ap.add_argument("--slow", action="store_true", help="also execute cells flagged slow/cuda")
    ap.add_argument("--screenshot", action="store_true", help="save a PNG of each page with headless Chromium into OUT/shots/")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="notebooks rendered at once, each in its own process (default: one per CPU)")
    ap.add_argument("--force", action="store_true", help="render every page again, even those whose sources have not changed since the last build")
    a = ap.parse_args(argv)
    every = sorted((ROOT / "nbs").glob("*.ipynb"))
    nbs = [Path(p).resolve() for p in a.notebooks] or every
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    cache = out / ".cache"; cache.mkdir(exist_ok=True)
    page = lambda p: "index.html" if p.stem == "index" else p.stem + ".html"
    order = sorted(every, key=lambda p: (p.stem != "index", p.stem))
    nav_for = lambda p: '<div class="xllm-nav">' + "".join(
        f'<a href="{page(q)}"{" class=cur" if q == p else ""}>{"xllm" if q.stem == "index" else html.escape(q.stem)}</a>' for q in order) + "</div>"
    times_file = cache / "seconds.json"
    try: seconds = json.loads(times_file.read_text())
    except (OSError, ValueError): seconds = {}
    pkg = _package_digest()   # a page whose notebook and package are as at the last build is taken from the cache, not run again
    keys = {p: _digest([p], pkg, str(not a.no_execute), str(a.slow)) for p in nbs}
    cached = lambda p: cache / f"{p.stem}.{keys[p][:16]}.json"
    todo = [p for p in nbs if a.force or not cached(p).exists()]
    todo.sort(key=lambda p: -seconds.get(p.stem, p.stat().st_size / 2e4))   # longest first: the last to finish is a short one
    jobs = max(1, min(a.jobs, len(todo) or 1))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    failed, t_all = 0, time.time()

    def finish(p, html_page, errors, dt, log, from_cache=False):
        nonlocal failed
        (out / page(p)).write_text(html_page.replace(NAV, nav_for(p), 1))
        failed += bool(errors)
        note = ""
        if log is not None and log.exists() and log.stat().st_size:
            n = len(log.read_text(errors="replace").splitlines())
            note = f"  [{n} lines written outside the notebook's cells by its processes: {log}]"
        print(f"{p.name} -> {out / page(p)} ({'cached' if from_cache else f'{dt:.1f} s'}){'  ERRORS in cells ' + str(errors) if errors else ''}{note}", flush=True)
        if a.screenshot: screenshot(out / page(p), out / "shots" / (p.stem + ".png"))

    for p in nbs:
        if p not in todo:
            d = json.loads(cached(p).read_text())
            finish(p, d["html"], d["errors"], 0.0, None, from_cache=True)
    import concurrent.futures as cf, multiprocessing as mp
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # idle OpenMP threads sleep: the notebooks share the cores
    if "forkserver" in mp.get_all_start_methods():   # each notebook's process is forked from one that has imported what they all import
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), "ignore::UserWarning:nbdev.doclinks"]))   # its pkg_resources
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["nbdev.processors", "nbdev.showdoc", "execnb.shell", "nbconvert", "torch", "xllm.llm"])
    else: ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
        futs = {pool.submit(render_one, str(p), not a.no_execute, a.slow, str(cache / f"{p.stem}.log"), threads): p for p in todo}
        for f in cf.as_completed(futs):
            p = futs[f]
            try: html_page, errors, dt = f.result()
            except Exception as e:   # the worker died (a crash in native code, killed): say so, go on with the others
                print(f"{p.name}: FAILED to render: {type(e).__name__}: {e} (its output: {cache / (p.stem + '.log')})", flush=True)
                failed += 1; continue
            for old in cache.glob(f"{p.stem}.*.json"): old.unlink()
            if not errors: cached(p).write_text(json.dumps({"html": html_page, "errors": errors}))
            seconds[p.stem] = round(dt, 1)
            finish(p, html_page, errors, dt, cache / f"{p.stem}.log")
    times_file.write_text(json.dumps(seconds, indent=0, sort_keys=True))
    print(f"{len(nbs)} pages ({len(nbs) - len(todo)} unchanged, from the cache) in {time.time() - t_all:.0f} s, {jobs} at once")
    return 1 if failed else 0


if __name__ == "__main__": sys.exit(main())
