"""Remove outputs, execution counts and volatile metadata from notebooks (stored without outputs).

Usage: python tools/strip_notebooks.py book [more paths...]
"""

import json
import sys
from pathlib import Path


def strip(path: Path) -> bool:
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = False
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            if cell.get("outputs") or cell.get("execution_count") is not None:
                changed = True
            cell["outputs"] = []
            cell["execution_count"] = None
        for key in ("execution", "collapsed", "scrolled"):
            if key in cell.get("metadata", {}):
                del cell["metadata"][key]
                changed = True
    if "widgets" in nb.get("metadata", {}):
        del nb["metadata"]["widgets"]
        changed = True
    if changed:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


def main(argv):
    roots = [Path(a) for a in (argv or ["book"])]
    for root in roots:
        paths = [root] if root.suffix == ".ipynb" else sorted(root.rglob("*.ipynb"))
        for p in paths:
            if ".ipynb_checkpoints" in p.parts or "_build" in p.parts:
                continue
            if strip(p):
                print(f"stripped {p}")


if __name__ == "__main__":
    main(sys.argv[1:])
