"""Link the book's PDF from the HTML, when the PDF has been built.

``make pdf`` writes ``_build/latex/rlnotes.pdf``. When the HTML builder starts, this extension
copies that file to ``_build/html/rlnotes.pdf`` if it exists, and the role

    {pdf-link}`Download the book as a PDF`

renders as a link to it. Without a PDF the role renders the text with a note saying how to build
it, so the HTML never holds a broken link. Pages that use the role are re-written by every HTML
build, so the front page follows whether the PDF is there. In the PDF itself the role is plain
text.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from docutils import nodes

PDF_NAME = "rlnotes.pdf"


class pdf_link(nodes.Inline, nodes.TextElement):
    """The text of a link to the PDF (resolved when the page is written)."""


def _pdf_source(app) -> Path:
    # _build/latex/<name>.pdf, next to the HTML output folder _build/html.
    return Path(app.outdir).parent / "latex" / PDF_NAME


def _role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    env.rlnotes_pdf_link_docs = getattr(env, "rlnotes_pdf_link_docs", set()) | {env.docname}
    return [pdf_link(rawtext, text)], []


def _copy_pdf(app) -> None:
    if app.builder.format != "html":
        return
    source, target = _pdf_source(app), Path(app.outdir) / PDF_NAME
    if source.is_file():
        os.makedirs(app.outdir, exist_ok=True)
        shutil.copy2(source, target)
    elif target.exists():
        target.unlink()  # a stale copy from an earlier build


def _always_rewrite(app, env, added, changed, removed):
    # The page's HTML depends on whether the PDF exists, which Sphinx cannot see: re-read it.
    docs = getattr(env, "rlnotes_pdf_link_docs", set())
    return sorted(d for d in docs if d in env.found_docs)


def _merge(app, env, docnames, other):
    env.rlnotes_pdf_link_docs = (getattr(env, "rlnotes_pdf_link_docs", set())
                                 | getattr(other, "rlnotes_pdf_link_docs", set()))


def _purge(app, env, docname):
    docs = getattr(env, "rlnotes_pdf_link_docs", set())
    docs.discard(docname)


def _visit_html(self, node):
    target = Path(self.builder.outdir) / PDF_NAME
    if target.is_file():
        depth = self.builder.current_docname.count("/")
        href = "../" * depth + PDF_NAME
        self.body.append(f'<a class="reference external rlnotes-pdf" href="{href}" download>')
        self.body.append(self.encode(node.astext()))
        self.body.append("</a>")
    else:
        self.body.append(self.encode(node.astext()))
        self.body.append(" (not built with this copy of the HTML: run <code>make pdf</code>)")
    raise nodes.SkipNode


def _visit_latex(self, node):
    self.body.append(self.encode(node.astext()))
    raise nodes.SkipNode


def _visit_other(self, node):
    # text, man, texinfo, ...: just the words
    self.add_text(node.astext()) if hasattr(self, "add_text") else None
    raise nodes.SkipNode


def setup(app):
    app.add_node(pdf_link, html=(_visit_html, None), latex=(_visit_latex, None),
                 text=(_visit_other, None))
    app.add_role("pdf-link", _role)
    app.connect("builder-inited", _copy_pdf)
    app.connect("env-get-outdated", _always_rewrite)
    app.connect("env-merge-info", _merge)
    app.connect("env-purge-doc", _purge)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True,
            "env_version": 1}
