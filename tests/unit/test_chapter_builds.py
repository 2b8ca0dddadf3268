"""benchmarks/chapter_builds.py: the record of the chapters under every build."""

import importlib.util
import json
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "chapter_builds", Path(__file__).parents[2] / "benchmarks" / "chapter_builds.py")
chapter_builds = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(chapter_builds)


def notebook(glued: dict, error: bool = False) -> dict:
    outputs = [{"output_type": "display_data", "metadata": {"scrapbook": {"name": k, "mime_prefix":
               chapter_builds.RECORD_PREFIX}}, "data": {chapter_builds.RECORD_PREFIX + "text/plain":
               repr(v)}} for k, v in glued.items()]
    if error:
        outputs.append({"output_type": "error", "ename": "AssertionError", "evalue": "", "traceback": []})
    return {"cells": [{"cell_type": "code", "source": "", "outputs": outputs, "metadata": {}}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_collect_reads_errors_glue_and_cpu_times(tmp_path):
    (tmp_path / "dqn.default.ipynb").write_text(json.dumps(notebook({"n_reached": 2})))
    avx2 = chapter_builds.tag_of("avx2")
    (tmp_path / f"dqn.{avx2}.ipynb").write_text(json.dumps(notebook({"n_reached": 3}, error=True)))
    (tmp_path / "times.txt").write_text(f"CPU dqn {avx2} user=70.0 sys=1.0 wall=400\n")
    (tmp_path / "times.json").write_text(json.dumps({"dqn.default": 59.2}))
    record = json.loads(chapter_builds.collect(tmp_path, dest=tmp_path / "out.json").read_text())
    assert record["columns"] == ["chapter", "default", "avx2"]
    assert record["rows"] == [["Deep Q-networks", "every cell ran, 59 CPU s",
                               "fails: cell 0 AssertionError, 71 CPU s"]]
    assert record["values"]["Deep Q-networks"]["n_reached"] == {"default": "2", "avx2": "3"}


def test_collect_without_notebooks_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="out must hold executed notebooks"):
        chapter_builds.collect(tmp_path, dest=tmp_path / "out.json")


@pytest.mark.parametrize("argv, message", [
    ([], "give --run OUT, --collect OUT or both"),
    (["--collect", "x", "--chapters", "grpo_zero"], "chapters must be among"),
    (["--collect", "x", "--builds", "avx3"], "builds must be among"),
    (["--collect", "x", "--builds", "default,default"], "must not repeat"),
])
def test_bad_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        chapter_builds.main(argv)
    assert message in capsys.readouterr().err
