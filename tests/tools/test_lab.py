"""The exercises render where students run them (issue 16, item 11): JupyterLab with
jupyterlab-myst (``make lab-env``, the pins of pyproject.toml's ``lab`` extra, cached under
~/.cache/rlnotes; ``RLNOTES_LAB_VENV``) opens a chapter, and headless Chromium (Debian's, driven
by Playwright, as tests/browser) sees a rendered exercise box and rendered math, not MyST source.
``make test-tools`` runs this file."""

import os
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = Path(os.environ.get("RLNOTES_LAB_VENV", Path.home() / ".cache" / "rlnotes" / "lab-4.6.6-myst-2.7.0"))
KERNELS = os.environ.get("RLNOTES_LAB_KERNELS", str(ROOT / ".venv" / "lab" / "share" / "jupyter"))
CHROMIUM = os.environ.get("RLNOTES_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def test_the_pins_are_the_same_in_pyproject_and_makefile():
    extra = re.search(r'^lab = \[(.*)\]$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    make = (ROOT / "Makefile").read_text()
    lab = re.search(r'"jupyterlab==([\d.]+)"', extra).group(1)
    myst = re.search(r'"jupyterlab-myst==([\d.]+)"', extra).group(1)
    assert re.search(rf"^LAB_VERSION := {re.escape(lab)}$", make, re.M)
    assert re.search(rf"^MYST_VERSION := {re.escape(myst)}$", make, re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not (LAB / "bin" / "jupyter-lab").exists():
        pytest.skip("JupyterLab is not installed: run `make lab-env` (make test-tools does)")
    port = _free_port()
    home = tmp_path_factory.mktemp("labhome")
    settings = home / "settings"
    # Render every cell at once (no windowing), and no news pop-up over the page.
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        '{"windowingMode": "none"}')
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false"}')
    env = dict(os.environ, JUPYTER_PATH=KERNELS, HOME=str(home), JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    proc = subprocess.Popen(
        [str(LAB / "bin" / "jupyter-lab"), "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         "--ServerApp.token=", "--ServerApp.password=", "--allow-root",
         f"--ServerApp.root_dir={ROOT / 'book'}", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(home / "lab.log", "wb"))
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("JupyterLab exited: " + (home / "lab.log").read_text()[-2000:])
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start: " + (home / "lab.log").read_text()[-2000:])
    yield url, home
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_a_chapter_shows_rendered_exercises_and_math_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    url, home = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/lab/tree/mdp_dynamic_programming.ipynb", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-MarkdownCell", timeout=120_000)
            target = page.locator(".jp-MarkdownCell", has_text="In-place policy evaluation").last
            target.wait_for(timeout=120_000)
            target.scroll_into_view_if_needed(timeout=60_000)
            # The exercise directive became a titled box (jupyterlab-myst: <aside class=
            # "myst-exercise">), not raw MyST source, and its math is typeset by KaTeX.
            box = target.locator("aside.myst-exercise")
            box.wait_for(state="visible", timeout=60_000)
            text = box.inner_text()
            assert "Exercise" in text and "In-place policy evaluation" in text, text[:500]
            assert "{exercise}" not in target.inner_text() and ":label:" not in target.inner_text()
            assert box.locator(".katex").count() > 0, box.inner_html()[:1000]
            assert "\\dots" not in text and "$0" not in text  # the inline math is typeset
            # Display math of the chapter's prose is typeset too.
            assert page.locator(".jp-MarkdownCell .katex-display").count() > 0
            # The notebook's kernel is the book's environment.
            page.wait_for_function("document.body.innerText.includes('Python 3 (rlnotes)')",
                                   timeout=60_000)
        finally:
            page.screenshot(path=str(home / "lab.png"))
            browser.close()
