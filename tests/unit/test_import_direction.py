"""Imports run one way: the chapters' trainers use the lab (rlnotes.lm) and the shared deep-RL
machinery (rlnotes.deeprl); the lab and the machinery never use a trainer."""

import ast
import pathlib
import subprocess
import sys

import rlnotes

ROOT = pathlib.Path(rlnotes.__file__).parent
BELOW = ("lm", "deeprl")  # the lab and the shared machinery
# The chapter modules that hold a trainer (rlnotes.rlhf_ppo: the RLHF chapter's PPO).
TRAINERS = {f"rlnotes.{m}" for m in
            ("dqn", "reinforce", "a2c", "ppo", "trpo", "grpo", "dpo", "rlhf_ppo")}
# What the lab and the machinery may import from outside themselves: helpers below every
# chapter, and the RLHF chapter's Bradley-Terry loss (rlnotes.rlhf holds no trainer).
ALLOWED = {"rlnotes", "rlnotes._validate", "rlnotes._losses", "rlnotes.device",
           "rlnotes.progress", "rlnotes.returns", "rlnotes.kl", "rlnotes.seeding",
           "rlnotes.rlhf"}
# Compatibility shims (a module-level ``__getattr__``) that forward a name chapters still import
# from its old home in the lab; they are the only exception, and each must be listed here.
SHIMS = {("lm/__init__.py", "train_ppo"), ("lm/frontier.py", "dpo_sweep"),
         ("lm/frontier.py", "ppo_sweep")}


def _imports(tree, skip_shims):
    """(module, line) of every import in ``tree``, in functions too; a module-level
    ``__getattr__`` is skipped when ``skip_shims``."""
    nodes = tree.body if skip_shims else [tree]
    out = []
    for top in nodes:
        if skip_shims and isinstance(top, ast.FunctionDef) and top.name == "__getattr__":
            continue
        for node in ast.walk(top):
            if isinstance(node, ast.Import):
                out += [(a.name, node.lineno) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                out.append((node.module, node.lineno))
                out += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return out


def _lab_files():
    files = sorted(p for d in BELOW for p in (ROOT / d).rglob("*.py"))
    assert len(files) > 10, files  # the walk found the lab
    return files


def test_lab_and_machinery_import_no_trainer():
    bad = []
    for path in _lab_files():
        for module, line in _imports(ast.parse(path.read_text()), skip_shims=True):
            if not module.startswith("rlnotes"):
                continue
            inside = any(module == f"rlnotes.{d}" or module.startswith(f"rlnotes.{d}.")
                         for d in BELOW)
            parent = module.rsplit(".", 1)[0]
            if not inside and module not in ALLOWED and parent not in ALLOWED:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "the lab or rlnotes.deeprl imports a chapter module:\n" + "\n".join(bad)


def test_the_only_upward_imports_are_the_listed_shims():
    found = set()
    for path in _lab_files():
        tree = ast.parse(path.read_text())
        for top in tree.body:
            if isinstance(top, ast.FunctionDef) and top.name == "__getattr__":
                modules = {m for m, _ in _imports(top, skip_shims=False)}
                assert modules & TRAINERS, f"{path}: a __getattr__ that forwards no trainer"
                names = {c.value for c in ast.walk(top) if isinstance(c, ast.Constant)
                         and isinstance(c.value, str) and c.value.isidentifier()}
                rel = str(path.relative_to(ROOT))
                found |= {(rel, n) for n in names if (rel, n) in SHIMS}
    assert found == SHIMS


def test_importing_the_lab_loads_no_trainer():
    lab = [f"rlnotes.{p.relative_to(ROOT).with_suffix('').as_posix().replace('/', '.')}"
           for p in _lab_files()]
    lab = [m.removesuffix(".__init__") for m in lab]
    code = ("import importlib, sys\n"
            f"for m in {lab!r}:\n    importlib.import_module(m)\n"
            f"print(sorted(m for m in sys.modules if m in {sorted(TRAINERS)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", f"importing the lab loaded trainer modules: {out}"


def test_the_import_checker_catches_an_upward_import():
    tree = ast.parse("def f():\n    from rlnotes.dpo import train_dpo\n")
    assert ("rlnotes.dpo", 2) in _imports(tree, skip_shims=True)
    shim = ast.parse("def __getattr__(name):\n    import rlnotes.dpo\n")
    assert _imports(shim, skip_shims=True) == []
    assert ("rlnotes.dpo", 2) in _imports(shim, skip_shims=False)


def test_moved_names_are_importable_from_their_homes():
    from rlnotes.dpo import dpo_loss, dpo_sweep, ppo_sweep, sequence_logprob, train_dpo
    from rlnotes.grpo import pass_at_1, train_grpo
    from rlnotes.lm import train_ppo as lm_train_ppo
    from rlnotes.lm.evaluation import pass_at_1 as lab_pass_at_1
    from rlnotes.lm.frontier import dpo_sweep as old_dpo_sweep
    from rlnotes.rlhf import bradley_terry_loss
    from rlnotes.rlhf_ppo import train_ppo
    assert pass_at_1 is lab_pass_at_1 and lm_train_ppo is train_ppo
    assert old_dpo_sweep is dpo_sweep
    assert all(callable(f) for f in (dpo_loss, sequence_logprob, train_dpo, ppo_sweep,
                                     train_grpo, bradley_terry_loss))
