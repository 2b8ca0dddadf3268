"""The figures with a knob, as a reader uses them: offline, from ``file://``.

For each chapter's figure, headless Chromium (Debian's, driven by Playwright) opens the built page
from the file system with every request outside it refused, and checks that

- Vega draws the figure from the bundle the site serves (``_static/rlnotes/vega-bundle.js``);
- moving each slider with the keyboard to two positions changes what is plotted, and the plotted
  values (read from the marks of Vega's scenegraph, not from pixels) equal the precomputed ones
  embedded in the page for that setting;
- nothing is fetched from outside the site and the console stays clean (no error, no warning).

Run after the build: ``make book && pytest tests/browser``. Set ``RLNOTES_SCREENSHOTS=DIR`` to
save a screenshot of each figure at both positions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
CHROMIUM = os.environ.get("RLNOTES_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
BUNDLE = SITE / "_static" / "rlnotes" / "vega-bundle.js"
MAX_JS_BYTES = 2_000_000
TIMEOUT_MS = 90_000  # generous: the pages are long and CI machines can be busy

# chapter page -> the figure's id (fig_id in rlnotes.plotting.knobs)
FIGURES = {
    "book/mdp_dynamic_programming.html": "mdp-gamma",
    "book/td_learning.html": "td-cliff-epsilon",
    "book/dqn.html": "dqn-baird-alpha",
    "book/policy_gradients.html": "pg-psi-variance",
    "book/actor_critic.html": "ac-gae-critic",
    "book/trpo_ppo.html": "ppo-clip",
    "book/rlhf.html": "rlhf-overoptimisation",
    "book/dpo.html": "dpo-beta",
    "book/grpo.html": "grpo-group-size",
    "book/grpo_variants.html": "grpo-aggregation",
}
# Known, harmless noise of sphinx-book-theme / pydata-sphinx-theme (as in test_site.py).
CONSOLE_ALLOWLIST = [
    re.compile(r"THEBE_JS_URL'? has already been declared"),
    re.compile(r"invalid theme mode", re.I),
    re.compile(r"favicon\.ico"),
]

# What the marks of panel i show: one (series, x, y) per plotted item, from Vega's scenegraph.
PLOTTED_JS = """([id, panel]) => {
    const out = [];
    const walk = (node) => {
        if (!node) return;
        const d = node.datum;
        if (node.mark && ['line', 'symbol', 'rect'].includes(node.mark.marktype) && d
            && d.p === panel && d.series !== undefined) {
            out.push([String(d.series), d.x, d.y]);
        }
        for (const item of node.items || []) walk(item);
    };
    walk(window.rlnotesFigures[id].scenegraph().root);
    return out;
}"""

# The precomputed values embedded in the page for one setting of the knobs.
EMBEDDED_JS = """([id, panel, setting]) => {
    const rows = window.rlnotesFigures[id].data('panel' + panel);
    return rows.filter(r => setting.every((v, j) => r['k' + j] === v))
               .map(r => [String(r.series), r.x, r.y]);
}"""


def _allowed(text: str) -> bool:
    return any(p.search(text) for p in CONSOLE_ALLOWLIST)


def _key(rows):
    return sorted({(s, x if isinstance(x, str) else round(float(x), 12), float(y))
                   for s, x, y in rows})


@pytest.fixture(scope="module")
def browser():
    if not SITE.is_dir():
        pytest.fail(f"{SITE} does not exist: build the book first (make book)")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run tools/ensure_chromium.sh")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield b
        b.close()


def test_vega_is_served_once_and_small():
    assert BUNDLE.is_file(), f"{BUNDLE} missing: _ext/vega_offline.py did not run"
    assert BUNDLE.stat().st_size <= MAX_JS_BYTES
    pages_with_script = sorted(
        p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
        if "rlnotes/vega-bundle.js" in p.read_text(encoding="utf-8", errors="replace"))
    # the script goes only to the pages that hold a figure, and every such page holds one
    assert set(FIGURES) <= set(pages_with_script)
    for rel in pages_with_script:
        assert "rlnotes-knob-figure" in (SITE / rel).read_text(encoding="utf-8")
    assert "rlnotes/vega-bundle.js" not in (SITE / "book" / "notation.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("relpath", sorted(FIGURES))
def test_knob(relpath, browser):
    fig_id = FIGURES[relpath]
    problems: list[str] = []
    outside: list[str] = []
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()

    def route(r):
        if r.request.url.startswith(("file://", "data:", "blob:")):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: m.type in ("error", "warning") and not _allowed(m.text)
            and problems.append(f"console {m.type}: {m.text}"))
    page.on("pageerror", lambda e: not _allowed(str(e)) and problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: not _allowed(r.url) and r.url.startswith("file://")
            and problems.append(f"request failed: {r.url} ({r.failure})"))

    page.goto((SITE / relpath).as_uri(), wait_until="domcontentloaded", timeout=TIMEOUT_MS)
    page.wait_for_function("id => window.rlnotesFigures && window.rlnotesFigures[id]", arg=fig_id,
                           timeout=TIMEOUT_MS)
    figure = page.locator(f"#rlnotes-fig-{fig_id}")
    assert figure.locator("svg").count() >= 1, "Vega drew no SVG"
    assert figure.locator("img.rlnotes-knob-static").count() == 0, "the static image stayed"
    sliders = figure.locator("input[type=range]")
    n_knobs = sliders.count()
    assert n_knobs in (1, 2), f"expected one or two sliders, found {n_knobs}"
    n_panels = page.evaluate(
        "id => Object.keys(window.rlnotesFigures[id].getState({data: () => true}).data)"
        ".filter(k => /^panel[0-9]+$/.test(k)).length", fig_id)
    assert n_panels >= 1
    shot_dir = os.environ.get("RLNOTES_SCREENSHOTS")

    seen = []
    for j in range(n_knobs):
        top = int(sliders.nth(j).get_attribute("max"))
        for position in (0, top):
            slider = sliders.nth(j)
            slider.focus()
            slider.press("Home")                  # a reader's keys: Home, then ArrowRight
            for _ in range(position):
                slider.press("ArrowRight")
            page.wait_for_function("([id, j, v]) => window.rlnotesFigures[id].signal('k' + j) === v",
                                   arg=[fig_id, j, position], timeout=TIMEOUT_MS)
            page.evaluate("id => window.rlnotesFigures[id].runAsync().then(() => true)", fig_id)
            setting = [page.evaluate("([id, k]) => window.rlnotesFigures[id].signal(k)",
                                     [fig_id, f"k{i}"]) for i in range(n_knobs)]
            plotted_all = []
            for panel in range(n_panels):
                plotted = _key(page.evaluate(PLOTTED_JS, [fig_id, panel]))
                expected = _key(page.evaluate(EMBEDDED_JS, [fig_id, panel, setting]))
                assert expected, f"no embedded values for setting {setting}"
                assert plotted == expected, (
                    f"{relpath} panel {panel} at setting {setting}: plotted values differ from the "
                    f"embedded ones ({len(plotted)} against {len(expected)} points)")
                plotted_all.append(plotted)
            seen.append(plotted_all)
            if shot_dir:
                Path(shot_dir).mkdir(parents=True, exist_ok=True)
                figure.screenshot(path=str(Path(shot_dir) / f"{fig_id}-k{j}-{position}.png"))
        assert seen[-1] != seen[-2], f"moving slider {j} did not change the plot"

    context.close()
    if outside:
        problems.append(f"requests outside the site (the book must work offline): {outside[:5]}")
    assert not problems, f"{relpath}:\n  " + "\n  ".join(problems)
