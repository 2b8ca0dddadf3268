"""Tests of the small helpers every chapter uses: seeding, device choice, showing source, progress."""

import numpy as np
import pytest
import torch

import rlnotes
from rlnotes.device import get_device
from rlnotes.progress import progress
from rlnotes.seeding import seed_everything
from rlnotes.show import show_source


def test_package_has_a_version():
    assert rlnotes.__version__.count(".") == 2


def test_seed_everything_makes_runs_repeat():
    rng = seed_everything(123)
    first = (rng.random(3), np.random.rand(2), torch.rand(2))
    rng = seed_everything(123)
    second = (rng.random(3), np.random.rand(2), torch.rand(2))
    for a, b in zip(first, second):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("seed", [-1, 1.5, "0", None, True])
def test_seed_everything_rejects_bad_seeds(seed):
    with pytest.raises(ValueError, match="seed"):
        seed_everything(seed)


def test_get_device_defaults_to_an_available_device(monkeypatch):
    monkeypatch.delenv("RLNOTES_DEVICE", raising=False)
    device = get_device()
    assert device.type in ("cpu", "cuda", "mps")
    if torch.cuda.is_available():
        assert device.type == "cuda"
    assert torch.zeros(1, device=device).device.type == device.type


def test_get_device_honours_the_environment(monkeypatch):
    monkeypatch.setenv("RLNOTES_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")
    assert get_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("prefer", ["tpu", "", 3, "gpu"])
def test_get_device_rejects_unknown_devices(prefer):
    with pytest.raises(ValueError, match="prefer"):
        get_device(prefer)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_get_device_rejects_cuda_without_a_gpu():
    with pytest.raises(ValueError, match="CUDA is not available"):
        get_device("cuda")


def test_show_source_shows_the_package_source():
    shown = show_source(seed_everything)
    text = shown._repr_markdown_()
    assert "def seed_everything" in text and text.startswith("```python")
    assert "rlnotes.seeding.seed_everything" in repr(shown)


@pytest.mark.parametrize("obj", [3, "text", None])
def test_show_source_rejects_objects_without_source(obj):
    with pytest.raises(ValueError, match="obj"):
        show_source(obj)


def test_progress_wraps_and_can_be_silenced(monkeypatch):
    monkeypatch.setenv("RLNOTES_PROGRESS", "0")
    bar = progress(range(5), desc="test")
    assert list(bar) == [0, 1, 2, 3, 4]
    assert bar.disable


def _validated(x, n):
    """A toy function with argument checks."""
    if not isinstance(n, int):
        raise ValueError("n must be an int")
    if n < 0:
        raise ValueError("n must be >= 0")
    elif n > 10:
        raise ValueError("n must be <= 10")
    x = _check_x(x)
    total = 0
    for i in range(n):
        if i == 3:  # not a check: it does not raise
            total += 1
        total += x
    if total > 100:
        raise ValueError("overflow")  # a second run of checks
    return total


def _check_x(x):
    if x is None:
        raise ValueError("x must be a number")
    return x


def test_show_source_without_checks_keeps_the_algorithm():
    full = show_source(_validated).source
    shown = show_source(_validated, checks=False).source
    assert "raise ValueError(\"n must" not in shown and "_check_x" not in shown
    assert shown.count("argument checks omitted") == 1  # one marker, where the first run stood
    assert "(here and below)" in shown and "overflow" not in shown  # the late check goes too
    for line in ("total = 0", "for i in range(n):", "if i == 3:", "total += x", "return total"):
        assert line in shown
    assert len(shown.splitlines()) == len(full.splitlines()) - 8  # 7 + 2 lines become 1
    assert _validated(2, 4) == 9  # the function itself keeps its checks
    with pytest.raises(ValueError):
        _validated(2, 11)


def _plain(x):
    if x > 0:  # a branch that does not raise is code, not a check
        x = -x
    return x


def test_show_source_without_checks_of_a_function_without_checks_is_unchanged():
    assert show_source(_plain, checks=False).source == show_source(_plain).source


@pytest.mark.parametrize("checks", [None, 0, "no"])
def test_show_source_rejects_bad_checks(checks):
    with pytest.raises(ValueError, match="checks"):
        show_source(seed_everything, checks=checks)


def _nested_checks(x, items, scale=None):
    """Toy with the checks the chapters' printed functions hold.

    ======  =====  ========
    x       float  a number
    items   list   numbers
    ======  =====  ========

    Conventions: bad input raises ValueError
    naming the argument.

    Defined in: nowhere.
    """
    for item in items:  # a loop that only validates
        if item < 0:
            raise ValueError("items must be >= 0")
    if scale is not None:
        scale = require_positive(scale, "scale")
    y = require_positive(x, "x") * 2  # a check call used as a value shows as its argument
    if y > 1:
        if y > 100:
            raise ValueError("x too large")
        y = y - 1
    elif y < -5:
        raise ValueError("x too small")
    total = y + sum(items)
    return total


def require_positive(v, name):
    if v <= 0:
        raise ValueError(f"{name} must be > 0")
    return v


def test_show_source_without_checks_strips_nested_checks_and_the_argument_table():
    shown = show_source(_nested_checks, checks=False).source
    compile(shown, "<shown>", "exec")  # still Python
    for gone in ("raise", "require_positive", "for item in items", "if scale is not None",
                 "elif", "=====", "Conventions:", "naming the argument"):
        assert gone not in shown, gone
    for kept in ("y = x * 2", "if y > 1:", "y = y - 1", "total = y + sum(items)", "return total",
                 "Defined in: nowhere.", "help(_nested_checks)"):
        assert kept in shown, kept
    assert shown.count("argument checks omitted") == 1
    assert _nested_checks(2.0, [1.0]) == 4.0  # the function itself keeps its checks
    for bad in ((2.0, [-1.0]), (-1.0, [1.0]), (2.0, [1.0], -1), (200.0, [])):
        with pytest.raises(ValueError):
            _nested_checks(*bad)


def test_show_source_without_checks_of_a_method_keeps_its_indentation():
    class A:
        def f(self, x):
            if x < 0:
                raise ValueError("x")
            return x + 1

    shown = show_source(A.f, checks=False).source
    assert shown.splitlines()[0].startswith("        def f") and "raise" not in shown
    assert "            return x + 1" in shown


def _check_pair(a, b):
    if a > b:
        raise ValueError("a must be <= b")
    return a, b


def _tuple_and_comprehension(a, b, sizes):
    a, b = _check_pair(a, b)  # a check: dropped, even though it returns a tuple
    sizes = [require_positive(n, "sizes") for n in sizes]  # stays: a check inside a comprehension
    return b - a + sum(sizes)


def test_show_source_without_checks_drops_tuple_checks_and_keeps_comprehensions():
    shown = show_source(_tuple_and_comprehension, checks=False).source
    assert "_check_pair" not in shown and "a, b =" not in shown
    assert 'sizes = [require_positive(n, "sizes") for n in sizes]' in shown
    assert "return b - a + sum(sizes)" in shown
    with pytest.raises(ValueError):
        _tuple_and_comprehension(2, 1, [1])
