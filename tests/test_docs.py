"Docs without Quarto: scripts/render_docs.py renders notebooks to HTML, scripts/screenshot_docs.sh screenshots them; every public name has a docstring."
import dataclasses, importlib, inspect, pkgutil, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _have_default_model():
    from xllm.core import default_model_path
    try: return default_model_path(download=False) is not None
    except FileNotFoundError: return False


def test_render_docs(tmp_path):
    pytest.importorskip("nbconvert")
    nb = ROOT / "nbs" / "03b_tokenizer_figures.ipynb"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "render_docs.py"), str(nb), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0 and "ERRORS" not in r.stdout, r.stdout + r.stderr
    fig = (tmp_path / "03b_tokenizer_figures.html").read_text()
    assert "Tokens per word across languages" in fig and 'href="index.html"' in fig and "#|" not in fig
    from xllm.core import find_shared
    if _have_default_model() or find_shared() is not None: assert "data:image/png" in fig   # the figure was drawn from a real run


def _image_stats(png):
    "(width, height, distinct colours, fraction of non-white pixels, pixels of the widget's blue Send button)."
    import numpy as np
    from PIL import Image
    with Image.open(png) as im: a = np.asarray(im.convert("RGB")).astype(int)
    h, w, _ = a.shape
    colours = len(np.unique(a[::4, ::4].reshape(-1, 3), axis=0))
    ink = float((a[::4, ::4].min(-1) < 235).mean())
    blue = int((np.abs(a - np.array([0x21, 0x96, 0xf3])).max(-1) < 12).sum())
    return w, h, colours, ink, blue


def test_screenshot_docs(tmp_path):
    "scripts/screenshot_docs.sh renders the README and chat demo pages (widgets drawn offline, no tracebacks) and screenshots them."
    pytest.importorskip("nbconvert")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "screenshot_docs.sh"), str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0 and "ERRORS" not in r.stdout, r.stdout + r.stderr
    index, chat = (tmp_path / "index.html").read_text(), (tmp_path / "18_widgets.html").read_text()
    assert "Quick start" in index and 'href="18_widgets.html"' in index and "#|" not in index
    for page in (index, chat):
        assert 'class="xllm-widget"' in page and 'xllm-w-button' in page       # the ChatWidget drawn as static HTML ...
        assert "widget-view+json" not in page and "unpkg.com" not in page       # ... not left to a CDN script that cannot load offline
        assert "Traceback" not in page and "ModuleNotFoundError" not in page
    assert "<b>assistant</b>:" in chat                                           # a conversation was rendered
    import xllm.widgets as W   # show_doc output for every exported function and class
    for name in W.__all__:
        if callable(getattr(W, name)): assert f'<h3 id="{name}">' in chat, name
    if _have_default_model(): assert "SmolLM2" in chat and "tokens/s" in chat
    if shutil.which("chromium") is None: pytest.skip("chromium not installed: pages rendered, screenshots skipped")
    pytest.importorskip("PIL")
    shots = {p.name: p for p in (tmp_path / "shots").glob("*.png")}
    assert {"index.png", "18_widgets.png", "18_widgets_widget.png"} <= set(shots), sorted(shots)
    for name, p in shots.items():
        w, h, colours, ink, blue = _image_stats(p)
        assert w == 1280 and h >= 300, (name, w, h)
        assert colours > 50 and ink > 0.05, (name, colours, ink)               # not a blank or single-colour page
    assert _image_stats(shots["18_widgets_widget.png"])[4] > 500                # the blue Send button is drawn


def missing_docstrings() -> list[str]:
    "Public functions, classes and their public methods/properties in `xllm.*.__all__` without a docstring (overrides of non-xllm bases excepted)."
    import xllm
    out = []
    for m in sorted(pkgutil.iter_modules(xllm.__path__), key=lambda m: m.name):
        if m.name.startswith("_"): continue
        mod = importlib.import_module(f"xllm.{m.name}")
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or not getattr(obj, "__module__", "").startswith("xllm"): continue
            doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
            if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and (doc or "").startswith(obj.__name__ + "("): doc = None  # auto-generated
            if not (doc or "").strip(): out.append(f"{m.name}.{name}")
            if inspect.isclass(obj):
                inherited = {k for b in obj.__mro__[1:] if not b.__module__.startswith("xllm") for k in vars(b)}
                for k, v in vars(obj).items():
                    if k.startswith("_") or k in inherited: continue   # an override (nn.Module.forward, ...) inherits its base's doc
                    f = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
                    if inspect.isfunction(f) and not (f.__doc__ or "").strip(): out.append(f"{m.name}.{name}.{k}")
    return out


# methods in notebooks whose owners were busy when this check was written (to be documented, then removed from here)
KNOWN_MISSING: set[str] = set()   # names allowed to lack a docstring (none now)


def test_public_api_has_docstrings():
    missing = set(missing_docstrings())
    assert missing <= KNOWN_MISSING, f"public names without a docstring: {sorted(missing - KNOWN_MISSING)}"


def test_docstring_check_is_not_vacuous(monkeypatch):
    import types
    mod = types.ModuleType("xllm.fake_undocumented")
    exec("__all__ = ['f', 'C']\ndef f(): pass\nclass C:\n    'doc'\n    def m(self): pass", mod.__dict__)
    mod.f.__module__ = mod.C.__module__ = "xllm.fake_undocumented"
    monkeypatch.setitem(sys.modules, "xllm.fake_undocumented", mod)
    monkeypatch.setattr(pkgutil, "iter_modules", lambda path: [types.SimpleNamespace(name="fake_undocumented")])
    assert missing_docstrings() == ["fake_undocumented.f", "fake_undocumented.C.m"]
