"""Chapter notebooks are stored without outputs (outputs belong to the build, not to git)."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(
    p for p in (ROOT / "book").rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts
)


def test_there_are_chapter_notebooks():
    assert NOTEBOOKS, "no notebooks found under book/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_stored_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [
        i for i, cell in enumerate(nb["cells"])
        if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs or execution counts; run `make strip`"
    assert "widgets" not in nb.get("metadata", {}), f"{path.name}: widget state stored; run `make strip`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_in_the_table_of_contents(path):
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    entry = path.relative_to(ROOT).with_suffix("").as_posix()
    assert f"file: {entry}" in toc, f"{entry} is not listed in _toc.yml"
