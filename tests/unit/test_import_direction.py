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


def _imports(tree):
    """(module, line) of every import in ``tree``, in functions too."""
    out = []
    for node in ast.walk(tree):
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
        for module, line in _imports(ast.parse(path.read_text())):
            if not module.startswith("rlnotes"):
                continue
            inside = any(module == f"rlnotes.{d}" or module.startswith(f"rlnotes.{d}.")
                         for d in BELOW)
            parent = module.rsplit(".", 1)[0]
            if not inside and module not in ALLOWED and parent not in ALLOWED:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "the lab or rlnotes.deeprl imports a chapter module:\n" + "\n".join(bad)


def test_the_lab_forwards_no_trainer():
    # A module-level __getattr__ could hand out a trainer without an import at the top.
    for path in _lab_files():
        tree = ast.parse(path.read_text())
        assert not any(isinstance(top, ast.FunctionDef) and top.name == "__getattr__"
                       for top in tree.body), f"{path}: a module-level __getattr__"


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
    assert ("rlnotes.dpo", 2) in _imports(tree)
    shim = ast.parse("def __getattr__(name):\n    import rlnotes.dpo\n")
    assert ("rlnotes.dpo", 2) in _imports(shim)


def test_moved_names_are_importable_from_their_homes():
    from rlnotes.dpo import dpo_loss, dpo_sweep, ppo_sweep, sequence_logprob, train_dpo
    from rlnotes.grpo import pass_at_1, train_grpo
    from rlnotes.lm.evaluation import pass_at_1 as lab_pass_at_1
    from rlnotes.rlhf import bradley_terry_loss
    from rlnotes.rlhf_ppo import train_ppo
    assert pass_at_1 is lab_pass_at_1 and callable(train_ppo)
    assert all(callable(f) for f in (dpo_loss, sequence_logprob, train_dpo, ppo_sweep,
                                     train_grpo, bradley_terry_loss))
