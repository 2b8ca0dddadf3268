"""Markdown from the peers' results files (``benchmarks/results/peers_*.json``).

The book's appendix "Races against Stable-Baselines3 and TRL" calls these functions; so does
``race.py`` at the end of a race. Every function returns a Markdown string:

- ``provenance_line(data)``: versions, CPU model, load average, date and command of a file;
- ``cartpole_table(data)``: per algorithm, rlnotes against SB3: median [95% bootstrap interval]
  of the steps to the first evaluation >= 475, to three in a row, the training seconds (wall and
  CPU) to the first, and steps/s, with a reading that names a side only where the intervals are
  disjoint;
- ``bar_table(data)``: per algorithm, the bar of the races (first evaluation >= 475 in no more
  steps than the peer, in at most half its training time, every seed holding three in a row),
  met or missed by how much;
- ``cartpole_per_seed(data)``: every run;
- ``side_by_side(data)``: every seed, rlnotes' run beside the peer's;
- ``grpo_table(data)``: the GRPO step race (ms), median [interval] and each round's median;
- ``render_all(folder)``: all of them for the files found in ``folder``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from stats import separated

LIBRARY_NAMES = {"rlnotes": "rlnotes", "sb3": "SB3", "trl": "TRL"}
ALGO_NAMES = {"dqn": "DQN", "ppo": "PPO", "a2c": "A2C", "trpo": "TRPO"}
PEER_NAMES = {"dqn": "SB3 DQN", "ppo": "SB3 PPO", "a2c": "SB3 A2C", "trpo": "sb3-contrib TRPO"}
FIGURE_NAMES = {
    "first": ("steps to first eval >= 475", "steps", "fewer"),
    "three": ("steps to 3 evals in a row >= 475", "steps", "fewer"),
    "s_first": ("train s to first >= 475 (wall)", "s", "less"),
    "cpu_first": ("train CPU s to first >= 475", "s", "less"),
    "steps_per_s": ("train steps/s", "rate", "more"),
}


def load(path) -> dict:
    """A results file, checked to be one of ours."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path must be a results file, got {str(path)!r} (not found)")
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or data.get("kind") not in ("cartpole", "grpo_step"):
        raise ValueError(f"path must be a peers results file (kind cartpole or grpo_step), "
                         f"got {str(path)!r}")
    return data


def _num(x: float, unit: str, budget: int | None = None) -> str:
    if x is None:
        return "-"
    if math.isinf(x):
        return f"> {budget:,}" if budget else "never"
    if unit == "steps" or unit == "rate":
        return f"{x:,.0f}"
    if unit == "ms":
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_summary(s: dict, unit: str, budget: int | None = None) -> str:
    """``median [ci_low, ci_high]``, and how many runs reached when some did not."""
    text = (f"{_num(s['median'], unit, budget)} "
            f"[{_num(s['ci_low'], unit, budget)}, {_num(s['ci_high'], unit, budget)}]")
    if s["n_reached"] < s["n"]:
        text += f" ({s['n_reached']} of {s['n']} reached)"
    return text


def provenance_line(data: dict) -> str:
    """One paragraph: date, CPU, load, versions and the command that wrote ``data``."""
    p = data["provenance"]
    versions = []
    for lib, v in data.get("versions", {}).items():
        versions.append(f"{LIBRARY_NAMES.get(lib, lib)}: " + ", ".join(
            f"{k} {val}" for k, val in v.items()))
    load = p.get("loadavg_start")
    load_end = p.get("loadavg_end")
    load_text = ""
    if load:
        load_text = f"; load average {load[0]:.1f} at the start"
        if load_end:
            load_text += f", {load_end[0]:.1f} at the end"
    partial = ""
    if data.get("complete") is False:
        partial = (f"Partial results: the race had finished {len(data.get('runs', []))} run(s) "
                   f"when this file was written. ")
    busy = ""
    if load and p.get("cpu_count") and max(load[0], (load_end or [0])[0]) > p["cpu_count"]:
        busy = (" The load average was above the number of CPUs: wall-clock times include "
                "time spent waiting for a CPU, so compare the CPU times.")
    return (partial + f"Measured {p['date']} on {p['cpu']} ({p['cpu_count']} logical CPUs{load_text}); "
            + "; ".join(versions) + f". Command: `{p['command']}`"
            + (f" (commit {p['commit']})" if p.get("commit") else "") + "." + busy)


