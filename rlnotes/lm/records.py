"""Reading the GRPO benchmarks' results files: the per-seed arrays and the median [min, max]
summaries that the chapter on Dr. GRPO, DAPO and process supervision prints and asserts on.

- :func:`median_range`: "median [min, max]" of an array, formatted;
- :func:`run_values`, :func:`run_change`: a statistic of the length-gap record's runs, per seed
  (``benchmarks/results/grpo_length_gap.json``);
- :func:`process_runs`: the process-supervision record's final pass@1, starts and samples to the
  threshold as (starts, seeds) arrays (``benchmarks/results/grpo_process.json``);
- :func:`ladder_runs`: the DAPO ladder record's per-seed values (``benchmarks/results/grpo_ladder.json``);
- :func:`step_label_runs`: the step-label record's statistics per completer
  (``benchmarks/results/grpo_step_labels.json``).

Defined in: Dr. GRPO, DAPO and process supervision, sections Loss aggregation and the length
bias, DAPO, Outcome and process supervision, and Step labels from rollouts.
"""

from __future__ import annotations

import numpy as np

__all__ = ["median_range", "run_values", "run_change", "process_runs", "ladder_runs", "step_label_runs"]


def median_range(x, fmt="{:.2f}") -> str:
    """``"median [min, max]"`` of the numbers ``x``, each formatted with ``fmt``.

    Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
    """
    x = np.asarray(x, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("x must hold at least one number, got an empty array")
    if not isinstance(fmt, str) or "{" not in fmt:
        raise ValueError(f"fmt must be a format string such as '{{:.2f}}', got {fmt!r}")
    return f"{fmt.format(np.median(x))} [{fmt.format(x.min())}, {fmt.format(x.max())}]"


def _record(record, keys):
    if not isinstance(record, dict) or not all(k in record for k in keys):
        raise ValueError(f"record must be a results dict with keys {list(keys)}, got "
                         f"{sorted(record) if isinstance(record, dict) else type(record).__name__}")


def run_values(record, set_, loss, key) -> np.ndarray:
    """A statistic of the length-gap record: one row per seed of the runs of set ``set_`` with
    loss ``loss``, in the record's order; ``key`` is ``"gap"``, ``"stall_length"``,
    ``"stall_rate"``, ``"stall_share"`` (first and last window) or ``"p_stop_ratio_range"``.

    Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
    """
    _record(record, ("sets", "runs"))
    rows = [r for r in record["runs"] if r["set"] == set_ and r["loss"] == loss]
    if not rows:
        raise ValueError(f"set_ and loss must name runs of the record, got {set_!r}, {loss!r}")
    if key not in rows[0]:
        raise ValueError(f"key must be one of {sorted(k for k in rows[0] if k not in ('set', 'loss', 'seed'))}, "
                         f"got {key!r}")
    return np.array([r[key] for r in rows], dtype=float)


def run_change(record, set_, loss, key) -> np.ndarray:
    """Last window minus first, per seed, of :func:`run_values`.

    Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
    """
    v = run_values(record, set_, loss, key)
    return v[:, 1] - v[:, 0]


def process_runs(record) -> dict:
    """The process-supervision record as arrays of shape (starts, seeds), the starts that
    failed left out: ``final`` and ``reach`` (dicts by supervision: final pass@1, samples to the
    threshold with ``inf`` where it is never reached), ``start`` (step-0 pass@1), ``diff``
    (process minus outcome), ``gain`` (dict: final minus step 0), and the lists ``starts`` (the
    record's entries of the starts kept) and ``seeds``.

    Defined in: Dr. GRPO, DAPO and process supervision, section Outcome and process supervision.
    """
    _record(record, ("starts", "seeds", "runs"))
    starts = [s for s in record["starts"] if "error" not in s]
    seeds = record["seeds"]
    runs = {(r["start"], r["seed"], r["supervision"]): r for r in record["runs"]}
    sups = ("outcome", "process")

    def grid(f, sup):
        return np.array([[f(runs[s["start"], seed, sup]) for seed in seeds] for s in starts], dtype=float)

    final = {sup: grid(lambda r: r["final_pass1"], sup) for sup in sups}
    reach = {sup: grid(lambda r: r["samples_to_threshold"] or np.inf, sup) for sup in sups}
    start = grid(lambda r: r["start_pass1"], "outcome")
    return dict(final=final, reach=reach, start=start, diff=final["process"] - final["outcome"],
                gain={sup: final[sup] - start for sup in sups}, starts=starts, seeds=seeds)


def ladder_runs(record) -> dict:
    """The DAPO ladder record's per-seed values: ``{rung: {"pass1", "entropy", "zero_var": (seeds,)
    arrays}}`` in the record's order (one seed's runs share its generator on every rung).

    Defined in: Dr. GRPO, DAPO and process supervision, section DAPO.
    """
    _record(record, ("rungs", "start_pass1"))
    if not all("per_seed" in r for r in record["rungs"]):
        raise ValueError("record must hold per-seed values (rungs[...]['per_seed']); rerun "
                         "benchmarks/bench_grpo_ladder.py with --json")
    return {r["rung"]: {k: np.array(r["per_seed"][k], dtype=float) for k in ("pass1", "entropy", "zero_var")}
            for r in record["rungs"]}


def step_label_runs(record) -> dict:
    """The step-label record's label statistics (:func:`rlnotes.lm.process.step_label_summary`,
    plus ``step1_right``, ``step2_right``, ``outcome``) as ``{statistic: (seeds,) array}``, one
    value per completer, in the record's order.

    Defined in: Dr. GRPO, DAPO and process supervision, section Step labels from rollouts.
    """
    _record(record, ("seeds", "runs"))
    if not record["runs"] or not all("labels" in r for r in record["runs"]):
        raise ValueError("record must hold runs with their 'labels' (benchmarks/bench_grpo_step_labels.py)")
    keys = record["runs"][0]["labels"].keys()
    return {k: np.array([r["labels"][k] for r in record["runs"]], dtype=float) for k in keys}
