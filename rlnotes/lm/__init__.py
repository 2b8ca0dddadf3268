"""The language-model lab: a tiny transformer trained from scratch on synthetic tasks with known
gold answers, and the machinery of the chapters on RL for language models (RLHF, DPO, GRPO).

Nothing is downloaded: every model is trained here, deterministically, and cached locally
(:mod:`rlnotes.lm.cache`). Modules, in reading order:

- :mod:`~rlnotes.lm.model`: ``TinyGPT``, a decoder-only transformer with a key-value cache;
- :mod:`~rlnotes.lm.generation`: ``generate`` (sampling) and ``completion_logprobs`` (scoring);
- :mod:`~rlnotes.lm.tokenizer`: a character-level tokeniser;
- :mod:`~rlnotes.lm.tasks`: the addition task (verifiable reward) and the preference task
  (hidden gold reward, Bradley-Terry preference pairs);
- :mod:`~rlnotes.lm.preference`: the preference task the chapters use, whose gold reward punishes
  repetition whatever a word's sentiment;
- :mod:`~rlnotes.lm.sft`: supervised fine-tuning and the cached SFT models;
- :mod:`~rlnotes.lm.heads`: value and reward heads on the same backbone, frozen reference copies;
- :mod:`~rlnotes.lm.reward`: reward models trained from preference pairs;
- :mod:`~rlnotes.lm.ppo`: the pieces of PPO for language models (KL-penalised per-token
  rewards, GAE over tokens, whitening; the trainer is the RLHF chapter's
  :func:`rlnotes.rlhf_ppo.train_ppo`);
- :mod:`~rlnotes.lm.evaluation`: pass@1 on a verifiable task;
- :mod:`~rlnotes.lm.bon`: best-of-n sampling and its KL;
- :mod:`~rlnotes.lm.overopt`: the functional forms of reward over-optimisation (Gao et al. 2023);
- :mod:`~rlnotes.lm.rm_scaling`: best-of-n from a pool of samples, and Gao et al.'s form fitted for
  reward models trained on more or fewer pairs;
- :mod:`~rlnotes.lm.process`: Math-Shepherd's Monte Carlo step labels, R1's format reward and a
  loose checker that can be gamed;
- :mod:`~rlnotes.lm.records`: reading the GRPO benchmarks' results files.
"""

from rlnotes.lm.generation import completion_logprobs, decode, gather_logprobs, generate
from rlnotes.lm.model import TinyGPT

__all__ = ["TinyGPT", "generate", "completion_logprobs", "decode", "gather_logprobs"]

from rlnotes.lm.bon import best_of_n_curve, bon_kl, bon_kl_exact  # noqa: E402
from rlnotes.lm.heads import PolicyWithValue, PolicyWithValueModel, RewardModel  # noqa: E402
from rlnotes.lm.overopt import fit_bon_form, fit_rl_form  # noqa: E402
from rlnotes.lm.ppo import kl_penalised_rewards, token_gae, whiten  # noqa: E402
from rlnotes.lm.reward import (PreferencePairs, preference_accuracy,  # noqa: E402
                               sample_preference_pairs, train_reward_model)
from rlnotes.lm.sft import accuracy, freeze, sft_loss, sft_model, train_sft  # noqa: E402
from rlnotes.lm.preference import PreferenceTask  # noqa: E402
from rlnotes.lm.tasks import AdditionTask  # noqa: E402
from rlnotes.lm.tokenizer import CharTokenizer  # noqa: E402

__all__ += ["AdditionTask", "PreferenceTask", "CharTokenizer", "sft_loss", "train_sft", "sft_model",
            "accuracy", "freeze", "PolicyWithValue", "PolicyWithValueModel", "RewardModel", "PreferencePairs",
            "sample_preference_pairs", "train_reward_model", "preference_accuracy",
            "kl_penalised_rewards", "token_gae", "whiten", "bon_kl", "bon_kl_exact",
            "best_of_n_curve", "fit_bon_form", "fit_rl_form"]