def reading(rl: dict, peer: dict, better: str, peer_name: str) -> str:
    """Which side the intervals support, or that they do not separate the two."""
    side = separated(rl, peer)
    if side == 0:
        return "intervals overlap: no difference shown"
    rl_lower = side < 0
    if better == "more":
        return f"rlnotes {'lower' if rl_lower else 'higher'}"
    rl_wins = rl_lower
    return f"rlnotes {better}" if rl_wins else f"{peer_name} {better}"


def _algos(algos) -> tuple:
    """The algorithms a table shows, in the race's order; ``None`` for all of them."""
    if algos is None:
        return tuple(ALGO_NAMES)
    if isinstance(algos, str) or not all(a in ALGO_NAMES for a in algos) or not algos:
        raise ValueError(f"algos must be a non-empty sequence of {list(ALGO_NAMES)} or None, got {algos!r}")
    return tuple(a for a in ALGO_NAMES if a in algos)


def cartpole_table(data: dict, figures=("first", "three", "s_first", "cpu_first",
                                        "steps_per_s"), algos=None) -> str:
    """rlnotes against SB3 per algorithm and figure: median [95% bootstrap interval]; ``algos``
    limits the table to some algorithms (a chapter shows its own)."""
    if data.get("kind") != "cartpole":
        raise ValueError("data must be a cartpole results file")
    algos = _algos(algos)
    budget = data["protocol"]["budget"]
    lines = ["| algorithm | figure | rlnotes | peer (RL-Zoo settings) | reading |",
             "| --- | --- | ---: | ---: | --- |"]
    for algo in algos:
        sides = data["summary"].get(algo)
        if not sides or "rlnotes" not in sides:
            continue
        peer = sides.get("sb3")
        for fig in figures:
            name, unit, better = FIGURE_NAMES[fig]
            rl = sides["rlnotes"][fig]
            rl_text = fmt_summary(rl, unit, budget if unit == "steps" else None)
            if peer is None:
                peer_text, read = "-", "-"
            else:
                peer_text = fmt_summary(peer[fig], unit, budget if unit == "steps" else None)
                read = reading(rl, peer[fig], better, PEER_NAMES[algo])
            label = f"{ALGO_NAMES[algo]} ({PEER_NAMES[algo]})" if fig == figures[0] else ""
            lines.append(f"| {label} | {name} | {rl_text} | {peer_text} | {read} |")
    seeds = sorted({s for sides in data["summary"].values() for side in sides.values()
                    for s in side["seeds"]})
    counts = sorted({len(side["seeds"]) for sides in data["summary"].values()
                     for side in sides.values()})
    per_side = (f"{counts[0]} seeds" if len(counts) == 1
                else f"{counts[0]} to {counts[-1]} seeds")
    note = (f"\n\nMedian [95% percentile-bootstrap interval of the median] over seeds "
            f"{_seed_text(seeds) if seeds else '-'} ({per_side} per side); a run that never reached 475 "
            f"within {budget:,} steps counts as beyond the budget. Steps are exact for a given "
            f"seed; times hold within this run only.")
    return "\n".join(lines) + note + _changes_note(data, algos)


def _changes_note(data: dict, algos=tuple(ALGO_NAMES)) -> str:
    """A sentence naming rlnotes' hyperparameters that differ from the defaults, if any, for the
    algorithms ``algos`` a table shows."""
    changes = {a: c for a, c in (data.get("hyperparameters", {}).get("rlnotes_changes") or {}).items()
               if a in algos}
    if not changes:
        return ""
    return " rlnotes ran with changes to its defaults: " + "; ".join(
        f"{ALGO_NAMES.get(a, a)} " + ", ".join(f"`{k}={v!r}`" for k, v in c.items())
        for a, c in changes.items()) + "."


BAR_WALL_RATIO = 0.5


