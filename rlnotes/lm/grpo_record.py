"""The GRPO chapter's records and figures: the summary and the figure of the runs beyond
imitation (``benchmarks/results/grpo_beyond.json``, written by
``benchmarks/bench_grpo_beyond.py``) and the pass@k panels, so that the chapter keeps only its
asserts.

Defined in: GRPO, sections Beyond imitation: a weak teacher and What sharpening is.
"""

from __future__ import annotations

import numpy as np

from rlnotes._validate import require_int

__all__ = ["beyond_record_summary", "plot_beyond_record", "plot_passk_panels"]


def beyond_record_summary(record, warmup=10, early=20):
    """Summarise the weak-teacher runs of the record: one entry per run (every seed of every
    starting model), with their greedy accuracies before and after GRPO.

    ==========  ============  ==========================================================
    record      dict          the parsed ``grpo_beyond.json`` (``record["builds"][b]["weak"]``
                              holds one starting model and its runs)
    warmup      int >= 0      a step on the curves: the end of the learning rate's warm-up
    early       int > warmup  a later step on the curves
    returns     dict          ``starts`` (starting models), ``runs`` (list of (start, run)),
                              ``gain`` and ``overall`` (per run: greedy accuracy gained on the
                              carry prompts and on all prompts), ``steps`` and ``curves``
                              (runs x steps, greedy accuracy on the carry prompts),
                              ``at_warmup`` and ``at_early`` (the curves at those steps),
                              ``share_early`` (per run: the share of the run's final gain on
                              the carry prompts reached by step ``early``), ``table``
                              (name -> (min before, max before, min after, max after)) for
                              the carry prompts, the others and all
    ==========  ============  ==========================================================

    Defined in: GRPO, section Beyond imitation: a weak teacher.
    """
    if not isinstance(record, dict) or not isinstance(record.get("builds"), dict) \
            or not record["builds"]:
        raise ValueError("record must be the parsed grpo_beyond.json, with a non-empty 'builds'")
    warmup = require_int(warmup, "warmup", minimum=0)
    early = require_int(early, "early", minimum=warmup + 1)
    try:
        starts = [r["weak"] for r in record["builds"].values()]
        runs = [(s["start"], run) for s in starts for run in s["runs"].values()]
    except (KeyError, AttributeError, TypeError) as err:
        raise ValueError(f"record must hold builds -> weak -> start and runs, missing {err}") from None
    if not runs:
        raise ValueError("record must hold at least one run")
    steps = list(runs[0][1]["curve_steps"])
    for step, name in ((warmup, "warmup"), (early, "early")):
        if step not in steps:
            raise ValueError(f"{name} must be a step of the recorded curves {steps}, got {step}")
    curves = np.array([run["curve_greedy_carry"] for _, run in runs], dtype=float)
    table = {}
    for name, key in (("carry", "greedy_carry"), ("no carry", "greedy_no_carry"), ("all", "greedy")):
        before = [s[key] for s, _ in runs]
        after = [run[key][-1] if key == "greedy" else run[key] for _, run in runs]
        table[name] = (min(before), max(before), min(after), max(after))
    final_gain = curves[:, -1] - curves[:, 0]
    return dict(
        starts=starts, runs=runs, steps=steps, curves=curves, table=table,
        gain=np.array([run["greedy_carry"] - s["greedy_carry"] for s, run in runs]),
        overall=np.array([run["greedy"][-1] - run["greedy"][0] for _, run in runs]),
        at_warmup=curves[:, steps.index(warmup)], at_early=curves[:, steps.index(early)],
        share_early=(curves[:, steps.index(early)] - curves[:, 0]) / np.where(final_gain == 0, np.nan,
                                                                           final_gain),
    )


