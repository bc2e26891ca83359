"""The notebooks as a reader runs them (issue #40): `jupyter nbconvert --to html --execute` on the tour and the widget notebook, as the
README's notebook line sets up, and what the page then shows: no error-coloured stderr block, no `show_doc` markdown printed as text
(`source{target=...}`), and, for 18_widgets, the widgets drawn from the installed ipywidgets' JavaScript rather than a CDN's.

nbconvert writes its page into a temporary folder and runs each notebook in nbs/, as Jupyter would (so the tiny test model in shared/ is
found, as it is for nbdev_test); 18_widgets runs once more without shared/, on the random stand-in a reader of a fresh clone gets.
About a minute in all. Skipped where Jupyter's pieces are not installed (`pip install -e ".[notebooks]"`, or `.[dev]` as CI has it)."""
import importlib.util, os, re, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
_missing = [m for m in ("nbconvert", "ipykernel", "ipywidgets", "nbdev") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"Jupyter's pieces are not installed ({', '.join(_missing)}): pip install -e '.[notebooks]'")

STDERR = re.compile(r'class="[^"]*\boutput_stderr\b|data-mime-type="application/vnd\.jupyter\.stderr"')   # classic and lab templates
QUARTO_ATTR = re.compile(r"source(?:</a>)?\{target=")   # show_doc's markdown link attribute, printed as text outside Quarto


def _page(nb: str, out: Path, **env) -> str:
    "Execute nbs/`nb` with nbconvert (a reader's environment: no warning filter from .ci/run), return the HTML page it writes."
    e = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | env
    cmd = [sys.executable, "-m", "nbconvert", "--to", "html", "--execute", "--ExecutePreprocessor.timeout=300", "--output-dir", str(out), str(ROOT / "nbs" / nb)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=e, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"nbconvert --execute {nb} failed:\n{r.stderr[-4000:]}"
    return (out / nb.replace(".ipynb", ".html")).read_text(encoding="utf-8")


def _stderr_blocks(page: str) -> list[str]:
    "The text of each stderr output block in an nbconvert page (empty list if none)."
    return [re.sub(r"<[^>]+>", "", page[page.index(">", m.end()) + 1:m.end() + 600]).strip()[:300] for m in STDERR.finditer(page)]


@pytest.fixture(scope="module")
def tour(tmp_path_factory): return _page("00_tour.ipynb", tmp_path_factory.mktemp("tour"))

@pytest.fixture(scope="module")
def widgets(tmp_path_factory): return _page("18_widgets.ipynb", tmp_path_factory.mktemp("widgets"))

@pytest.fixture(scope="module")
def widgets_stand_in(tmp_path_factory):
    out = tmp_path_factory.mktemp("widgets_stand_in")
    return _page("18_widgets.ipynb", out, XLLM_SHARED=str(out / "no-shared"))   # no test data: the notebook's random stand-in


def test_tour_page(tour):
    assert _stderr_blocks(tour) == []
    assert not QUARTO_ATTR.search(tour)
    assert "KV cache:" in tour and "runner:" in tour and "step 1:" in tour   # the cells' output is there


@pytest.mark.parametrize("which", ["widgets", "widgets_stand_in"])
def test_widgets_page(which, request):
    page = request.getfixturevalue(which)
    assert _stderr_blocks(page) == [], "stderr blocks in the page"          # nbdev's pkg_resources warning, the chat-template warning
    assert not QUARTO_ATTR.search(page), "show_doc printed as markdown text"
    assert page.count('<h3 id="ChatWidget">ChatWidget</h3>') == 1 and '<h3 id="ChatWidget.send_click">' in page   # show_doc as HTML (a @patch method under its class's name)
    assert page.count('<script data-xllm="offline-widgets">') == 1            # the widgets' JavaScript, in the page
    assert '<script type="application/vnd.jupyter.widget-state+json">' in page and page.count('<script type="application/vnd.jupyter.widget-view+json">') == 2


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (Debian: apt-get install chromium) to open the page in")
def test_widgets_drawn_offline(widgets, tmp_path):
    """The page opened in headless Chromium with no network: the script draws every widget the page shows (ipywidgets' own DOM, inside
    the output), from the JavaScript in the page; nbconvert's own loader asks a CDN, which cannot be reached here, and draws nothing."""
    page = tmp_path / "18_widgets.html"
    page.write_text(widgets, encoding="utf-8")
    r = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--virtual-time-budget=10000",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180)
    dom = r.stdout
    assert dom, r.stderr[-2000:]
    views = widgets.count('<script type="application/vnd.jupyter.widget-view+json">')
    drawn = re.findall(r'<div class="widget-subarea"><div class="lm-Widget[^"]*widget-vbox', dom)
    assert len(drawn) == views, (len(drawn), views)
    assert len(re.findall(r'class="[^"]*\bwidget-button\b', dom)) == 4 * views and "Type a message and press Send" in dom   # the input row of each widget
    assert not re.search(r"\[widget [0-9a-f]{8}: ", dom)                       # the script's note for a widget it could not draw