def bar_rows(data: dict) -> dict:
    """{algo: figures of the bar}: the medians of steps to the first evaluation >= 475 (a run
    that never got there counting as beyond the budget), the ratios rlnotes / peer of the
    medians of the training seconds to the first (wall and CPU), the seeds that held three
    evaluations in a row on each side, and whether each part of the bar is met."""
    out = {}
    for algo, sides in data["summary"].items():
        if "rlnotes" not in sides or "sb3" not in sides:
            continue
        rl, peer = sides["rlnotes"], sides["sb3"]
        held = {lib: sum(r["three"] is not None for r in data["runs"]
                         if r["algo"] == algo and r["library"] == lib and "error" not in r)
                for lib in ("rlnotes", "sb3")}
        wall = rl["s_first"]["median"] / peer["s_first"]["median"]
        cpu = rl["cpu_first"]["median"] / peer["cpu_first"]["median"]
        steps_ok = rl["first"]["median"] <= peer["first"]["median"]
        out[algo] = dict(first=rl["first"]["median"], peer_first=peer["first"]["median"],
                         wall_ratio=wall, cpu_ratio=cpu, held=held["rlnotes"],
                         peer_held=held["sb3"], n=rl["first"]["n"], steps_ok=steps_ok,
                         wall_ok=wall <= BAR_WALL_RATIO, held_ok=held["rlnotes"] == rl["first"]["n"])
    return out


def chapter_figures(data: dict, algo: str) -> dict:
    """What a chapter quotes of one trainer's race: the seeds, the bar's figures
    (:func:`bar_rows`), and, for the steps and the training seconds to the first evaluation
    >= 475, -1, 0 or +1: rlnotes' interval below the peer's, overlapping it, or above it."""
    if algo not in ALGO_NAMES:
        raise ValueError(f"algo must be one of {list(ALGO_NAMES)}, got {algo!r}")
    rows = bar_rows(data)
    if algo not in rows:
        raise ValueError(f"the results file holds no race of {algo!r} against its peer")
    rl, peer = data["summary"][algo]["rlnotes"], data["summary"][algo]["sb3"]
    return dict(rows[algo], seeds=list(rl["seeds"]),
                steps_side=separated(rl["first"], peer["first"]),
                time_side=separated(rl["s_first"], peer["s_first"]))


def bar_table(data: dict, algos=None) -> str:
    """The bar per algorithm: rlnotes reaches the first evaluation >= 475 in no more steps than
    the peer (medians), in at most half the peer's training time (ratio of the medians, wall
    clock; CPU beside it), and every seed holds three evaluations in a row."""
    algos = _algos(algos)
    budget = data["protocol"]["budget"]
    lines = ["| algorithm | steps to first, rlnotes / peer | wall ratio (CPU ratio) "
             "| seeds holding 3 in a row, rlnotes / peer | bar |",
             "| --- | ---: | ---: | ---: | --- |"]
    for algo in algos:
        row = bar_rows(data).get(algo)
        if row is None:
            continue
        missed = []
        if not row["steps_ok"]:
            missed.append("steps")
        if not row["wall_ok"]:
            missed.append(f"wall ratio {row['wall_ratio']:.2f} > {BAR_WALL_RATIO}")
        if not row["held_ok"]:
            missed.append(f"{row['n'] - row['held']} seed(s) never held 3 in a row")
        verdict = "met" if not missed else "missed: " + "; ".join(missed)
        lines.append(f"| {ALGO_NAMES[algo]} | {_num(row['first'], 'steps', budget)} / "
                     f"{_num(row['peer_first'], 'steps', budget)} | {row['wall_ratio']:.2f} "
                     f"({row['cpu_ratio']:.2f}) | {row['held']} / {row['peer_held']} of {row['n']} "
                     f"| {verdict} |")
    changes = _changes_note(data, algos)
    return "\n".join(lines) + ("\n\n" + changes.strip() if changes else "")


