r"""Learning from experience without a model: tabular Monte Carlo and temporal-difference methods.

Every method here moves an estimate a step of size alpha toward a sampled *target*,

    estimate <- estimate + alpha * (target - estimate),

and the methods differ only in the target (book notation, ``book/notation.md``):

| method | estimate | target |
| --- | --- | --- |
| Monte Carlo prediction | V(s_t) | G_t, the sampled return |
| TD(0) prediction | V(s_t) | r_{t+1} + gamma V(s_{t+1}) |
| SARSA | Q(s_t, a_t) | r_{t+1} + gamma Q(s_{t+1}, a_{t+1}) |
| Q-learning | Q(s_t, a_t) | r_{t+1} + gamma max_a Q(s_{t+1}, a) |
| expected SARSA | Q(s_t, a_t) | r_{t+1} + gamma sum_a pi(a given s_{t+1}) Q(s_{t+1}, a) |

Conventions shared by every function:

- ``env`` is a gymnasium environment with ``Discrete`` observation and action spaces.
- Episodes end when the environment reports ``terminated`` or ``truncated``. On ``terminated``
  the target has no bootstrap term (the value of a terminal state is 0). On ``truncated`` alone
  (a time limit, which is not part of the MDP) the target *does* bootstrap from the next state,
  and Monte Carlo completes the cut-off return with ``V(s_T)``.
- The behaviour policy of the control methods is epsilon-greedy: with probability epsilon a
  uniformly random action, otherwise a greedy action, ties broken uniformly at random.
- Randomness comes from ``numpy.random.default_rng(seed)`` only: it draws the actions and the seed
  of the environment's first ``reset``; later resets continue the environment's own stream. The
  same ``seed`` and environment give the same run.

The ``*_batch`` functions run many independent runs at once with numpy on the environment's
toy-text model ``env.unwrapped.P`` (:class:`ToyTextModel`); they compute the same algorithms as
the single-run functions (tested statistically) and are what the chapter uses to average over
runs.

Defined in: Learning without a model: Monte Carlo and TD.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit

from rlnotes._validate import require_gamma, require_in_range, require_int
from rlnotes.envs.tabular_env import start_distribution
from rlnotes.progress import progress

__all__ = [
    "ToyTextModel",
    "batch_prediction",
    "batch_td_mc",
    "epsilon_greedy",
    "epsilon_greedy_probs",
    "best_expected_return",
    "expected_return",
    "evaluate_policy",
    "expected_sarsa",
    "expected_sarsa_target",
    "greedy_path",
    "greedy_policy",
    "importance_sampling_estimates",
    "infinite_variance_episodes",
    "mc_control_batch",
    "mc_prediction",
    "mc_prediction_batch",
    "n_step_returns",
    "n_step_td_prediction_batch",
    "off_policy_mc_control",
    "q_learning",
    "q_learning_target",
    "rms_error",
    "sarsa",
    "sarsa_target",
    "sample_targets",
    "td0_prediction",
    "td0_prediction_batch",
    "td_control_batch",
    "td_target",
    "td_update",
    "toy_text_model",
]

CONTROL_METHODS = ("sarsa", "q_learning", "expected_sarsa")


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------

def _require_discrete_env(env) -> tuple[int, int]:
    """(S, A) of an environment whose observation and action spaces are Discrete."""
    obs = getattr(env, "observation_space", None)
    act = getattr(env, "action_space", None)
    if not isinstance(obs, spaces.Discrete) or not isinstance(act, spaces.Discrete):
        raise ValueError(
            "env must have Discrete observation and action spaces, got "
            f"observation_space={obs!r}, action_space={act!r}")
    return int(obs.n), int(act.n)


def _require_alpha(alpha) -> float:
    return require_in_range(alpha, "alpha", 0.0, 1.0, low_open=True)


def _run_alphas(alpha, num_runs) -> np.ndarray:
    """One step size per run, checked: a (num_runs,) float64 array, each a valid alpha."""
    alphas = np.asarray(alpha, dtype=np.float64)
    if alphas.shape != (require_int(num_runs, "num_runs", minimum=1),):
        raise ValueError(f"alpha must be a float or have shape (num_runs,), got {alphas.shape}")
    for a in alphas:
        _require_alpha(float(a))
    return alphas


def _require_epsilon(epsilon) -> float:
    return require_in_range(epsilon, "epsilon", 0.0, 1.0)


def _require_seed(seed):
    if seed is None:
        return None
    return require_int(seed, "seed", minimum=0)


def _require_policy(policy, S: int, A: int) -> np.ndarray:
    """An (S, A) matrix of action probabilities (rows sum to 1), or an (S,) array of actions."""
    policy = np.asarray(policy)
    if policy.shape == (S,) and np.issubdtype(policy.dtype, np.integer):
        if policy.min() < 0 or policy.max() >= A:
            raise ValueError(f"policy actions must lie in [0, {A - 1}], got {policy}")
        return np.eye(A)[policy]
    policy = policy.astype(np.float64)
    if policy.shape != (S, A):
        raise ValueError(f"policy must have shape ({S}, {A}) (or ({S},) integer actions), "
                         f"got {policy.shape}")
    if not np.all(np.isfinite(policy)) or policy.min() < 0:
        raise ValueError("policy must hold finite, non-negative probabilities")
    if not np.allclose(policy.sum(axis=1), 1.0, atol=1e-8):
        raise ValueError("policy rows must sum to 1")
    return policy


def _require_V0(V0, S: int) -> np.ndarray:
    if V0 is None:
        return np.zeros(S)
    V0 = np.array(V0, dtype=np.float64)
    if V0.shape != (S,):
        raise ValueError(f"V0 must have shape ({S},), got {V0.shape}")
    if not np.all(np.isfinite(V0)):
        raise ValueError("V0 must contain only finite values")
    return V0


def _first_reset_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


# --------------------------------------------------------------------------------------------
# The small pieces: policies, targets, the update
# --------------------------------------------------------------------------------------------

def epsilon_greedy(q, epsilon: float, rng: np.random.Generator) -> int:
    r"""Sample an action epsilon-greedily from one row of action values.

    With probability ``epsilon`` a uniformly random action, otherwise an action of largest value,
    ties broken uniformly at random. Each greedy action therefore has probability
    ``(1 - epsilon) / n_greedy + epsilon / A`` (:func:`epsilon_greedy_probs`).

    | argument | shape |
    | --- | --- |
    | ``q`` | (A,) action values Q(s, .) |
    | returns | int in [0, A) |

    Defined in: Learning without a model: Monte Carlo and TD, section SARSA: on-policy TD control.
    """
    q = np.asarray(q)
    if q.ndim != 1 or q.size == 0:
        raise ValueError(f"q must be a non-empty 1-D array of action values, got shape {q.shape}")
    epsilon = _require_epsilon(epsilon)
    if rng.random() < epsilon:
        return int(rng.integers(q.size))
    best = np.flatnonzero(q == q.max())
    return int(best[rng.integers(best.size)])


def epsilon_greedy_probs(q, epsilon: float) -> np.ndarray:
    r"""The action probabilities of the epsilon-greedy policy (ties share the greedy mass).

    $$\pi(a \mid s) = \frac{\epsilon}{|\mathcal A|}
      + (1 - \epsilon)\,\frac{\mathbb 1[a \in \arg\max_b Q(s, b)]}{|\arg\max_b Q(s, b)|}$$

    | argument | shape |
    | --- | --- |
    | ``q`` | (..., A) action values |
    | returns | (..., A) probabilities, rows sum to 1 |

    Defined in: Learning without a model: Monte Carlo and TD, section Expected SARSA.
    """
    q = np.asarray(q, dtype=np.float64)
    if q.ndim < 1 or q.shape[-1] == 0:
        raise ValueError(f"q must have a non-empty last axis of actions, got shape {q.shape}")
    epsilon = _require_epsilon(epsilon)
    is_max = q == q.max(axis=-1, keepdims=True)
    greedy = is_max / is_max.sum(axis=-1, keepdims=True)
    return epsilon / q.shape[-1] + (1.0 - epsilon) * greedy


def greedy_policy(Q) -> np.ndarray:
    """The greedy policy ``argmax_a Q[s, a]`` as an (S,) integer array (ties: the first action).

    | argument | shape |
    | --- | --- |
    | ``Q`` | (S, A) |
    | returns | (S,) int |

    Defined in: Learning without a model: Monte Carlo and TD, section Q-learning on FrozenLake.
    """
    Q = np.asarray(Q)
    if Q.ndim != 2:
        raise ValueError(f"Q must have shape (S, A), got {Q.shape}")
    return np.argmax(Q, axis=1)


def td_target(reward, next_value, terminated, gamma: float):
    r"""The one-step bootstrapped target $r_{t+1} + \gamma\,(1 - d_t)\,V(s_{t+1})$.

    ``terminated`` is the done mask $d_t$: 1 (True) when the transition from $s_t$ ends in a
    terminal state $s_{t+1}$, whose value is 0, so there is nothing to bootstrap from.
    ``next_value`` is the estimate of $s_{t+1}$ ($V(s_{t+1})$, or a value built from
    $Q(s_{t+1}, \cdot)$). A time-limit truncation is *not* termination:
    pass ``terminated=False`` then. Scalars or arrays of one shape.

    | argument | shape |
    | --- | --- |
    | ``reward``, ``next_value``, ``terminated`` | () or (N,) |
    | returns | () or (N,) |

    Defined in: Learning without a model: Monte Carlo and TD, section From the Bellman equation to sampled
    targets.
    """
    gamma = require_gamma(gamma)
    return reward + gamma * (1.0 - np.asarray(terminated, dtype=np.float64)) * next_value


def td_update(estimate, target, alpha: float):
    r"""One step of size alpha toward the target: $x \leftarrow x + \alpha\,(\text{target} - x)$.

    | argument | shape |
    | --- | --- |
    | ``estimate``, ``target`` | () or (N,) |
    | returns | the new estimate, same shape |

    Defined in: Learning without a model: Monte Carlo and TD, section From the Bellman equation to sampled
    targets.
    """
    alpha = _require_alpha(alpha)
    return estimate + alpha * (target - estimate)


def sarsa_target(reward, q_next, a_next, terminated, gamma: float):
    r"""SARSA's target $r_{t+1} + \gamma\,(1 - d_t)\,Q(s_{t+1}, a_{t+1})$, with $a_{t+1}$ the
    action the behaviour policy takes next.

    | argument | shape |
    | --- | --- |
    | ``reward``, ``terminated`` | () or (N,) |
    | ``q_next`` | (A,) or (N, A): Q(s_{t+1}, .) |
    | ``a_next`` | () or (N,) int |
    | returns | () or (N,) |

    Defined in: Learning without a model: Monte Carlo and TD, section SARSA: on-policy TD control.
    """
    q_next = np.asarray(q_next, dtype=np.float64)
    a_next = np.asarray(a_next)
    value = np.take_along_axis(q_next, a_next[..., None], axis=-1)[..., 0]
    return td_target(reward, value, terminated, gamma)


def q_learning_target(reward, q_next, terminated, gamma: float):
    r"""Q-learning's target $r_{t+1} + \gamma\,(1 - d_t)\max_a Q(s_{t+1}, a)$.

    | argument | shape |
    | --- | --- |
    | ``reward``, ``terminated`` | () or (N,) |
    | ``q_next`` | (A,) or (N, A): Q(s_{t+1}, .) |
    | returns | () or (N,) |

    Defined in: Learning without a model: Monte Carlo and TD, section Q-learning: off-policy TD control.
    """
    q_next = np.asarray(q_next, dtype=np.float64)
    return td_target(reward, q_next.max(axis=-1), terminated, gamma)


def expected_sarsa_target(reward, q_next, terminated, gamma: float, epsilon: float):
    r"""Expected SARSA's target $r_{t+1} + \gamma\,(1 - d_t)\sum_a \pi(a \mid s_{t+1})\,
    Q(s_{t+1}, a)$ with $\pi$ the epsilon-greedy policy of :func:`epsilon_greedy_probs`.

    | argument | shape |
    | --- | --- |
    | ``reward``, ``terminated`` | () or (N,) |
    | ``q_next`` | (A,) or (N, A): Q(s_{t+1}, .) |
    | returns | () or (N,) |

    Defined in: Learning without a model: Monte Carlo and TD, section Expected SARSA.
    """
    q_next = np.asarray(q_next, dtype=np.float64)
    value = (epsilon_greedy_probs(q_next, epsilon) * q_next).sum(axis=-1)
    return td_target(reward, value, terminated, gamma)


def rms_error(V, v_true, states=None):
    r"""Root-mean-square error $\sqrt{\frac1{|\mathcal S'|}\sum_{s\in\mathcal S'}(V(s) - v(s))^2}$
    over ``states`` (default: all), along the last axis.

    | argument | shape |
    | --- | --- |
    | ``V`` | (..., S) |
    | ``v_true`` | (S,) |
    | ``states`` | index array into the last axis, or None |
    | returns | (...) |

    Defined in: Learning without a model: Monte Carlo and TD, section TD(0) against Monte Carlo.
    """
    V = np.asarray(V, dtype=np.float64)
    v_true = np.asarray(v_true, dtype=np.float64)
    if V.shape[-1:] != v_true.shape:
        raise ValueError(f"V must end in an axis of length {v_true.shape}, got shape {V.shape}")
    err = V - v_true
    if states is not None:
        err = err[..., np.asarray(states)]
    return np.sqrt(np.mean(err**2, axis=-1))


# --------------------------------------------------------------------------------------------
# Prediction: Monte Carlo and TD(0), one run, through the gymnasium interface
# --------------------------------------------------------------------------------------------

def _sample_action(cum_probs_row: np.ndarray, rng: np.random.Generator) -> int:
    return min(int(np.searchsorted(cum_probs_row, rng.random(), side="right")),
               cum_probs_row.size - 1)


def td0_prediction(env, policy, num_episodes: int, alpha: float, gamma: float = 1.0,
                   V0=None, seed: int | None = None) -> np.ndarray:
    r"""TD(0) prediction of $V^\pi$: after every step,

    $$V(s_t) \leftarrow V(s_t)
      + \alpha\,\big[r_{t+1} + \gamma\,(1 - d_t)\,V(s_{t+1}) - V(s_t)\big]$$

    ($d_t = 1$ when $s_{t+1}$ is terminal: no bootstrap; a truncated episode still bootstraps).

    | argument | shape |
    | --- | --- |
    | ``policy`` | (S, A) action probabilities, or (S,) integer actions |
    | ``V0`` | (S,) initial estimates (default zeros) |
    | returns ``V_history`` | (num_episodes + 1, S): row k is V after k episodes |

    Defined in: Learning without a model: Monte Carlo and TD, section TD(0) prediction.
    """
    S, A = _require_discrete_env(env)
    policy = _require_policy(policy, S, A)
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    alpha, gamma = _require_alpha(alpha), require_gamma(gamma)
    V = _require_V0(V0, S)
    rng = np.random.default_rng(_require_seed(seed))
    cum = np.cumsum(policy, axis=1)
    history = np.empty((num_episodes + 1, S))
    history[0] = V
    s, _ = env.reset(seed=_first_reset_seed(rng))
    for k in range(num_episodes):
        if k > 0:
            s, _ = env.reset()
        done = False
        while not done:
            a = _sample_action(cum[s], rng)
            s2, r, terminated, truncated, _ = env.step(a)
            target = td_target(r, V[s2], terminated, gamma)
            V[s] = td_update(V[s], target, alpha)
            s, done = s2, terminated or truncated
        history[k + 1] = V
    return history


def mc_prediction(env, policy, num_episodes: int, alpha: float, gamma: float = 1.0,
                  first_visit: bool = True, V0=None, seed: int | None = None) -> np.ndarray:
    r"""Constant-alpha Monte Carlo prediction of $V^\pi$: after each episode, for
    $t = T-1, \dots, 0$,

    $$G_t = r_{t+1} + \gamma G_{t+1}, \qquad V(s_t) \leftarrow V(s_t) + \alpha\,\big[G_t - V(s_t)\big]$$

    for every visit, or only for the first visit of $s_t$ in the episode (``first_visit=True``).
    $G_T = 0$ when the episode terminated; when it was truncated, $G_T = V(s_T)$ completes the
    cut-off return.

    | argument | shape |
    | --- | --- |
    | ``policy`` | (S, A) action probabilities, or (S,) integer actions |
    | ``V0`` | (S,) initial estimates (default zeros) |
    | returns ``V_history`` | (num_episodes + 1, S): row k is V after k episodes |

    Defined in: Learning without a model: Monte Carlo and TD, section Monte Carlo prediction.
    """
    S, A = _require_discrete_env(env)
    policy = _require_policy(policy, S, A)
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    alpha, gamma = _require_alpha(alpha), require_gamma(gamma)
    if not isinstance(first_visit, (bool, np.bool_)):
        raise ValueError(f"first_visit must be True or False, got {first_visit!r}")
    V = _require_V0(V0, S)
    rng = np.random.default_rng(_require_seed(seed))
    history = np.empty((num_episodes + 1, S))
    history[0] = V
    s, _ = env.reset(seed=_first_reset_seed(rng))
    _mc_prediction_core(env, s, np.cumsum(policy, axis=1), V, history, alpha, gamma,
                        first_visit, rng)
    return history


def _mc_prediction_core(env, s, cum, V, history, alpha, gamma, first_visit, rng):
    """The episode loop of mc_prediction (s: the first start state); V is updated in place and
    history[k + 1] = V after episode k."""
    for k in range(history.shape[0] - 1):
        if k > 0:
            s, _ = env.reset()
        states, rewards = [], []
        terminated = truncated = False
        while not (terminated or truncated):
            a = _sample_action(cum[s], rng)
            s2, r, terminated, truncated, _ = env.step(a)
            states.append(s)
            rewards.append(r)
            s = s2
        G = 0.0 if terminated else V[s]
        first = {}
        for t, st in enumerate(states):
            first.setdefault(st, t)
        for t in reversed(range(len(states))):
            G = rewards[t] + gamma * G
            if not first_visit or first[states[t]] == t:
                V[states[t]] = td_update(V[states[t]], G, alpha)
        history[k + 1] = V


# --------------------------------------------------------------------------------------------
# Control: SARSA, Q-learning, expected SARSA, one run, through the gymnasium interface
# --------------------------------------------------------------------------------------------

def _control_setup(env, num_episodes, alpha, epsilon, gamma, seed):
    S, A = _require_discrete_env(env)
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    alpha, epsilon = _require_alpha(alpha), _require_epsilon(epsilon)
    gamma = require_gamma(gamma)
    rng = np.random.default_rng(_require_seed(seed))
    return np.zeros((S, A)), np.zeros(num_episodes), rng, num_episodes, alpha, epsilon, gamma


def sarsa(env, num_episodes: int, alpha: float, epsilon: float, gamma: float = 1.0,
          seed: int | None = None):
    r"""SARSA, on-policy TD control (Rummery and Niranjan, 1994): act epsilon-greedily and
    after every step

    $$Q(s_t, a_t) \leftarrow Q(s_t, a_t) + \alpha\,\big[r_{t+1}
      + \gamma\,(1 - d_t)\,Q(s_{t+1}, a_{t+1}) - Q(s_t, a_t)\big]$$

    with $a_{t+1}$ the action the epsilon-greedy policy then takes (no bootstrap from a
    terminal state; bootstrap on truncation).

    | argument / result | shape |
    | --- | --- |
    | ``Q`` | (S, A), starts at zero |
    | ``episode_returns`` | (num_episodes,): undiscounted sum of rewards of each episode as played |

    Defined in: Learning without a model: Monte Carlo and TD, section SARSA: on-policy TD control.
    """
    Q, episode_returns, rng, num_episodes, alpha, epsilon, gamma = _control_setup(
        env, num_episodes, alpha, epsilon, gamma, seed)
    s, _ = env.reset(seed=_first_reset_seed(rng))
    for k in range(num_episodes):
        if k > 0:
            s, _ = env.reset()
        a = epsilon_greedy(Q[s], epsilon, rng)
        done = False
        while not done:
            s2, r, terminated, truncated, _ = env.step(a)
            episode_returns[k] += r
            a2 = epsilon_greedy(Q[s2], epsilon, rng)
            target = sarsa_target(r, Q[s2], a2, terminated, gamma)
            Q[s, a] = td_update(Q[s, a], target, alpha)
            s, a, done = s2, a2, terminated or truncated
    return Q, episode_returns


def q_learning(env, num_episodes: int, alpha: float, epsilon: float, gamma: float = 1.0,
               seed: int | None = None):
    r"""Q-learning, off-policy TD control (Watkins and Dayan, 1992): act epsilon-greedily and after
    every step

    $$Q(s_t, a_t) \leftarrow Q(s_t, a_t) + \alpha\,\big[r_{t+1}
      + \gamma\,(1 - d_t) \max_a Q(s_{t+1}, a) - Q(s_t, a_t)\big]$$

    (no bootstrap from a terminal state; bootstrap on truncation).

    | argument / result | shape |
    | --- | --- |
    | ``Q`` | (S, A), starts at zero |
    | ``episode_returns`` | (num_episodes,): undiscounted sum of rewards of each episode as played |

    Defined in: Learning without a model: Monte Carlo and TD, section Q-learning: off-policy TD control.
    """
    Q, episode_returns, rng, num_episodes, alpha, epsilon, gamma = _control_setup(
        env, num_episodes, alpha, epsilon, gamma, seed)
    s, _ = env.reset(seed=_first_reset_seed(rng))
    for k in range(num_episodes):
        if k > 0:
            s, _ = env.reset()
        done = False
        while not done:
            a = epsilon_greedy(Q[s], epsilon, rng)
            s2, r, terminated, truncated, _ = env.step(a)
            episode_returns[k] += r
            target = q_learning_target(r, Q[s2], terminated, gamma)
            Q[s, a] = td_update(Q[s, a], target, alpha)
            s, done = s2, terminated or truncated
    return Q, episode_returns


def expected_sarsa(env, num_episodes: int, alpha: float, epsilon: float, gamma: float = 1.0,
                   seed: int | None = None):
    r"""Expected SARSA (van Seijen et al., 2009): act epsilon-greedily and after every step

    $$Q(s_t, a_t) \leftarrow Q(s_t, a_t) + \alpha\,\big[r_{t+1}
      + \gamma\,(1 - d_t) \textstyle\sum_a \pi(a \mid s_{t+1}) Q(s_{t+1}, a) - Q(s_t, a_t)\big]$$

    with $\pi$ the epsilon-greedy policy itself (no bootstrap from a terminal state; bootstrap on
    truncation).

    | argument / result | shape |
    | --- | --- |
    | ``Q`` | (S, A), starts at zero |
    | ``episode_returns`` | (num_episodes,): undiscounted sum of rewards of each episode as played |

    Defined in: Learning without a model: Monte Carlo and TD, section Expected SARSA.
    """
    Q, episode_returns, rng, num_episodes, alpha, epsilon, gamma = _control_setup(
        env, num_episodes, alpha, epsilon, gamma, seed)
    s, _ = env.reset(seed=_first_reset_seed(rng))
    for k in range(num_episodes):
        if k > 0:
            s, _ = env.reset()
        done = False
        while not done:
            a = epsilon_greedy(Q[s], epsilon, rng)
            s2, r, terminated, truncated, _ = env.step(a)
            episode_returns[k] += r
            target = expected_sarsa_target(r, Q[s2], terminated, gamma, epsilon)
            Q[s, a] = td_update(Q[s, a], target, alpha)
            s, done = s2, terminated or truncated
    return Q, episode_returns


# --------------------------------------------------------------------------------------------
# Using what was learned: greedy paths, rollouts, exact finite-horizon returns
# --------------------------------------------------------------------------------------------

def greedy_path(env, Q, max_steps: int = 200, seed: int = 0):
    """Follow the greedy policy of ``Q`` (ties: the first action) for one episode.

    Returns ``(states, total_reward)``: the visited states from the start state on, and the
    undiscounted sum of rewards. Stops at termination, truncation or after ``max_steps`` steps
    (a greedy policy can loop forever). In a deterministic environment such as CliffWalking this
    is *the* path of the greedy policy.

    | argument / result | shape |
    | --- | --- |
    | ``Q`` | (S, A) |
    | ``states`` | list of ints, length (number of steps + 1) |

    Defined in: Learning without a model: Monte Carlo and TD, section Cliff walking.
    """
    S, A = _require_discrete_env(env)
    Q = np.asarray(Q, dtype=np.float64)
    if Q.shape != (S, A):
        raise ValueError(f"Q must have shape ({S}, {A}), got {Q.shape}")
    max_steps = require_int(max_steps, "max_steps", minimum=1)
    policy = greedy_policy(Q)
    s, _ = env.reset(seed=require_int(seed, "seed", minimum=0))
    states, total = [int(s)], 0.0
    for _ in range(max_steps):
        s, r, terminated, truncated, _ = env.step(int(policy[s]))
        states.append(int(s))
        total += r
        if terminated or truncated:
            break
    return states, total


def evaluate_policy(env, policy, num_episodes: int, seed: int | None = None) -> np.ndarray:
    """Play ``num_episodes`` episodes with a fixed policy and return their undiscounted returns.

    For FrozenLake (reward 1 at the goal, 0 otherwise) the mean of the result is the success rate.

    | argument / result | shape |
    | --- | --- |
    | ``policy`` | (S,) integer actions, or (S, A) action probabilities |
    | returns | (num_episodes,) |

    Defined in: Learning without a model: Monte Carlo and TD, section Q-learning on FrozenLake.
    """
    S, A = _require_discrete_env(env)
    policy = _require_policy(policy, S, A)
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    rng = np.random.default_rng(_require_seed(seed))
    cum = np.cumsum(policy, axis=1)
    returns = np.zeros(num_episodes)
    s, _ = env.reset(seed=_first_reset_seed(rng))
    for k in range(num_episodes):
        if k > 0:
            s, _ = env.reset()
        done = False
        while not done:
            s, r, terminated, truncated, _ = env.step(_sample_action(cum[s], rng))
            returns[k] += r
            done = terminated or truncated
    return returns


# --------------------------------------------------------------------------------------------
# Many runs at once: the toy-text model as arrays
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ToyTextModel:
    """A toy-text environment's model ``env.unwrapped.P`` as padded arrays, for batched runs.

    | field | shape |
    | --- | --- |
    | ``prob`` | (S, A, K): probability of outcome k (0 for padding) |
    | ``next_state`` | (S, A, K) int |
    | ``reward`` | (S, A, K) |
    | ``terminated`` | (S, A, K) bool |
    | ``start_probs`` | (S,) initial-state distribution |
    | ``max_episode_steps`` | int or None (the environment's time limit) |

    Defined in: Learning without a model: Monte Carlo and TD, section Many runs at once.
    """

    prob: np.ndarray
    next_state: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    start_probs: np.ndarray
    max_episode_steps: int | None

    @property
    def num_states(self) -> int:
        return self.prob.shape[0]

    @property
    def num_actions(self) -> int:
        return self.prob.shape[1]

    def sample_start(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n,) start states."""
        cum = np.cumsum(self.start_probs)
        s = np.searchsorted(cum, rng.random(n), side="right")
        return np.minimum(s, self.num_states - 1)

    def sample_step(self, s: np.ndarray, a: np.ndarray, rng: np.random.Generator):
        """One step of n runs: ``(next_state, reward, terminated)``, each of shape (n,)."""
        if self.prob.shape[2] == 1:
            k = np.zeros(s.shape, dtype=np.intp)
        else:
            cum = np.cumsum(self.prob[s, a], axis=-1)
            k = np.minimum((rng.random(s.shape)[:, None] >= cum).sum(-1), self.prob.shape[2] - 1)
        return self.next_state[s, a, k], self.reward[s, a, k], self.terminated[s, a, k]


def toy_text_model(env) -> ToyTextModel:
    """Read ``env.unwrapped.P`` (toy-text format: ``P[s][a] = [(prob, next_state, reward,
    terminated), ...]``) and the start distribution into a :class:`ToyTextModel`.

    Defined in: Learning without a model: Monte Carlo and TD, section Many runs at once.
    """
    S, A = _require_discrete_env(env)
    base = env.unwrapped
    P = getattr(base, "P", None)
    if not isinstance(P, dict):
        raise ValueError("env must be a toy-text environment with a model env.unwrapped.P")
    K = max(len(P[s][a]) for s in range(S) for a in range(A))
    prob = np.zeros((S, A, K))
    next_state = np.zeros((S, A, K), dtype=np.intp)
    reward = np.zeros((S, A, K))
    terminated = np.zeros((S, A, K), dtype=bool)
    for s in range(S):
        for a in range(A):
            for k, (p, s2, r, term) in enumerate(P[s][a]):
                prob[s, a, k], next_state[s, a, k] = p, s2
                reward[s, a, k], terminated[s, a, k] = r, term
            next_state[s, a, len(P[s][a]):] = next_state[s, a, 0]
    return ToyTextModel(prob, next_state, reward, terminated, start_distribution(env, S),
                        _time_limit(env))


def _time_limit(env) -> int | None:
    """The ``max_episode_steps`` of the first TimeLimit wrapper around ``env`` (None if none)."""
    while env is not None:
        if isinstance(env, TimeLimit):
            return int(env._max_episode_steps)
        env = getattr(env, "env", None)
    return None


def expected_return(env, policy, horizon: int | None = None) -> float:
    r"""The exact expected undiscounted return of ``policy`` from the start distribution within
    ``horizon`` steps (default: the environment's time limit), by backward induction on the
    toy-text model:

    $$u_0 = 0, \qquad u_h(s) = \sum_a \pi(a \mid s) \sum_{s'} p(s', r \mid s, a)
      \big[r + (1 - d)\,u_{h-1}(s')\big].$$

    For FrozenLake this is the probability of reaching the goal before the time limit.

    | argument | shape |
    | --- | --- |
    | ``policy`` | (S,) integer actions, or (S, A) action probabilities |
    | returns | float |

    Defined in: Learning without a model: Monte Carlo and TD, section Q-learning on FrozenLake.
    """
    model = toy_text_model(env)
    policy = _require_policy(policy, model.num_states, model.num_actions)
    if horizon is None:
        horizon = model.max_episode_steps
        if horizon is None:
            raise ValueError("horizon must be given for an environment without a time limit")
    horizon = require_int(horizon, "horizon", minimum=1)
    u = np.zeros(model.num_states)
    for _ in range(horizon):
        q = (model.prob * (model.reward + (~model.terminated) * u[model.next_state])).sum(-1)
        u = (policy * q).sum(-1)
    return float(model.start_probs @ u)


def best_expected_return(env, horizon: int | None = None):
    r"""The largest expected undiscounted return any policy can get within ``horizon`` steps
    (default: the environment's time limit), by backward induction with the number of steps
    left as part of the state:

    $$u_0 = 0, \qquad u_h(s) = \max_a \sum_{s'} p(s', r \mid s, a)
      \big[r + (1 - d)\,u_{h-1}(s')\big].$$

    The maximising action depends on h: the optimum is a non-stationary policy, which a
    stationary policy (one action per state, as :func:`expected_return` evaluates) can only
    match or fall short of. For FrozenLake this is the best probability of reaching the goal
    before the time limit.

    | result | shape |
    | --- | --- |
    | ``value`` | float: $\sum_s p_0(s)\,u_H(s)$, $p_0$ the start distribution |
    | ``actions`` | (horizon, S) int: row h - 1 is the best action with h steps left (ties: first) |

    Defined in: Learning without a model: Monte Carlo and TD, section Q-learning on FrozenLake.
    """
    model = toy_text_model(env)
    if horizon is None:
        horizon = model.max_episode_steps
        if horizon is None:
            raise ValueError("horizon must be given for an environment without a time limit")
    horizon = require_int(horizon, "horizon", minimum=1)
    u = np.zeros(model.num_states)
    actions = np.empty((horizon, model.num_states), dtype=np.int64)
    for h in range(horizon):
        q = (model.prob * (model.reward + (~model.terminated) * u[model.next_state])).sum(-1)
        actions[h] = np.argmax(q, axis=1)
        u = q.max(axis=1)
    return float(model.start_probs @ u), actions


def _sample_actions(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row of (n, A) probabilities."""
    k = (rng.random(probs.shape[0])[:, None] >= np.cumsum(probs, axis=1)).sum(1)
    return np.minimum(k, probs.shape[1] - 1)


def _epsilon_greedy_batch(q: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Row-wise :func:`epsilon_greedy` for (n, A) action values."""
    n, A = q.shape
    is_max = q == q.max(axis=1, keepdims=True)
    greedy = np.argmax(np.where(is_max, rng.random((n, A)), -1.0), axis=1)
    explore = rng.random(n) < epsilon  # epsilon: a scalar or one rate per row
    return np.where(explore, rng.integers(A, size=n), greedy)


def _batch_setup(env, policy, num_runs, num_episodes, alpha, gamma, V0, seed):
    model = toy_text_model(env)
    S, A = model.num_states, model.num_actions
    policy = _require_policy(policy, S, A)
    num_runs = require_int(num_runs, "num_runs", minimum=1)
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    alpha, gamma = _require_alpha(alpha), require_gamma(gamma)
    V = np.tile(_require_V0(V0, S), (num_runs, 1))
    rng = np.random.default_rng(_require_seed(seed))
    return model, policy, num_runs, num_episodes, alpha, gamma, V, rng


def sample_targets(env, policy, V, state: int, num_samples: int, gamma: float = 1.0,
                   seed: int | None = None):
    r"""Sample the two targets of ``V(state)``: ``num_samples`` episodes start in ``state`` and
    follow ``policy`` (simulated on the toy-text model of ``env``); each gives

    - the Monte Carlo target $G_t = r_{t+1} + \gamma r_{t+2} + \dots$ (the whole return), and
    - the TD target $r_{t+1} + \gamma\,(1 - d_t)\,V(s_{t+1})$ (one step, then the current
      estimate ``V``).

    Their means minus $V^\pi(s)$ are the biases of the two targets, their variances the noise.
    An episode that the environment's time limit truncates after $T$ steps (none does on the
    random walk) has its return completed with $\gamma^T V(s_T)$, as in :func:`mc_prediction`:
    the time limit is not part of the task, so the missing tail is estimated, not dropped.

    | argument / result | shape |
    | --- | --- |
    | ``policy`` | (S, A) or (S,) integer actions |
    | ``V`` | (S,) the current estimates |
    | returns ``(mc_targets, td_targets)`` | ((num_samples,), (num_samples,)) |

    Defined in: Learning without a model: Monte Carlo and TD, section Bias and variance of the two targets.
    """
    model = toy_text_model(env)
    S, A = model.num_states, model.num_actions
    policy = _require_policy(policy, S, A)
    V = np.asarray(V, dtype=np.float64)
    if V.shape != (S,):
        raise ValueError(f"V must have shape ({S},), got {V.shape}")
    state = require_int(state, "state", minimum=0)
    if state >= S:
        raise ValueError(f"state must be in [0, {S}), got {state}")
    N = require_int(num_samples, "num_samples", minimum=1)
    gamma = require_gamma(gamma)
    rng = np.random.default_rng(_require_seed(seed))
    s = np.full(N, state)
    G, discount = np.zeros(N), np.ones(N)
    active = np.ones(N, dtype=bool)
    td = None
    t = 0
    while active.any():
        a = _sample_actions(policy[s], rng)
        s2, r, terminated = model.sample_step(s, a, rng)
        if td is None:
            td = td_target(r, V[s2], terminated, gamma)
        G += np.where(active, discount * r, 0.0)
        discount *= gamma
        t += 1
        active &= ~terminated
        s = s2
        if model.max_episode_steps is not None and t >= model.max_episode_steps:
            # Truncated by the time limit: complete the cut-off return with V(s_T), as
            # mc_prediction does (the only place where the Monte Carlo target bootstraps).
            G += np.where(active, discount * V[s], 0.0)
            break
    return G, td


def td0_prediction_batch(env, policy, num_runs: int, num_episodes: int, alpha: float,
                         gamma: float = 1.0, V0=None, seed: int | None = None) -> np.ndarray:
    r""":func:`td0_prediction` for ``num_runs`` independent runs at once, simulated with numpy on
    the toy-text model of ``env`` (the environment itself is not stepped).

    | argument / result | shape |
    | --- | --- |
    | ``policy`` | (S, A) or (S,) integer actions |
    | ``V0`` | (S,) |
    | returns ``V_history`` | (num_episodes + 1, num_runs, S) |

    Defined in: Learning without a model: Monte Carlo and TD, section Many runs at once.
    """
    model, policy, N, num_episodes, alpha, gamma, V, rng = _batch_setup(
        env, policy, num_runs, num_episodes, alpha, gamma, V0, seed)
    history = np.empty((num_episodes + 1, N, model.num_states))
    history[0] = V
    for k in progress(range(num_episodes), desc=f"TD(0) alpha={alpha}"):
        _td0_episodes(model, policy, V, alpha, gamma, rng)
        history[k + 1] = V
    return history


def _td0_episodes(model, policy, V, alpha, gamma, rng):
    """One episode of TD(0) in each of N runs at once, updating the (N, S) values V in place:
    the pseudocode of section TD(0) prediction, with one row of V per run.

    Defined in: Learning without a model: Monte Carlo and TD, section Many runs at once.
    """
    runs = np.arange(V.shape[0])
    s = model.sample_start(V.shape[0], rng)                  # s_0 of every run
    active = np.ones(V.shape[0], dtype=bool)                  # runs whose episode goes on
    t = 0
    while active.any():
        a = _sample_actions(policy[s], rng)                   # a ~ pi(. | s)
        s2, r, d = model.sample_step(s, a, rng)               # r, s', terminated
        target = td_target(r, V[runs, s2], d, gamma)          # r + gamma (1 - d) V(s')
        V[runs, s] = np.where(active, td_update(V[runs, s], target, alpha), V[runs, s])
        t += 1
        truncated = model.max_episode_steps is not None and t >= model.max_episode_steps
        active &= ~d & (not truncated)
        s = s2


def mc_prediction_batch(env, policy, num_runs: int, num_episodes: int, alpha: float,
                        gamma: float = 1.0, first_visit: bool = True, V0=None,
                        seed: int | None = None) -> np.ndarray:
    r""":func:`mc_prediction` for ``num_runs`` independent runs at once, simulated with numpy on
    the toy-text model of ``env``.

    | argument / result | shape |
    | --- | --- |
    | ``policy`` | (S, A) or (S,) integer actions |
    | ``V0`` | (S,) |
    | returns ``V_history`` | (num_episodes + 1, num_runs, S) |

    Defined in: Learning without a model: Monte Carlo and TD, section Many runs at once.
    """
    model, policy, N, num_episodes, alpha, gamma, V, rng = _batch_setup(
        env, policy, num_runs, num_episodes, alpha, gamma, V0, seed)
    if not isinstance(first_visit, (bool, np.bool_)):
        raise ValueError(f"first_visit must be True or False, got {first_visit!r}")
    rows = np.arange(N)
    history = np.empty((num_episodes + 1, N, model.num_states))
    history[0] = V
    for k in progress(range(num_episodes), desc=f"MC alpha={alpha}"):
        s = model.sample_start(N, rng)
        active = np.ones(N, dtype=bool)
        seen = np.zeros((N, model.num_states), dtype=bool)
        tail = np.zeros(N)  # G_T: 0 after termination, V(s_T) after a truncation
        states, rewards, inside, updates = [], [], [], []
        t = 0
        while active.any():
            a = _sample_actions(policy[s], rng)
            s2, r, terminated = model.sample_step(s, a, rng)
            t += 1
            first = ~seen[rows, s]
            seen[rows, s] = True
            states.append(s)
            rewards.append(r)
            inside.append(active.copy())
            updates.append(active & (first | (not first_visit)))
            truncated = model.max_episode_steps is not None and t >= model.max_episode_steps
            if truncated:
                tail = np.where(active & ~terminated, V[rows, s2], tail)
            active &= ~terminated & (not truncated)
            s = s2
        # Backward in time, as in mc_prediction: G_t = r_{t+1} + gamma G_{t+1} inside each run's
        # episode; steps after a run's episode ended leave G and V alone.
        G = tail
        for st, r, ins, upd in zip(states[::-1], rewards[::-1], inside[::-1], updates[::-1]):
            G = np.where(ins, r + gamma * G, G)
            V[rows, st] = np.where(upd, td_update(V[rows, st], G, alpha), V[rows, st])
        history[k + 1] = V
    return history


def td_control_batch(env, method: str, num_runs: int, num_episodes: int, alpha: float,
                     epsilon: float, gamma: float = 1.0, seed: int | None = None, *,
                     epsilon_decay: float = 0.0, alpha_decay: float = 0.0,
                     epsilon_clock: str = "episode"):
    r""":func:`sarsa`, :func:`q_learning` or :func:`expected_sarsa` (``method``) for ``num_runs``
    independent runs at once, simulated with numpy on the toy-text model of ``env``.

    Each run plays its own episodes back to back (a run whose episode ends starts the next one at
    once), so the runs need not stay in step; a run stops after ``num_episodes`` episodes.

    Schedules (both off by default): the n-th update of a pair (s, a) uses the step
    $\alpha_n = \alpha / n^{\text{alpha\_decay}}$; with ``0.5 < alpha_decay <= 1`` the steps
    satisfy Robbins and Monro's conditions ($\sum_n \alpha_n = \infty$,
    $\sum_n \alpha_n^2 < \infty$). The exploration rate decays with a clock:
    ``epsilon_clock="episode"`` uses $\epsilon_k = \epsilon / k^{\text{epsilon\_decay}}$ in
    episode k = 1, 2, ...; ``epsilon_clock="state"`` uses
    $\epsilon / n(s)^{\text{epsilon\_decay}}$ when acting in s for the n(s)-th time. The
    state clock with ``epsilon_decay = 1`` is Singh et al.'s (2000) GLIE example: greedy in the
    limit, and every action of a state visited infinitely often is tried infinitely often
    ($\sum_n 1/n = \infty$ at that state). The episode clock need not be GLIE: a pair that can
    only be reached by m >= 2 exploratory choices within one episode is tried with
    probability of order $\epsilon_k^m$, whose sum over k is finite for ``epsilon_decay = 1``.

    ``alpha`` is a float or a (num_runs,) array, one step size per run (a sweep over the step
    size in one call, as in the chapter's interim-performance figure).

    | result | shape |
    | --- | --- |
    | ``Q`` | (num_runs, S, A) |
    | ``episode_returns`` | (num_runs, num_episodes): undiscounted sum of rewards as played |

    Defined in: Learning without a model: Monte Carlo and TD, section Many runs at once.
    """
    if method not in CONTROL_METHODS:
        raise ValueError(f"method must be one of {CONTROL_METHODS}, got {method!r}")
    model = toy_text_model(env)
    N = require_int(num_runs, "num_runs", minimum=1)
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    if np.ndim(alpha) == 1:  # one step size per run: a sweep over alpha in a single call
        alpha = _run_alphas(alpha, num_runs)
    else:
        alpha = _require_alpha(alpha)
    epsilon0 = _require_epsilon(epsilon)
    gamma = require_gamma(gamma)
    epsilon_decay = require_in_range(epsilon_decay, "epsilon_decay", 0.0, 10.0)
    alpha_decay = require_in_range(alpha_decay, "alpha_decay", 0.0, 10.0)
    if epsilon_clock not in ("episode", "state"):
        raise ValueError(f"epsilon_clock must be 'episode' or 'state', got {epsilon_clock!r}")
    by_state = epsilon_clock == "state" and epsilon_decay > 0
    rng = np.random.default_rng(_require_seed(seed))
    rows = np.arange(N)
    Q = np.zeros((N, model.num_states, model.num_actions))
    visits = np.zeros(Q.shape)
    state_visits = np.zeros((N, model.num_states))  # n(s): actions taken in s so far

    def epsilon_at(run_rows, states):  # the exploration rate of the next action in `states`
        if not by_state:
            return epsilon[run_rows]
        return epsilon0 / (state_visits[run_rows, states] + 1.0) ** epsilon_decay

    episode_returns = np.zeros((N, num_episodes))
    episode = np.zeros(N, dtype=np.intp)
    G = np.zeros(N)
    t = np.zeros(N, dtype=np.intp)
    s = model.sample_start(N, rng)
    epsilon = np.full(N, epsilon0)  # epsilon_1 = epsilon for every run
    a = _epsilon_greedy_batch(Q[rows, s], epsilon_at(rows, s), rng)
    bar = progress(total=N * num_episodes, desc=method)
    while (episode < num_episodes).any():
        active = episode < num_episodes
        s2, r, terminated = model.sample_step(s, a, rng)
        state_visits[rows, s] += active
        eps_next = epsilon_at(rows, s2)
        if alpha_decay > 0:
            visits[rows, s, a] += active
            step = alpha / np.maximum(visits[rows, s, a], 1.0) ** alpha_decay
        else:
            step = alpha
        G += r
        t += 1
        q_next = Q[rows, s2]
        if method == "sarsa":
            a2 = _epsilon_greedy_batch(q_next, eps_next, rng)
            target = sarsa_target(r, q_next, a2, terminated, gamma)
        elif method == "q_learning":
            target = q_learning_target(r, q_next, terminated, gamma)
        else:
            is_max = q_next == q_next.max(axis=1, keepdims=True)
            probs = (eps_next[:, None] / q_next.shape[1]
                     + (1.0 - eps_next[:, None]) * is_max / is_max.sum(axis=1, keepdims=True))
            target = td_target(r, (probs * q_next).sum(axis=1), terminated, gamma)
        Q_sa = Q[rows, s, a]
        Q[rows, s, a] = np.where(active, Q_sa + step * (target - Q_sa), Q_sa)
        if method != "sarsa":  # choose the next action after the update, from the updated Q
            a2 = _epsilon_greedy_batch(Q[rows, s2], eps_next, rng)
        truncated = (model.max_episode_steps is not None) & (t >= (model.max_episode_steps or 0))
        done = (terminated | truncated) & active
        if done.any():
            idx = np.flatnonzero(done)
            episode_returns[idx, episode[idx]] = G[idx]
            episode[idx] += 1
            G[idx], t[idx] = 0.0, 0
            if epsilon_decay > 0:
                epsilon[idx] = epsilon0 / (episode[idx] + 1.0) ** epsilon_decay
            s2 = s2.copy()
            s2[idx] = model.sample_start(idx.size, rng)
            a2[idx] = _epsilon_greedy_batch(Q[idx, s2[idx]], epsilon_at(idx, s2[idx]), rng)
            bar.update(idx.size)
        s, a = s2, a2
    bar.close()
    return Q, episode_returns


# --------------------------------------------------------------------------------------------
# n-step TD: from TD(0) to Monte Carlo
# --------------------------------------------------------------------------------------------

def n_step_returns(rewards, values, dones, last_value, gamma: float, n: int):
    r"""The n-step returns of a rollout, time first (the convention of ``rlnotes.returns``):

    $$G^{(n)}_t = \sum_{k=0}^{h-1} \gamma^k r_{t+k+1} + \gamma^h\,V(s_{t+h}),
      \qquad h = \min(n, T - t),$$

    where the sum stops at the first transition with ``dones = 1`` (then nothing is
    bootstrapped), ``values[t]`` is $V(s_t)$ and ``last_value`` is $V(s_T)$. ``n = 1`` gives the
    TD(0) targets $r_{t+1} + \gamma (1 - d_t) V(s_{t+1})$; ``n >= T`` gives the Monte Carlo
    returns completed with $V(s_T)$ (which ``rlnotes.returns.gae`` with $\lambda = 1$ also gives).

    | argument | shape |
    | --- | --- |
    | ``rewards``, ``values``, ``dones`` | (T,) or (T, N); ``rewards[t]`` is $r_{t+1}$ |
    | ``last_value`` | () or (N,) |
    | ``n`` | int >= 1 |
    | returns | like ``rewards`` |

    Defined in: Learning without a model: Monte Carlo and TD, section n-step TD.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    dones = np.asarray(dones, dtype=np.float64)
    if rewards.ndim not in (1, 2) or rewards.shape[0] == 0:
        raise ValueError(f"rewards must have shape (T,) or (T, N) with T >= 1, got {rewards.shape}")
    if values.shape != rewards.shape or dones.shape != rewards.shape:
        raise ValueError(f"values and dones must have the shape of rewards {rewards.shape}, got "
                         f"{values.shape} and {dones.shape}")
    if not np.all((dones == 0) | (dones == 1)):
        raise ValueError("dones must hold 0 or 1")
    last_value = np.asarray(last_value, dtype=np.float64)
    if last_value.shape != rewards.shape[1:]:
        raise ValueError(f"last_value must have shape {rewards.shape[1:]}, got {last_value.shape}")
    gamma = require_gamma(gamma)
    n = require_int(n, "n", minimum=1)
    return _n_step_returns_core(rewards, values, dones, last_value, gamma, n)


def _n_step_returns_core(rewards, values, dones, last_value, gamma, n):
    """G^(n)_t for every t of a rollout, time first, by the recursion
    G^(m)_t = r_{t+1} + gamma (1 - d_t) G^(m-1)_{t+1}, starting from G^(0)_t = V(s_t); at the end
    of the rollout the target bootstraps from G_T = V(s_T) = last_value.

    Defined in: Learning without a model: Monte Carlo and TD, section n-step TD.
    """
    G = np.concatenate([values, last_value[None]])           # G^(0)_t = V(s_t), t = 0..T
    for _ in range(min(n, rewards.shape[0])):                 # after T rounds nothing changes
        G = np.concatenate([rewards + gamma * (1.0 - dones) * G[1:], last_value[None]])
    return G[:-1]


def n_step_td_prediction_batch(env, policy, n: int, num_runs: int, num_episodes: int,
                               alpha: float, gamma: float = 1.0, V0=None,
                               seed: int | None = None) -> np.ndarray:
    r"""Online n-step TD prediction (Sutton and Barto, section 7.1) for ``num_runs`` runs at once
    on the toy-text model of ``env``: the state visited at time $t$ is updated at time $t + n$
    (or when the episode ends),

    $$V(s_t) \leftarrow V(s_t) + \alpha\,\big[G^{(n)}_t - V(s_t)\big],$$

    with $G^{(n)}_t$ as in :func:`n_step_returns`, bootstrapped from the estimate of
    $V(s_{t+n})$ at the time of the update. ``n = 1`` is TD(0); ``n`` at least the longest
    episode is every-visit constant-alpha Monte Carlo.

    | argument / result | shape |
    | --- | --- |
    | ``alpha`` | a float, or (num_runs,): one step size per run |
    | ``policy`` | (S, A) or (S,) integer actions |
    | ``V0`` | (S,) |
    | returns ``V_history`` | (num_episodes + 1, num_runs, S) |

    Defined in: Learning without a model: Monte Carlo and TD, section n-step TD.
    """
    n = require_int(n, "n", minimum=1)
    alphas = None
    if np.ndim(alpha) == 1:  # one step size per run: a sweep over alpha in a single call
        alphas = _run_alphas(alpha, num_runs)
        alpha = float(alphas[0])
    model, policy, N, num_episodes, alpha, gamma, V, rng = _batch_setup(
        env, policy, num_runs, num_episodes, alpha, gamma, V0, seed)
    if alphas is not None:
        alpha = alphas
    rows = np.arange(N)
    limit = model.max_episode_steps
    history = np.empty((num_episodes + 1, N, model.num_states))
    history[0] = V
    for k in progress(range(num_episodes), desc=f"{n}-step TD"):
        s = model.sample_start(N, rng)
        states = np.empty((64, N), dtype=np.intp)   # s_0, s_1, ... (grown as needed)
        rewards = np.zeros((64, N))                  # rewards[i] = r_{i+1}
        states[0] = s
        T = np.full(N, np.iinfo(np.int64).max)   # episode length, once known
        bootstrap_end = np.zeros(N, dtype=bool)  # ended by the time limit: bootstrap from s_T
        t = 0
        while True:
            if t + 2 > states.shape[0]:
                states = np.concatenate([states, np.empty_like(states)])
                rewards = np.concatenate([rewards, np.zeros_like(rewards)])
            running = t < T
            if running.any():
                a = _sample_actions(policy[s], rng)
                s2, r, terminated = model.sample_step(s, a, rng)
                s2 = np.where(running, s2, s)
                truncated = limit is not None and t + 1 >= limit
                ends = running & (terminated | truncated)
                bootstrap_end |= ends & ~terminated
                T = np.where(ends, t + 1, T)
                states[t + 1], rewards[t] = s2, np.where(running, r, 0.0)
                s = s2
            else:
                states[t + 1], rewards[t] = s, 0.0
            tau = t + 1 - n
            if tau >= 0:
                upd = tau < T
                hi = min(tau + n, t + 1)
                i = np.arange(tau, hi)
                G = ((gamma ** (i - tau))[:, None] * rewards[tau:hi]
                     * (i[:, None] < T[None, :])).sum(axis=0)
                end = np.minimum(tau + n, T)
                boot = (tau + n < T) | bootstrap_end
                G += np.where(boot, gamma ** (end - tau) * V[rows, states[np.minimum(end, t + 1), rows]],
                              0.0)
                s_tau = states[tau]
                V[rows, s_tau] = np.where(upd, V[rows, s_tau] + alpha * (G - V[rows, s_tau]),
                                          V[rows, s_tau])
                if not (tau + 1 < T).any():
                    break
            t += 1
        history[k + 1] = V
    return history


# --------------------------------------------------------------------------------------------
# Batch updating: what TD and Monte Carlo converge to on a fixed data set
# --------------------------------------------------------------------------------------------

def batch_prediction(env, policy, num_runs: int, num_episodes: int, gamma: float = 1.0,
                     tol: float = 1e-10, seed: int | None = None):
    r"""Batch TD(0) and batch every-visit Monte Carlo on the same growing data sets
    (Sutton and Barto, section 6.3), ``num_runs`` independent runs at once on the toy-text
    model of ``env``.

    After each new episode, both methods sweep the whole data set again and again, summing the
    increments of their update over every recorded step before applying them, until V stops
    changing (by less than ``tol``):

    $$V(s) \leftarrow V(s) + \frac{1}{n(s)} \sum_{t:\,s_t = s} \big[\text{target}_t - V(s)\big],$$

    with the TD(0) target $r_{t+1} + \gamma (1 - d_t) V(s_{t+1})$ or the MC target $G_t$, and
    $n(s)$ the number of recorded visits of s (any small enough step gives the same limit; this
    one makes a sweep one application of the empirical Bellman backup). States never visited
    keep the value 0. Episodes must terminate (a time limit is refused).

    | result | shape |
    | --- | --- |
    | ``(V_td, V_mc)`` | two (num_episodes, num_runs, S) arrays: row k after k + 1 episodes |

    Defined in: Learning without a model: Monte Carlo and TD, section Batch updating: what TD and
    Monte Carlo converge to.
    """
    model = toy_text_model(env)
    S, A = model.num_states, model.num_actions
    policy = _require_policy(policy, S, A)
    N = require_int(num_runs, "num_runs", minimum=1)
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    gamma = require_gamma(gamma)
    tol = require_in_range(tol, "tol", 0.0, 1.0, low_open=True)
    if model.max_episode_steps is not None:
        raise ValueError("env must have no time limit: batch updating needs whole episodes")
    rng = np.random.default_rng(_require_seed(seed))
    rows = np.arange(N)
    visits = np.zeros((N, S))          # n(s)
    reward_sum = np.zeros((N, S))      # sum of r_{t+1} over visits of s
    next_count = np.zeros((N, S, S))   # visits of s followed by a non-terminal s'
    return_sum = np.zeros((N, S))      # sum of G_t over visits of s
    V_td, V_mc = np.zeros((N, S)), np.zeros((N, S))
    out_td, out_mc = np.empty((num_episodes, N, S)), np.empty((num_episodes, N, S))
    for k in progress(range(num_episodes), desc="batch updating"):
        s = model.sample_start(N, rng)
        active = np.ones(N, dtype=bool)
        steps = []
        for _ in range(100_000):
            a = _sample_actions(policy[s], rng)
            s2, r, terminated = model.sample_step(s, a, rng)
            steps.append((s, r, active.copy()))
            np.add.at(visits, (rows, s), active)
            np.add.at(reward_sum, (rows, s), np.where(active, r, 0.0))
            np.add.at(next_count, (rows, s, s2), active & ~terminated)
            active &= ~terminated
            s = s2
            if not active.any():
                break
        else:
            raise ValueError("an episode ran 100000 steps without terminating")
        G = np.zeros(N)
        for s_t, r_t, inside in reversed(steps):
            G = np.where(inside, r_t + gamma * G, G)
            np.add.at(return_sum, (rows, s_t), np.where(inside, G, 0.0))
        seen = visits > 0
        n = np.maximum(visits, 1.0)
        V_mc = np.where(seen, return_sum / n, 0.0)
        for _ in range(100_000):  # the batch TD sweeps, all runs at once
            V_new = np.where(seen, (reward_sum + gamma * np.einsum("nst,nt->ns", next_count, V_td)) / n,
                             0.0)
            change = np.abs(V_new - V_td).max()
            V_td = V_new
            if change < tol:
                break
        out_td[k], out_mc[k] = V_td, V_mc
    return out_td, out_mc


# --------------------------------------------------------------------------------------------
# Monte Carlo control
# --------------------------------------------------------------------------------------------

def mc_control_batch(env, num_runs: int, num_episodes: int, gamma: float = 1.0, *,
                     epsilon: float = 0.0, exploring_starts: bool = False, max_steps: int = 100,
                     seed: int | None = None):
    r"""First-visit Monte Carlo control with sample averages (Sutton and Barto, sections
    5.3-5.4), ``num_runs`` runs at once on the toy-text model of ``env``: play an episode with
    the current policy, then for the first visit of each pair $(s_t, a_t)$

    $$n(s_t, a_t) \leftarrow n(s_t, a_t) + 1, \qquad
      Q(s_t, a_t) \leftarrow Q(s_t, a_t) + \frac{G_t - Q(s_t, a_t)}{n(s_t, a_t)},$$

    and act greedily on the new Q (ties at random). Two ways to keep exploring:

    - ``exploring_starts=True``: each episode starts in a pair $(s_0, a_0)$ drawn uniformly
      over all non-terminal states and all actions, then follows the greedy policy;
    - ``epsilon > 0``: an on-policy $\epsilon$-soft policy, $\epsilon$-greedy in Q.

    Episodes are cut after ``max_steps`` steps (a greedy policy may loop forever); the return
    of a cut episode is completed with $\gamma^{T} \max_a Q(s_T, a)$.

    | result | shape |
    | --- | --- |
    | ``Q`` | (num_runs, S, A) |

    Defined in: Learning without a model: Monte Carlo and TD, section Monte Carlo control.
    """
    model = toy_text_model(env)
    S, A = model.num_states, model.num_actions
    N = require_int(num_runs, "num_runs", minimum=1)
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    gamma = require_gamma(gamma)
    epsilon = _require_epsilon(epsilon)
    if not isinstance(exploring_starts, (bool, np.bool_)):
        raise ValueError(f"exploring_starts must be True or False, got {exploring_starts!r}")
    if not exploring_starts and epsilon == 0.0:
        raise ValueError("epsilon must be > 0 without exploring_starts: a greedy policy alone "
                         "stops exploring")
    max_steps = require_int(max_steps, "max_steps", minimum=1)
    rng = np.random.default_rng(_require_seed(seed))
    rows = np.arange(N)
    absorbing = np.all(model.terminated[..., 0] | (model.next_state[..., 0] == np.arange(S)[:, None])
                       & (model.prob[..., 0] == 1.0) & (model.reward[..., 0] == 0.0), axis=1)
    starts = np.flatnonzero(~absorbing)
    Q = np.zeros((N, S, A))
    counts = np.zeros((N, S, A))
    for _ in progress(range(num_episodes), desc="MC control"):
        if exploring_starts:
            s = starts[rng.integers(starts.size, size=N)]
            a = rng.integers(A, size=N)
        else:
            s = model.sample_start(N, rng)
            a = _epsilon_greedy_batch(Q[rows, s], epsilon, rng)
        active = np.ones(N, dtype=bool)
        steps = []
        for _t in range(max_steps):
            s2, r, terminated = model.sample_step(s, a, rng)
            steps.append((s, a, r, active.copy()))
            active &= ~terminated
            s = s2
            a = _epsilon_greedy_batch(Q[rows, s], epsilon, rng)
            if not active.any():
                break
        G = np.where(active, Q[rows, s].max(axis=1), 0.0)   # cut episodes: complete with Q
        first = np.zeros((len(steps), N), dtype=bool)
        seen = np.zeros((N, S, A), dtype=bool)
        for t, (s_t, a_t, _, inside) in enumerate(steps):
            first[t] = inside & ~seen[rows, s_t, a_t]
            seen[rows, s_t, a_t] |= inside
        for t in reversed(range(len(steps))):
            s_t, a_t, r_t, inside = steps[t]
            G = np.where(inside, r_t + gamma * G, G)
            upd = first[t]
            counts[rows, s_t, a_t] += upd
            n = np.maximum(counts[rows, s_t, a_t], 1.0)
            Q[rows, s_t, a_t] = np.where(upd, Q[rows, s_t, a_t] + (G - Q[rows, s_t, a_t]) / n,
                                         Q[rows, s_t, a_t])
    return Q


# --------------------------------------------------------------------------------------------
# Off-policy Monte Carlo: importance sampling
# --------------------------------------------------------------------------------------------

def importance_sampling_estimates(ratios, returns):
    r"""Running ordinary and weighted importance-sampling estimates of $V^\pi(s)$ from the
    first-visit returns $G_i$ of $s$ in episodes $i = 1, 2, \dots$ played with a behaviour
    policy b, each with its ratio $\rho_i = \prod_t \pi(a_t \mid s_t) / b(a_t \mid s_t)$ over
    the actions from the visit to the end (Sutton and Barto, section 5.5):

    $$V^{\text{ord}}_n = \frac{\sum_{i \le n} \rho_i G_i}{n}, \qquad
      V^{\text{wtd}}_n = \frac{\sum_{i \le n} \rho_i G_i}{\sum_{i \le n} \rho_i}
      \quad (0 \text{ while } \textstyle\sum_{i \le n} \rho_i = 0).$$

    | argument / result | shape |
    | --- | --- |
    | ``ratios`` | (..., n) ratios $\rho_i \ge 0$, episodes on the last axis |
    | ``returns`` | (..., n) returns $G_i$ |
    | returns ``(ordinary, weighted)`` | two arrays of the same shape: estimates after 1..n |

    Defined in: Learning without a model: Monte Carlo and TD, section Off-policy Monte Carlo:
    ordinary and weighted importance sampling.
    """
    ratios = np.asarray(ratios, dtype=np.float64)
    returns = np.asarray(returns, dtype=np.float64)
    if ratios.ndim < 1 or ratios.shape[-1] == 0:
        raise ValueError(f"ratios must have at least one episode on the last axis, got {ratios.shape}")
    if returns.shape != ratios.shape:
        raise ValueError(f"returns must have the shape of ratios {ratios.shape}, got {returns.shape}")
    if not np.all(np.isfinite(ratios)) or ratios.min() < 0:
        raise ValueError("ratios must be finite and >= 0")
    if not np.all(np.isfinite(returns)):
        raise ValueError("returns must be finite")
    weighted_sum = np.cumsum(ratios * returns, axis=-1)
    weight_sum = np.cumsum(ratios, axis=-1)
    n = np.arange(1, ratios.shape[-1] + 1)
    weighted = np.divide(weighted_sum, weight_sum, out=np.zeros_like(weighted_sum),
                         where=weight_sum > 0)
    return weighted_sum / n, weighted


def infinite_variance_episodes(num_runs: int, num_episodes: int, seed: int | None = None):
    r"""Episodes of Sutton and Barto's Example 5.5, summarised by their ratio and return.

    One non-terminal state, two actions. *right* ends the episode with reward 0; *left* ends it
    with probability 0.1 and reward +1, and otherwise returns to the state with reward 0. The
    target policy always goes left ($V^\pi = 1$); the behaviour policy picks each action with
    probability 1/2. An episode with $T$ steps that ends on the left has
    $\rho = \prod_t \pi(a_t) / b(a_t) = 2^T$ and $G = 1$; one that ends on the right has
    $\rho = 0$ (and $G = 0$). So $\E_b[\rho G] = 1$, but $\E_b[(\rho G)^2] =
    \sum_T 0.05 \cdot 0.45^{T-1} \cdot 4^T = \infty$: ordinary importance sampling has
    infinite variance.

    | argument / result | shape |
    | --- | --- |
    | returns ``(ratios, returns)`` | two (num_runs, num_episodes) arrays |

    Defined in: Learning without a model: Monte Carlo and TD, section Off-policy Monte Carlo:
    ordinary and weighted importance sampling.
    """
    N = require_int(num_runs, "num_runs", minimum=1)
    n = require_int(num_episodes, "num_episodes", minimum=1)
    rng = np.random.default_rng(_require_seed(seed))
    # each step: left and stay (0.45), left and end with +1 (0.05), right and end with 0 (0.5)
    T = rng.geometric(0.55, size=(N, n))                       # steps until the episode ends
    ends_left = rng.random((N, n)) < 0.05 / 0.55               # the last step was "left"
    G = ends_left.astype(np.float64)
    ratios = np.where(ends_left, 2.0 ** T, 0.0)                # pi(left)/b(left) = 2 per step
    return ratios, G


def off_policy_mc_control(env, num_episodes: int, gamma: float = 1.0, seed: int | None = None,
                          max_steps: int = 100_000):
    r"""Off-policy Monte Carlo control with incremental weighted importance sampling (Sutton
    and Barto, section 5.7), on the toy-text model of ``env``. The behaviour policy b is
    uniformly random; the target policy $\pi$ is greedy in Q (ties to the first action).
    After each episode, backwards from its end, with $W = 1$ and $G = 0$:

    $$G \leftarrow \gamma G + r_{t+1}, \quad C(s_t, a_t) \leftarrow C(s_t, a_t) + W, \quad
      Q(s_t, a_t) \leftarrow Q(s_t, a_t) + \frac{W}{C(s_t, a_t)}\,[G - Q(s_t, a_t)],$$

    then stop the episode's updates if $a_t \ne \pi(s_t)$ (the ratio of what came before is
    0), else $W \leftarrow W / b(a_t \mid s_t)$. The ratio of step t starts at t + 1: Q is
    conditioned on $a_t$. Episodes must end (the environment's time limit is ignored: a cut
    episode would need a bootstrap, which is not Monte Carlo); one still running after
    ``max_steps`` raises ``ValueError``.

    | result | shape |
    | --- | --- |
    | ``(Q, policy)`` | ((S, A), (S,)): the action values and the greedy target policy |

    Defined in: Learning without a model: Monte Carlo and TD, section Off-policy Monte Carlo
    control.
    """
    model = toy_text_model(env)
    S, A = model.num_states, model.num_actions
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    gamma = require_gamma(gamma)
    max_steps = require_int(max_steps, "max_steps", minimum=1)
    rng = np.random.default_rng(_require_seed(seed))
    Q, C = np.zeros((S, A)), np.zeros((S, A))
    _off_policy_mc_core(model, Q, C, num_episodes, gamma, max_steps, rng)
    return Q, np.argmax(Q, axis=1)


def _off_policy_mc_core(model, Q, C, num_episodes, gamma, max_steps, rng):
    """The episode loop of off_policy_mc_control: updates Q and C in place."""
    A = model.num_actions
    for _ in progress(range(num_episodes), desc="off-policy MC"):
        s, episode = int(model.sample_start(1, rng)[0]), []
        for _t in range(max_steps):                            # play with b: uniform
            a = int(rng.integers(A))
            s2, r, d = (x[0] for x in model.sample_step(np.array([s]), np.array([a]), rng))
            episode.append((s, a, float(r)))
            s = int(s2)
            if d:
                break
        else:
            raise ValueError(f"an episode ran max_steps={max_steps} steps without ending")
        G, W = 0.0, 1.0
        for s, a, r in reversed(episode):
            G = gamma * G + r
            C[s, a] += W
            Q[s, a] += W / C[s, a] * (G - Q[s, a])
            if a != np.argmax(Q[s]):                           # pi(a | s) = 0: ratio 0 before
                break
            W *= A                            # W <- W pi(a|s) / b(a|s), pi = 1, b = 1/A


def batch_td_mc(episodes, num_states: int, gamma: float = 1.0, alpha: float = 0.05,
                tol: float = 1e-12, max_sweeps: int = 1_000_000):
    r"""Batch TD(0) and batch every-visit Monte Carlo on a fixed list of episodes (Sutton and
    Barto, section 6.3): sweep the whole batch again and again, summing the increments
    $\alpha\,[\text{target}_t - V(s_t)]$ over every recorded step before applying them, until
    the largest change is below ``tol``. The TD(0) target is $r_{t+1} + \gamma (1 - d_t)
    V(s_{t+1})$, the Monte Carlo target the return $G_t$. States never left keep 0.

    | argument / result | shape |
    | --- | --- |
    | ``episodes`` | list of episodes, each a list of transitions ``(s, a, r, s2, terminated)`` |
    | returns ``(V_td, V_mc)`` | ((num_states,), (num_states,)) |

    Defined in: Learning without a model: Monte Carlo and TD, section You are the predictor.
    """
    S = require_int(num_states, "num_states", minimum=1)
    gamma = require_gamma(gamma)
    alpha = _require_alpha(alpha)
    tol = require_in_range(tol, "tol", 0.0, 1.0, low_open=True)
    max_sweeps = require_int(max_sweeps, "max_sweeps", minimum=1)
    if not isinstance(episodes, (list, tuple)) or len(episodes) == 0:
        raise ValueError("episodes must be a non-empty list of episodes")
    steps = []
    for i, episode in enumerate(episodes):
        if len(episode) == 0:
            raise ValueError(f"episodes[{i}] is empty")
        G, returns = 0.0, []
        for s, a, r, s2, terminated in reversed(episode):
            if not (0 <= int(s) < S and 0 <= int(s2) < S):
                raise ValueError(f"episodes[{i}] has a state outside [0, {S})")
            G = float(r) + gamma * G
            returns.append((int(s), float(r), int(s2), bool(terminated), G))
        if not returns[0][3]:
            raise ValueError(f"episodes[{i}] does not end with a terminated transition")
        steps += returns
    s, r, s2, d, G = (np.array(x) for x in zip(*steps))
    V_td, V_mc = np.zeros(S), np.zeros(S)
    for _ in range(max_sweeps):
        inc_td = np.bincount(s, alpha * (r + gamma * (1 - d) * V_td[s2] - V_td[s]), minlength=S)
        inc_mc = np.bincount(s, alpha * (G - V_mc[s]), minlength=S)
        V_td, V_mc = V_td + inc_td, V_mc + inc_mc
        if max(np.abs(inc_td).max(), np.abs(inc_mc).max()) < tol:
            return V_td, V_mc
    raise ValueError(f"max_sweeps={max_sweeps} sweeps were not enough (use a smaller alpha)")
