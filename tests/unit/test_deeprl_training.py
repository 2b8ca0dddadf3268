"""rlnotes.deeprl.training: the plumbing every deep-RL trainer shares."""

import math

import pytest
import torch

from rlnotes.deeprl.training import (CALLBACK_INTERVAL, Reporter, check_common, check_flag,
                                     check_hidden_sizes, check_max_grad_norm, check_positive,
                                     check_rollout_size, choose_device, torch_threads)


def test_torch_threads_sets_and_restores():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_torch_threads_restores_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError):
        with torch_threads(1):
            raise RuntimeError("inside")
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1", None])
def test_torch_threads_rejects(bad):
    with pytest.raises(ValueError, match="num_threads"):
        with torch_threads(bad):
            pass


def test_choose_device(monkeypatch):
    monkeypatch.delenv("RLNOTES_DEVICE", raising=False)
    assert choose_device(None) == torch.device("cpu")
    assert choose_device("cpu") == torch.device("cpu")
    assert choose_device(torch.device("cpu")) == torch.device("cpu")
    assert isinstance(choose_device("auto"), torch.device)
    monkeypatch.setenv("RLNOTES_DEVICE", "cpu")
    assert choose_device(None) == torch.device("cpu")


@pytest.mark.parametrize("bad", ["gpu", "tpu", 3, ""])
def test_choose_device_rejects(bad):
    with pytest.raises(ValueError, match="cpu"):
        choose_device(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error when CUDA is absent")
def test_choose_device_rejects_missing_cuda():
    with pytest.raises(ValueError, match="CUDA"):
        choose_device("cuda")


def test_check_common_cleans():
    cb = lambda steps, policy: False  # noqa: E731
    assert check_common(10, 0, cb, 1) == (10, 0, 1)
    assert check_common(5, 3, None, 2) == (5, 3, 2)


@pytest.mark.parametrize("args, name", [
    ((0, 0, None, 1), "total_steps"),
    ((1.5, 0, None, 1), "total_steps"),
    ((10, -1, None, 1), "seed"),
    ((10, 0.5, None, 1), "seed"),
    ((10, 0, 3, 1), "callback"),
    ((10, 0, "f", 1), "callback"),
    ((10, 0, None, 0), "num_threads"),
])
def test_check_common_rejects(args, name):
    with pytest.raises(ValueError, match=name):
        check_common(*args)


def test_check_hidden_sizes():
    assert check_hidden_sizes((64, 64)) == [64, 64]
    assert check_hidden_sizes([]) == []


@pytest.mark.parametrize("bad", [64, "64", (64, 0), (64, 2.5), None])
def test_check_hidden_sizes_rejects(bad):
    with pytest.raises(ValueError, match="hidden_sizes"):
        check_hidden_sizes(bad)


def test_check_positive():
    assert check_positive(1e-3, "learning_rate") == 1e-3
    assert check_positive(2, "max_kl") == 2.0


@pytest.mark.parametrize("bad", [0.0, -1e-3, math.nan, "0.1", None])
def test_check_positive_rejects(bad):
    with pytest.raises(ValueError, match="learning_rate"):
        check_positive(bad, "learning_rate")


def test_check_max_grad_norm():
    assert check_max_grad_norm(None) is None
    assert check_max_grad_norm(0.5) == 0.5


@pytest.mark.parametrize("bad", [0.0, -1.0, "0.5", math.inf * 0])
def test_check_max_grad_norm_rejects(bad):
    with pytest.raises(ValueError, match="max_grad_norm"):
        check_max_grad_norm(bad)


def test_check_flag():
    assert check_flag(True, "norm_adv") is True
    assert check_flag(False, "norm_adv") is False


@pytest.mark.parametrize("bad", [1, 0, "yes", None])
def test_check_flag_rejects(bad):
    with pytest.raises(ValueError, match="norm_adv"):
        check_flag(bad, "norm_adv")


def test_check_rollout_size():
    assert check_rollout_size(8, 32) == (8, 32)
    assert check_rollout_size(1, CALLBACK_INTERVAL) == (1, CALLBACK_INTERVAL)


@pytest.mark.parametrize("args, name", [
    ((0, 32), "num_envs"),
    ((8, 0), "num_steps"),
    ((8, 2.5), "num_steps"),
    ((16, 256), "num_steps"),  # 4,096 steps between callbacks
])
def test_check_rollout_size_rejects(args, name):
    with pytest.raises(ValueError, match=name):
        check_rollout_size(*args)


def test_check_rollout_size_names_the_trainers_argument():
    with pytest.raises(ValueError, match="train_freq"):
        check_rollout_size(16, 256, "train_freq")


def test_reporter_calls_back_and_stops():
    seen = []
    policy = object()

    def callback(steps, pol):
        seen.append((steps, pol))
        return steps >= 300

    with Reporter(1000, callback, policy) as reporter:
        assert reporter(100) is False
        reporter.update(200)  # the bar only
        assert reporter(300) is True
    assert seen == [(100, policy), (300, policy)]


def test_reporter_without_callback_never_stops():
    reporter = Reporter(10, None, None)
    assert reporter(5) is False and reporter(50) is False
    reporter.close()


def test_reporter_bar_is_capped_and_closed(monkeypatch):
    monkeypatch.setenv("RLNOTES_PROGRESS", "1")
    reporter = Reporter(100, None, None, progress=True, desc="X")
    reporter(70)
    reporter(250)
    assert reporter.bar.n == 100
    reporter.close()
    assert reporter.bar is None


@pytest.mark.parametrize("kwargs, name", [
    (dict(total_steps=0, callback=None), "total_steps"),
    (dict(total_steps=10, callback=5), "callback"),
    (dict(total_steps=10, callback=None, progress=1), "progress"),
])
def test_reporter_rejects(kwargs, name):
    progress = kwargs.pop("progress", False)
    with pytest.raises(ValueError, match=name):
        Reporter(kwargs["total_steps"], kwargs["callback"], None, progress=progress)