def side_by_side(data: dict, algos=None) -> str:
    """One row per (algorithm, seed): rlnotes' figures beside the peer's."""
    algos = _algos(algos)
    runs = {(r["algo"], r["library"], r["seed"]): r for r in data["runs"] if "error" not in r}
    lines = ["| algorithm | seed | first >= 475, rlnotes / peer | 3 in a row, rlnotes / peer "
             "| train s to first, rlnotes / peer | CPU s to first, rlnotes / peer |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    f = lambda x, d: "-" if x is None else format(x, d)  # noqa: E731
    for algo in algos:
        for seed in sorted({s for a, _, s in runs if a == algo}):
            a, b = runs.get((algo, "rlnotes", seed)), runs.get((algo, "sb3", seed))
            cells = []
            for key, d in (("first", ","), ("three", ","), ("s_first", ".2f"),
                           ("cpu_first", ".2f")):
                cells.append(f"{f(a and a[key], d)} / {f(b and b[key], d)}")
            lines.append(f"| {ALGO_NAMES[algo]} | {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _seed_text(seeds) -> str:
    seeds = sorted(seeds)
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def cartpole_per_seed(data: dict) -> str:
    """Every run: steps to first and to three in a row, train s and CPU s to first, steps/s."""
    lines = ["| algorithm | library | seed | first >= 475 | 3 in a row | train s to first "
             "| CPU s to first | steps/s |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in data["runs"]:
        lib = LIBRARY_NAMES.get(r["library"], r["library"])
        if "error" in r:
            lines.append(f"| {ALGO_NAMES[r['algo']]} | {lib} | {r['seed']} | error | | | | |")
            continue
        f = lambda x, d: "-" if x is None else format(x, d)  # noqa: E731
        lines.append(f"| {ALGO_NAMES[r['algo']]} | {lib} | {r['seed']} | {f(r['first'], ',')} "
                     f"| {f(r['three'], ',')} | {f(r['s_first'], '.2f')} "
                     f"| {f(r['cpu_first'], '.2f')} | {f(r['steps_per_s'], ',.0f')} |")
    return "\n".join(lines)


def grpo_table(data: dict) -> str:
    """The GRPO step race: median step (ms) [95% bootstrap interval], CPU ms, rounds' medians."""
    if data.get("kind") != "grpo_step":
        raise ValueError("data must be a grpo_step results file")
    s = data["summary"]
    lines = ["| library | median step, wall (ms) | median step, CPU (ms) | each round's median (ms) |",
             "| --- | ---: | ---: | --- |"]
    names = {"rlnotes": "rlnotes `train_grpo`", "trl": "TRL `GRPOTrainer`"}
    for lib in ("rlnotes", "trl"):
        if lib not in s:
            continue
        rounds = ", ".join(f"{x:.1f}" for x in s[lib]["round_median_ms"])
        lines.append(f"| {names[lib]} | {fmt_summary(s[lib]['step_ms'], 'ms')} "
                     f"| {fmt_summary(s[lib]['step_cpu_ms'], 'ms')} | {rounds} |")
    w = data["workload"]
    text = "\n".join(lines)
    text += (f"\n\n{w['prompts_per_step']} prompts x G = {w['group_size']} completions of at most "
             f"{w['max_new_tokens']} tokens a step, beta {w['beta']}, lr {w['lr']}, "
             f"{w['rounds']} round(s) of {w['timed_steps']} timed steps each (after "
             f"{w['warmup_steps']} untimed), the libraries taking turns; median over every timed "
             f"step [95% bootstrap interval].")
    if "trl" in s:
        for key, what in (("step_ms", "wall-clock"), ("step_cpu_ms", "CPU")):
            side = separated(s["rlnotes"][key], s["trl"][key])
            ratio = s["trl"][key]["median"] / s["rlnotes"][key]["median"]
            if side < 0:
                text += (f" By {what} time rlnotes' step is the shorter: TRL's median is "
                         f"{ratio:.1f} times rlnotes'.")
            elif side > 0:
                text += (f" By {what} time TRL's step is the shorter: rlnotes' median is "
                         f"{1 / ratio:.1f} times TRL's.")
            else:
                text += f" By {what} time the intervals overlap: no difference shown."
    return text


def render_all(folder) -> str:
    """Markdown for every peers results file in ``folder`` (a note for those missing)."""
    folder = Path(folder)
    parts = []
    cart, grpo = folder / "peers_cartpole.json", folder / "peers_grpo_step.json"
    if cart.is_file():
        data = load(cart)
        parts += ["### CartPole-v1: rlnotes against Stable-Baselines3", cartpole_table(data),
                  bar_table(data), provenance_line(data)]
    else:
        parts.append(f"(no {cart.name} in {folder})")
    if grpo.is_file():
        data = load(grpo)
        parts += ["### One GRPO step: rlnotes against TRL", grpo_table(data),
                  provenance_line(data)]
    else:
        parts.append(f"(no {grpo.name} in {folder})")
    return "\n\n".join(parts)