def plot_beyond_record(summary, live_curve=None, steps_trained=80):
    """The figure of the record: left, the greedy accuracy on the held-out carry prompts along
    training (median and min-max band over the recorded runs, and ``live_curve``, a dict step ->
    accuracy of the chapter's own run, dashed); right, each run's accuracy before and after, on
    the carry prompts and on the others. Returns the matplotlib figure.

    Defined in: GRPO, section Beyond imitation: a weak teacher.
    """
    import matplotlib.pyplot as plt

    if not isinstance(summary, dict) or "curves" not in summary or "runs" not in summary:
        raise ValueError("summary must be the dict of beyond_record_summary")
    if live_curve is not None and not isinstance(live_curve, dict):
        raise ValueError(f"live_curve must be a dict step -> accuracy or None, got "
                         f"{type(live_curve).__name__}")
    steps_trained = require_int(steps_trained, "steps_trained", minimum=1)
    runs, curves, x = summary["runs"], summary["curves"], summary["steps"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    axes[0].plot(x, np.median(curves, 0), color="C0", label=f"record: median of {len(curves)} runs")
    axes[0].fill_between(x, curves.min(0), curves.max(0), color="C0", alpha=0.25,
                         label="record: min-max")
    if live_curve:
        axes[0].plot(list(live_curve), list(live_curve.values()), "k--", label="the run above")
    axes[0].set_xlabel("GRPO step")
    axes[0].set_ylabel("greedy accuracy")
    axes[0].set_title("held-out carry prompts")
    axes[0].legend()
    jitter = np.linspace(-0.12, 0.12, len(runs))
    for j, key in enumerate(("greedy_carry", "greedy_no_carry")):
        axes[1].plot(j - 0.2 + jitter, [s[key] for s, _ in runs], "x", color="C0",
                     label="start (imitation)" if j == 0 else None)
        axes[1].plot(j + 0.2 + jitter, [run[key] for _, run in runs], "o", color="C3",
                     label=f"after {steps_trained} GRPO steps" if j == 0 else None)
    axes[1].set_xticks([0, 1], ["carry prompts", "other prompts"])
    axes[1].set_xlabel("held-out prompts")
    axes[1].set_ylabel("greedy accuracy")
    axes[1].set_title(f"each of the {len(runs)} recorded runs")
    axes[1].legend()
    fig.tight_layout()
    return fig


PASSK_STYLES = {"start, temperature 1": "C0-", "start, temperature 0.5": "C0--",
                "start, temperature 0.3": "C0:", "after GRPO, temperature 1": "C3-"}


def plot_passk_panels(ks, panels, recorded=None):
    """pass@k curves side by side, one panel per starting model: ``panels`` is a list of
    ``(title, curves)`` with ``curves`` a dict name -> pass@k at each k of ``ks`` (names of
    :data:`PASSK_STYLES` get its styles); ``recorded``, if given, holds for each panel an
    array (runs, len(ks)) of recorded runs after GRPO, drawn as a min-max band. Log-2 k axis.
    Returns the matplotlib figure.

    Defined in: GRPO, section What sharpening is.
    """
    import matplotlib.pyplot as plt

    ks = np.asarray(ks)
    if ks.ndim != 1 or len(ks) == 0 or (ks < 1).any():
        raise ValueError(f"ks must be a non-empty 1-D sequence of k >= 1, got {ks!r}")
    if not isinstance(panels, (list, tuple)) or not panels:
        raise ValueError("panels must be a non-empty list of (title, {name: curve})")
    for title, curves in panels:
        if not isinstance(curves, dict) or any(len(y) != len(ks) for y in curves.values()):
            raise ValueError(f"panels: every curve of {title!r} must have one value per k of ks")
    if recorded is not None and (len(recorded) != len(panels) or any(
            np.ndim(r) != 2 or np.shape(r)[1] != len(ks) for r in recorded)):
        raise ValueError(f"recorded must hold one array (runs, {len(ks)}) per panel "
                         f"({len(panels)} panels), got {len(recorded)} of shapes "
                         f"{[np.shape(r) for r in recorded]}")
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.6), squeeze=False)
    for i, (ax, (title, curves)) in enumerate(zip(axes[0], panels)):
        for name, y in curves.items():
            ax.plot(ks, y, PASSK_STYLES.get(name, "-"), marker=".", label=name)
        if recorded is not None:
            ys = np.asarray(recorded[i], dtype=float)
            ax.fill_between(ks, ys.min(0), ys.max(0), color="C3", alpha=0.2,
                            label=f"after GRPO, {len(ys)} recorded runs (min-max)")
        ax.set_title(title)
        ax.set_xscale("log", base=2)
        ticks = [k for k in (1, 2, 4, 8, 16, 32, 64) if ks.min() <= k <= ks.max()]
        ax.set_xticks(ticks, [str(k) for k in ticks])
        ax.set_xlabel("k (samples per prompt)")
        ax.set_ylabel("pass@k")
        ax.legend()
    fig.tight_layout()
    return fig
