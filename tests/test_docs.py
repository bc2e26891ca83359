"Docs without Quarto: scripts/render_docs.py renders notebooks to HTML (and screenshots them when Chromium is installed)."
import shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("nbconvert")


def test_render_docs(tmp_path):
    nbs = [ROOT / "nbs" / "index.ipynb", ROOT / "nbs" / "02b_tokenizer_figures.ipynb"]
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "render_docs.py"), *map(str, nbs), "--out", str(tmp_path), "--screenshot"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    index = (tmp_path / "index.html").read_text()
    assert "Quick start" in index and 'href="02b_tokenizer_figures.html"' in index and "#|" not in index
    fig = (tmp_path / "02b_tokenizer_figures.html").read_text()
    assert "Tokens per word across languages" in fig and "ERRORS" not in r.stdout
    from xllm.core import find_shared, default_model_path
    try: have_smol = default_model_path(download=False) is not None
    except FileNotFoundError: have_smol = False
    if have_smol or find_shared() is not None: assert "data:image/png" in fig   # the figure was drawn from a real run
    if shutil.which("chromium"):
        for name in ("index", "02b_tokenizer_figures"):
            png = tmp_path / "shots" / f"{name}.png"
            assert png.exists() and png.stat().st_size > 20_000, png
