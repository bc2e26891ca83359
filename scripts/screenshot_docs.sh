#!/usr/bin/env bash
# Render the README page (nbs/index) and the chat demo page (nbs/18_widgets) to HTML and screenshot them with headless
# Chromium (Debian's `chromium` package):
#
#     scripts/screenshot_docs.sh [OUT]        # default OUT=_docs; pages in OUT/, PNGs in OUT/shots/
#
# OUT/shots/index.png and 18_widgets.png are the top of each page; <page>_widget.png is the last chat widget on the page
# (18_widgets: the conversation with the default model, whose cell is flagged slow, hence --slow; without the default model
# in ~/.cache/xllm it is the tiny-model widget). Widgets are drawn as static HTML from their state (scripts/render_docs.py),
# so the pages and shots need no network. Without chromium the pages are still rendered and the shots are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-_docs}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
python scripts/render_docs.py nbs/index.ipynb --out "$out" --screenshot
python scripts/render_docs.py nbs/18_widgets.ipynb --slow --out "$out" --screenshot
