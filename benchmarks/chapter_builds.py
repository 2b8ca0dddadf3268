"""Run chapters under every floating-point build of ``tools/builds.py`` and record, per chapter and
build, whether every cell ran, the CPU seconds of the run and the numbers the chapter glues.

    .venv/bin/python benchmarks/chapter_builds.py --run OUT --cache-root CACHE   # every chapter, cold caches
    .venv/bin/python benchmarks/chapter_builds.py --run OUT --builds default,avx2 --chapters dqn
    .venv/bin/python benchmarks/chapter_builds.py --collect OUT             # -> results/chapter_builds.json

``--run`` executes ``book/<chapter>.ipynb`` with ``jupyter execute --allow-errors`` under each build
into ``OUT/<chapter>.<build>.ipynb`` (one at a time; each takes a minute or two of CPU) and adds
the CPU seconds (user + system of the child processes) to ``OUT/times.json``. ``--collect`` reads
them back and writes ``benchmarks/results/chapter_builds.json``, which the appendix *Reproducibility
and benchmarks* renders. The glued numbers are read from the executed notebooks' glue outputs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tools.builds import BUILDS, PROBE, build_env, parse_builds  # noqa: E402

TITLES = {"mdp_dynamic_programming": "MDPs and dynamic programming", "td_learning": "TD learning",
          "dqn": "Deep Q-networks", "policy_gradients": "Policy gradients",
          "actor_critic": "Actor-critic and GAE", "trpo_ppo": "TRPO and PPO",
          "rlhf": "RLHF with PPO", "dpo": "Direct preference optimisation", "grpo": "GRPO",
          "grpo_variants": "Dr. GRPO, DAPO and process rewards"}
CHAPTERS = list(TITLES)  # the book's chapters, in its order (the appendices train nothing)
RECORD_PREFIX = "application/papermill.record/"
# glued numbers read from a recorded benchmark file, the same under every build: not tabulated
FROM_RECORDS = ("race_", "over_", "a2c_race_", "pend_last5", "pend_best", "pend_s2",
                "held_", "ac_held_", "ac_candidate_", "ac_earlier_", "ac_sweep_", "ppo_held_",
                "trpo_held_", "trpo_sweep_", "ppo_rec300_", "trpo_rec300_",
                "ppo_never_", "ac_rec300_", "ac_rec400_", "ppo_rec400_", "trpo_rec400_",
                "rec400_", "ac_never_", "ac_sweep2_", "ppo_r3_", "rec600_", "ppo_rec600_",
                "trpo_rec600_", "ac_rec600_", "ac_sweep3_", "rec800_", "ppo_rec800_",
                "trpo_rec800_", "ac_rec800_", "ac_sweep4_", "ac_race_")


def _short(text: str) -> str:
    """A glued value as a table shows it: numbers to four significant digits."""
    try:
        return f"{float(text):.4g}"
    except ValueError:
        return text


def tag_of(build: str) -> str:
    """The name an executed notebook of ``build`` may carry instead of the build's own name."""
    env = BUILDS[build]
    return "-".join([env.get("ATEN_CPU_CAPABILITY", "default"), env.get("MKL_CBWR", "none"),
                     env.get("ONEDNN_MAX_CPU_ISA", "none")])


def run(out: Path, builds: list[str], chapters: list[str], cache_root: Path | None = None) -> None:
    """Execute ``chapters`` under ``builds`` into ``out``. With ``cache_root``, every build (the
    default one too) trains its models into ``cache_root/<build>``: an empty root gives cold caches."""
    out.mkdir(parents=True, exist_ok=True)
    times_path = out / "times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    for build in builds:
        env = build_env(build, cache_root=cache_root)
        if cache_root is not None:
            env["RLNOTES_CACHE"] = str(cache_root / build)
        for chapter in chapters:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([str(ROOT / ".venv" / "bin" / "jupyter"), "execute", "--allow-errors",
                            f"--output={out / f'{chapter}.{build}.ipynb'}",
                            str(ROOT / "book" / f"{chapter}.ipynb")], env=env, check=False)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            times[f"{chapter}.{build}"] = round(cpu, 1)
            times_path.write_text(json.dumps(times, indent=1) + "\n")
            print(f"{chapter} under {build}: {cpu:.0f} CPU s", flush=True)


