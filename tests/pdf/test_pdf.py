"""The book as a PDF, read back with poppler's tools (``pdfinfo``, ``pdftotext``, ``pdffonts``,
``pdfimages``, from Debian's ``poppler-utils``).

Checks ``_build/latex/rlnotes.pdf`` (``make pdf``) against the sources and the built HTML:

- the page count is within a band (a lost half of the book or a runaway output both fail);
- every chapter of ``_toc.yml`` opens, in order, on its own page, under its title;
- no unresolved reference ("??") or citation ("[?]") is left;
- every cited key is in the bibliography, under its title;
- every labelled equation is numbered, and its number appears where the prose refers to it;
- every exercise is followed by its solution, written out;
- every figure of the HTML is embedded (same count);
- every font is embedded;
- no line, code included, runs past the right margin;
- a known equation reads as it should.

Run after the builds: ``make book && make pdf && pytest tests/pdf`` (``make test`` does all three).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import unicodedata
from collections import Counter
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# RLNOTES_PDF: check another build of the PDF (its .aux must lie beside it).
PDF = Path(os.environ.get("RLNOTES_PDF", ROOT / "_build" / "latex" / "rlnotes.pdf")).resolve()
HTML = ROOT / "_build" / "html"
BIB = ROOT / "book" / "references.bib"

# The book had 300 pages when the PDF was added; a chapter is 15-40 pages.
PAGES_MIN, PAGES_MAX = 200, 600
# A line may end this far right of the text block (points): the slack of justified lines.
MARGIN_SLACK_PT = 2.0


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module", autouse=True)
def _needs_pdf():
    missing = [tool for tool in ("pdfinfo", "pdftotext", "pdffonts", "pdfimages")
               if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"poppler-utils missing ({missing}): run tools/ensure_texlive.sh")
    if not PDF.is_file():
        pytest.fail(f"{PDF} not found: run `make pdf` first")


def _norm(text: str) -> str:
    """Letters and digits only, lowercased, math alphanumerics folded to ASCII (unicode-math sets
    math in Unicode's mathematical italic), so hyphenation, spacing and fonts do not matter."""
    text = unicodedata.normalize("NFKC", text).lower()
    return "".join(ch for ch in text if ch.isalnum())


@lru_cache(maxsize=None)
def page_texts() -> tuple[str, ...]:
    """The text of each page (pdftotext separates pages with a form feed)."""
    return tuple(_run("pdftotext", "-enc", "UTF-8", str(PDF), "-").split("\f"))


@lru_cache(maxsize=None)
def full_text() -> str:
    return "\n".join(page_texts())


@lru_cache(maxsize=None)
def raw_text() -> str:
    """The text in the order the PDF draws it (``pdftotext -raw``). pdftotext's default reading
    order can put a justified line's end after the next line (seen in a bibliography entry whose
    first line has a wide gap); the drawing order keeps each line whole."""
    return _run("pdftotext", "-raw", "-enc", "UTF-8", str(PDF), "-")


@lru_cache(maxsize=None)
def body_text() -> str:
    """The text without running heads and feet (the book's title at the top of a page; the section
    and the page number at its foot), so a sentence that a page break splits reads through."""
    title = _title(_toc_files()[0])
    pages = []
    for page in page_texts():
        lines = [line for line in page.splitlines() if line.strip()]
        if lines and lines[0].strip() == title:
            lines = lines[1:]
        while lines and re.fullmatch(r"\s*([ivxlc]+|\d+|\d+(\.\d+)*\.\s.*|Chapter\s\d+\.\s.*|CONTENTS|"
                                     r"Bibliography)\s*",
                                     lines[-1], flags=re.I):
            lines = lines[:-1]
        pages.append("\n".join(lines))
    return "\n".join(pages)


# --- the sources ------------------------------------------------------------------------------

def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [ch["file"] for ch in part.get("chapters", [])]
    return files


def _toc_pages() -> list[str]:
    """Every page of the book: the chapters and the sections nested under them."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())

    def walk(entries):
        for entry in entries:
            yield entry["file"]
            yield from walk(entry.get("sections", []))

    return [toc["root"]] + [f for part in toc.get("parts", []) for f in walk(part.get("chapters", []))]


def _markdown_of(stem: str) -> str:
    """The MyST Markdown of a page: a .md file, or the markdown cells of a notebook."""
    path = ROOT / f"{stem}.md"
    if path.is_file():
        return path.read_text()
    nb = json.loads((ROOT / f"{stem}.ipynb").read_text())
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def _title(stem: str) -> str:
    for line in _markdown_of(stem).splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    raise AssertionError(f"{stem} has no '# ' title")


def _cited_keys() -> set[str]:
    keys = set()
    for stem in _toc_files():
        for group in re.findall(r"\{cite(?::[a-z]+)?\}`([^`]+)`", _markdown_of(stem)):
            keys.update(k.strip() for k in group.split(","))
    return keys


def _bib_titles() -> dict[str, str]:
    """key -> title, from a plain reading of references.bib (one field per line or braces)."""
    titles, key = {}, None
    for line in BIB.read_text().splitlines():
        m = re.match(r"\s*@\w+\s*\{\s*([^,\s]+)\s*,", line)
        if m:
            key = m.group(1)
        m = re.match(r"\s*title\s*=\s*[{\"](.*)", line, re.I)
        if m and key and key not in titles:
            # the title up to its first formula, which LaTeX typesets as math
            titles[key] = re.sub(r"[{}\\]", "", m.group(1).split("$")[0])
    return titles


# --- the checks -------------------------------------------------------------------------------

def test_page_count_in_band():
    pages = int(re.search(r"^Pages:\s+(\d+)", _run("pdfinfo", str(PDF)), re.M).group(1))
    assert pages == len(page_texts()) - 1 or pages == len(page_texts())
    assert PAGES_MIN <= pages <= PAGES_MAX, f"{pages} pages, expected {PAGES_MIN}-{PAGES_MAX}"


def _chapter_pages() -> dict[int, int]:
    """Chapter number -> the page (from 0) that opens it: hyperref's destinations ``chapter.N``."""
    pages = {}
    for line in _run("pdfinfo", "-dests", str(PDF)).splitlines():
        m = re.match(r"\s*(\d+)\s+\[.*\]\s+\"chapter\.(\d+)\"", line)
        if m:
            pages[int(m.group(2))] = int(m.group(1)) - 1
    return pages


def test_every_chapter_in_toc_order():
    # The root page is the unnumbered front page; every other page of _toc.yml is a chapter.
    titles = [_title(stem) for stem in _toc_files()[1:]]
    pages = _chapter_pages()
    assert sorted(pages) == list(range(1, len(titles) + 1)), (
        f"{len(titles)} chapters in _toc.yml, chapters {sorted(pages)} in the PDF")
    texts = page_texts()
    for number, title in enumerate(titles, start=1):
        page = pages[number]
        assert _norm(title) in _norm(texts[page]), (
            f"chapter {number} (page {page + 1}) does not open with {title!r}")
    assert [pages[n] for n in sorted(pages)] == sorted(pages.values())
    assert _norm(_title(_toc_files()[0])) in _norm(texts[0]), "the front page lacks the book's title"


def test_no_unresolved_reference():
    text = full_text()
    bad = [(i + 1, m.group(0)) for i, t in enumerate(page_texts())
           for m in re.finditer(r"\?\?|\[\?\]", t)]
    assert not bad, f"unresolved references (page, text): {bad[:10]}"


def test_every_citation_resolves():
    keys, titles = _cited_keys(), _bib_titles()
    assert len(keys) >= 20, f"only {len(keys)} cited keys found in the sources"
    texts = (_norm(full_text()), _norm(raw_text()))   # either reading order
    raw = full_text()
    missing = sorted(k for k in keys if k not in titles)
    assert not missing, f"cited but not in references.bib: {missing}"
    absent = sorted(k for k in keys if not any(_norm(titles[k])[:40] in text for text in texts))
    assert not absent, f"cited keys whose entry is not in the PDF's bibliography: {absent}"
    # An unresolved citation prints its key: no key may be left in the text.
    leftover = sorted(k for k in keys if re.search(rf"\b{re.escape(k)}\b", raw))
    assert not leftover, f"citation keys printed as text (unresolved): {leftover}"


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs: list[str] = []

    def handle_starttag(self, tag, attrs):
        src = dict(attrs).get("src") or ""
        knob = "rlnotes-knob-static" in (dict(attrs).get("class") or "")  # a knob figure's PNG
        if tag == "img" and ("_images/" in src or knob):
            self.srcs.append(src)


def _html_figures() -> int:
    count = 0
    for stem in _toc_pages():
        page = HTML / f"{stem}.html"
        assert page.is_file(), f"{page.relative_to(ROOT)} not found: run `make book` first"
        parser = _Images()
        parser.feed(page.read_text())
        count += len(parser.srcs)
    return count


def _pdf_images() -> int:
    """Images drawn in the PDF (soft masks, the alpha channels of PNGs, are not images)."""
    rows = _run("pdfimages", "-list", str(PDF)).splitlines()[2:]
    return sum(1 for row in rows if row.split()[2] == "image")


def test_every_html_figure_is_in_the_pdf():
    html, pdf = _html_figures(), _pdf_images()
    assert html >= 50, f"only {html} figures in the HTML"
    assert pdf == html, f"{pdf} images in the PDF, {html} figures in the HTML"


def test_all_fonts_embedded():
    rows = _run("pdffonts", str(PDF)).splitlines()[2:]
    assert rows, "pdffonts lists no font"
    # columns: name type encoding emb sub uni object ID; read from the right (names have no spaces,
    # types may: "Type 1C", "CID Type 0C").
    not_embedded = [row for row in rows if row.split()[-5] != "yes"]
    assert not not_embedded, "fonts not embedded:\n" + "\n".join(not_embedded)


@lru_cache(maxsize=None)
def _lines() -> list[tuple[int, float, str]]:
    """(page, right end, text) of every line of text, from pdftotext -bbox-layout."""
    out = _run("pdftotext", "-bbox-layout", str(PDF), "-")
    lines, page = [], 0
    for m in re.finditer(r'<page |<line xMin="[\d.]+" yMin="[\d.]+" xMax="([\d.]+)"[^>]*>(.*?)</line>',
                         out, re.S):
        if m.group(0) == "<page ":
            page += 1
            continue
        words = re.findall(r">([^<]*)</word>", m.group(2))
        lines.append((page, float(m.group(1)), " ".join(words)))
    return lines


def _is_math(text: str) -> bool:
    # unicode-math sets math letters in Unicode's Mathematical Alphanumeric Symbols block; a line
    # of punctuation alone is the end of a formula (its closing bracket or full stop)
    return (any(0x1D400 <= ord(ch) <= 0x1D7FF for ch in text)
            or not any(ch.isalnum() for ch in text))


def test_no_line_past_the_right_margin():
    lines = _lines()
    # The right edge of the text block, per page parity (a two-sided layout shifts it): the most
    # common right end of a line (every full line of a justified paragraph ends there).
    ends = Counter((page % 2, round(x1)) for page, x1, _ in lines)
    edge = {parity: max((n, x) for (par, x), n in ends.items() if par == parity)[1]
            for parity in (0, 1)}
    # Text and code lines only: a display formula wider than the text is the chapter's to fix
    # (LaTeX's log reports it as an overfull box), and is not what this test is about.
    past = [(page, round(x1, 1), text[-40:]) for page, x1, text in lines
            if x1 > edge[page % 2] + MARGIN_SLACK_PT and not _is_math(text)]
    assert not past, (f"lines past the right margin (page, right end, end of line); text block "
                      f"ends at {edge}: {past[:15]}")


def _plain_phrase(markdown: str) -> str | None:
    """A run of 24 letters of plain prose in ``markdown`` (no math, code, roles or
    markup), normalised: a phrase that must read the same in the PDF."""
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`|\{[^}]*\}|\([^)]*\)|\[[^\]]*\]", "|", markdown,
                  flags=re.S)
    text = re.sub(r"^\s*:[a-z_-]+:.*$|^\s*#+.*$", "|", text, flags=re.M)
    runs = [_norm(run) for run in re.split(r"[|*_>#\"'’“”:;!?]|\.\s|\n\s*\n", text)
            if run.split() and all(re.fullmatch(r"[A-Za-z][A-Za-z,\-]*", w) for w in run.split())]
    # The longest run's first 24 letters: long enough to be this solution's, short enough not to
    # straddle a line that a tall formula splits in pdftotext's reading order.
    longest = max(runs, key=len, default="")
    return longest[:24] if len(longest) >= 24 else None


def _solutions() -> list[tuple[str, str, str]]:
    """(page, label, phrase) for each {solution} of the chapters."""
    found = []
    for stem in _toc_files():
        for m in re.finditer(r"(`{3,})\{solution\}\s*(\S+)\n(.*?)\n\1", _markdown_of(stem), re.S):
            body = re.sub(r"^:[a-z_-]+:.*\n", "", m.group(3), flags=re.M)
            found.append((stem, m.group(2), _plain_phrase(body)))
    return found


