"""tools/builds.py: the floating-point builds a claim is checked under."""

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("builds", Path(__file__).parents[2] / "tools" / "builds.py")
builds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builds)


def test_each_build_sets_its_libraries_and_a_cache_of_its_own(tmp_path):
    base = {"PATH": "/usr/bin", "RLNOTES_CACHE": "/somewhere"}
    default = builds.build_env("default", base, tmp_path)
    assert default["RLNOTES_CACHE"] == "/somewhere" and "ATEN_CPU_CAPABILITY" not in default
    assert default["OMP_NUM_THREADS"] == "1"
    caches = set()
    for name, settings in builds.BUILDS.items():
        env = builds.build_env(name, base, tmp_path)
        assert all(env[k] == v for k, v in settings.items())
        caches.add(env["RLNOTES_CACHE"])
    assert len(caches) == len(builds.BUILDS)  # no two builds share a model cache
    assert base == {"PATH": "/usr/bin", "RLNOTES_CACHE": "/somewhere"}  # the base is not modified


@pytest.mark.parametrize("text, match", [("", "at least one"), ("avx2,avx3", "avx3"),
                                         ("avx2,avx2", "repeat"), (" , ", "at least one")])
def test_bad_build_lists_are_refused(text, match):
    with pytest.raises(ValueError, match=match):
        builds.parse_builds(text)


def test_unknown_build_name_is_refused():
    with pytest.raises(ValueError, match="build must be one of"):
        builds.build_env("fast")


def test_parse_builds_keeps_the_order():
    assert builds.parse_builds("compatible, default") == ["compatible", "default"]


def test_main_runs_the_command_under_the_build_and_reports_its_status(capsys):
    check = "import os, sys; sys.exit(0 if os.environ.get('MKL_CBWR') == 'AVX2' else 3)"
    assert builds.main(["--builds", "avx2", "--", sys.executable, "-c", check]) == 0
    assert builds.main(["--builds", "default", "--", sys.executable, "-c", check]) == 1
    out = capsys.readouterr().out
    assert "| avx2 |" in out and "| 0 |" in out and "| 3 |" in out


def test_main_refuses_a_missing_command():
    with pytest.raises(SystemExit):
        builds.main(["--builds", "avx2"])