def read_times(out: Path) -> dict:
    """CPU seconds per ``chapter.build``, from ``times.json`` or from ``/usr/bin/time`` lines."""
    times = {}
    if (out / "times.json").exists():
        times.update(json.loads((out / "times.json").read_text()))
    if (out / "times.txt").exists():
        by_tag = {tag_of(b): b for b in BUILDS}
        for line in (out / "times.txt").read_text().splitlines():
            parts = line.split()   # CPU <chapter> <tag> user=U sys=S wall=W
            if len(parts) >= 5 and parts[0] == "CPU" and parts[2] in by_tag:
                fields = dict(p.split("=") for p in parts[3:])
                times[f"{parts[1]}.{by_tag[parts[2]]}"] = round(float(fields["user"]) + float(fields["sys"]), 1)
    return times


def read_notebook(path: Path) -> tuple[list, dict]:
    """The errors (cell index, exception name) and the glued values of an executed notebook."""
    nb = json.loads(path.read_text())
    errors, glued = [], {}
    for i, cell in enumerate(nb["cells"]):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                errors.append((i, output["ename"]))
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            text = output.get("data", {}).get(RECORD_PREFIX + "text/plain")
            if name and text is not None:
                glued[name] = text.strip("'\"")
    return errors, glued


def collect(out: Path, note: str = "", dest: Path | None = None) -> Path:
    times = read_times(out)
    by_tag = {tag_of(b): b for b in BUILDS}
    found = {}
    for path in sorted(out.glob("*.ipynb")):
        chapter, name = path.name.split(".")[:2]
        build = name if name in BUILDS else by_tag.get(name)
        if chapter in TITLES and build:
            found[chapter, build] = path
    if not found:
        raise ValueError(f"out must hold executed notebooks <chapter>.<build>.ipynb, found none in {out}")
    builds = [b for b in BUILDS if any(b == fb for _, fb in found)]
    rows, values = [], {}
    for chapter in [c for c in CHAPTERS if any(c == fc for fc, _ in found)]:
        row = [TITLES[chapter]]
        for build in builds:
            if (chapter, build) not in found:
                row.append("not run")
                continue
            errors, glued = read_notebook(found[chapter, build])
            status = "every cell ran" if not errors else "fails: " + ", ".join(
                f"cell {i} {name}" for i, name in errors)
            cpu = times.get(f"{chapter}.{build}")
            row.append(status + (f", {cpu:.0f} CPU s" if cpu is not None else ""))
            for key, value in glued.items():
                if not key.startswith(FROM_RECORDS):
                    values.setdefault(TITLES[chapter], {}).setdefault(key, {b: "" for b in builds})[build] = _short(value)
        rows.append(row)
    capability = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True).stdout.strip()
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else platform.processor()
    import torch  # noqa: E402  (only for its version)
    stamp = max(p.stat().st_mtime for p in found.values())
    record = {
        "benchmark": "benchmarks/chapter_builds.py: the chapters under the floating-point builds of tools/builds.py",
        "date": datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {cpu_model}, {os.cpu_count()} cores, torch CPU kernels {capability}",
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "commands": [f".venv/bin/python benchmarks/chapter_builds.py --run OUT --cache-root CACHE",
                     f".venv/bin/python benchmarks/chapter_builds.py --collect OUT"],
        "summary": "per chapter and build: whether every cell ran (else the failing cells), and the CPU seconds of the run" + (f"; {note}" if note else ""),
        "columns": ["chapter", *builds],
        "rows": rows,
        "values": values,
    }
    path = dest or ROOT / "benchmarks" / "results" / "chapter_builds.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, metavar="OUT", help="execute the chapters into OUT")
    parser.add_argument("--collect", type=Path, metavar="OUT", help="write the results file from OUT")
    parser.add_argument("--builds", default=",".join(BUILDS))
    parser.add_argument("--chapters", default=",".join(CHAPTERS))
    parser.add_argument("--note", default="", help="a remark recorded with the results")
    parser.add_argument("--cache-root", type=Path, default=None,
                        help="model caches CACHE/<build> for every build (an empty folder: cold caches)")
    args = parser.parse_args(argv)
    if not args.run and not args.collect:
        parser.error("give --run OUT, --collect OUT or both")
    chapters = [c.strip() for c in args.chapters.split(",") if c.strip()]
    unknown = [c for c in chapters if c not in TITLES]
    if unknown:
        parser.error(f"chapters must be among {', '.join(TITLES)}, got {', '.join(unknown)}")
    try:
        builds = parse_builds(args.builds)
    except ValueError as err:
        parser.error(str(err))
    if args.run:
        run(args.run, builds, chapters, args.cache_root)
    if args.collect:
        print("wrote", collect(args.collect, args.note))
    return 0


if __name__ == "__main__":
    sys.exit(main())