def test_every_exercise_has_its_solution_written_out():
    solutions = _solutions()
    assert len(solutions) >= 40, f"only {len(solutions)} solutions in the sources"
    text = _norm(body_text())
    assert text.count("solutiontoexercise") == len(solutions), (
        f"{text.count('solutiontoexercise')} 'Solution to Exercise' headings in the PDF, "
        f"{len(solutions)} solutions in the sources")
    phrases = [(stem, label, phrase) for stem, label, phrase in solutions if phrase]
    assert len(phrases) >= 0.8 * len(solutions)
    missing = [(stem, label) for stem, label, phrase in phrases if phrase not in text]
    assert not missing, f"solutions whose text is not in the PDF: {missing}"


def _equation_numbers() -> dict[str, str]:
    """Equation label -> its number in the PDF, from the LaTeX build's .aux file."""
    aux = (PDF.parent / "rlnotes.aux").read_text(errors="replace")
    return {m.group(1): m.group(2)
            for m in re.finditer(r"\\newlabel\{equation:[^}]*?:([^:}]+)\}\{\{([\d.]+)\}", aux)}


def test_equations_numbered_and_referenced():
    labels, refs = set(), Counter()
    for stem in _toc_files():
        md = _markdown_of(stem)
        labels.update(re.findall(r"\$\$\s*\(([\w:-]+)\)", md))
        refs.update(re.findall(r"\{eq\}`([^`<]+)`", md))
    numbers = _equation_numbers()
    assert len(labels) >= 10, f"only {len(labels)} labelled equations in the sources"
    unnumbered = sorted(labels - set(numbers))
    assert not unnumbered, f"labelled equations without a number in the PDF: {unnumbered}"
    # numbered by chapter ("2.3"), so that no two equations share a number
    repeated = [n for n, k in Counter(numbers.values()).items() if k > 1]
    assert not repeated, f"equation numbers used twice: {repeated}"
    text = full_text()
    for label, n in refs.items():
        shown = text.count(f"({numbers[label]})")
        # the number beside the equation, and once per reference in the prose
        assert shown >= 1 + n, f"equation {label} ({numbers[label]}): {shown} times in the PDF, " \
                               f"expected its number and {n} references"


def test_known_equation_text():
    # The Bellman expectation equation, eq-bellman-expectation of "Markov decision processes and
    # dynamic programming", as pdftotext reads it (math letters folded to ASCII, spaces dropped;
    # the summation indices sit on the line below), on the page that shows its number.
    want = "Vπ(s)=∑π(a∣s)[R(s,a)+γ∑P(s′∣s,a)Vπ(s′)]"
    number = _equation_numbers()["eq-bellman-expectation"]
    pages = [page for page in page_texts()
             if want in re.sub(r"\s", "", unicodedata.normalize("NFKC", page))]
    assert pages, f"the Bellman expectation equation {want!r} is not in the PDF"
    assert f"({number})" in pages[0], f"its number ({number}) is not beside it"
