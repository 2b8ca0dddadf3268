"""Finite Markov decision processes and dynamic programming.

A :class:`TabularMDP` holds the model of a finite MDP: the transition tensor ``P`` of shape
(S, A, S) with ``P[s, a, s2] = Pr(s2 | s, a)``, the expected reward ``R`` of shape (S, A) and the
discount ``gamma``. The solvers below compute values and policies from that model:

=================================  ===========================================================
``policy_evaluation``              V^pi by an exact linear solve (Bellman expectation equation)
``iterative_policy_evaluation``    V^pi by repeated Bellman expectation backups
``q_values``                       Q from V by a one-step look-ahead
``greedy_policy``                  the greedy (S,) policy of V, ties to the lowest action index
``policy_iteration``               Howard's policy iteration: evaluate, improve, repeat
``value_iteration``                repeated Bellman optimality backups, stopped with a proof
=================================  ===========================================================

Array kinds: every function takes numpy arrays or torch tensors and returns the kind it was
given (for the solvers: the kind of ``mdp.P``), in the input's floating dtype and on its device.
The arithmetic itself runs in float64 numpy on the CPU: these are small tables, and float64 is
what makes a tolerance of 1e-10 meaningful.

Discounting and gamma = 1: with ``gamma < 1`` every value is finite and every solver converges.
With ``gamma = 1`` values are finite only for episodic problems, so the rules are:

* ``TabularMDP`` rejects ``gamma = 1`` unless from every state some sequence of actions reaches,
  with positive probability, the *absorbing set*: the largest set of states that no action
  leaves and in which every reward is zero (terminal states).
* ``policy_evaluation`` with ``gamma = 1`` sets V = 0 on the states that the policy keeps, with
  zero reward, in a closed set (terminal states, or a zero-reward loop) and solves the linear
  system on the others; if some state never reaches such a set under the policy, its return is
  not finite and a ``ValueError`` naming gamma is raised.
* ``value_iteration`` with ``gamma = 1`` accepts its result only when the greedy policy, evaluated
  exactly, satisfies the Bellman optimality equation within ``tol``; if the sweeps stop shrinking
  (a loop that earns reward forever) it raises a ``ValueError`` naming gamma. A solution of the
  optimality equation is V* when the stochastic-shortest-path conditions hold (Bertsekas and
  Tsitsiklis: some policy terminates from every state, and every policy that does not has
  return -infinity from some state); with a zero-reward loop the equation can have many
  solutions, and the check is no proof of optimality (the chapter shows a two-state example).

Defined in: MDPs and dynamic programming.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import torch

from rlnotes._validate import as_array, is_tensor, require_finite, require_int, require_real

__all__ = [
    "PROB_ATOL",
    "PROB_ATOL_LOW",
    "TIE_ATOL",
    "TabularMDP",
    "bellman_expectation_backup",
    "bellman_optimality_backup",
    "four_argument_dynamics",
    "gamblers_problem",
    "mdp_from_dynamics",
    "tied_greedy_actions",
    "greedy_policy",
    "in_place_policy_evaluation",
    "iterative_policy_evaluation",
    "modified_policy_iteration",
    "policy_evaluation",
    "policy_iteration",
    "policy_iteration_trace",
    "policy_matrix",
    "q_values",
    "random_mdp",
    "rollout_returns",
    "uniform_policy",
    "value_iteration",
    "value_iteration_bounds",
]

#: Absolute tolerance on probabilities: each row ``P[s, a, :]`` (and each row of a stochastic
#: policy) must sum to 1 within this tolerance; ``PROB_ATOL_LOW`` for float32 (or lower
#: precision) input, whose rounding alone can exceed 1e-8.
PROB_ATOL = 1e-8
PROB_ATOL_LOW = 1e-5

#: Actions whose Q value is within ``TIE_ATOL * max(1, |max_a Q[s, a]|)`` of the best are tied;
#: greedy policies pick the lowest index among tied actions.
TIE_ATOL = 1e-9

# Value iteration with gamma = 1: the most sweeps, and how often divergence is checked.
_MAX_EPISODIC_SWEEPS = 200_000
_DIVERGENCE_WINDOW = 1_000
_EPS = np.finfo(np.float64).eps


# ----------------------------------------------------------------------------------------------
# Array kinds
# ----------------------------------------------------------------------------------------------

def _prob_atol(x) -> float:
    """The tolerance on probability sums for the precision of ``x``."""
    dtype = x.dtype
    low = (torch.is_floating_point(x) and torch.finfo(dtype).bits < 64) if is_tensor(x) else \
        (np.issubdtype(dtype, np.floating) and np.finfo(dtype).bits < 64)
    return PROB_ATOL_LOW if low else PROB_ATOL


def _to_numpy64(x) -> np.ndarray:
    if is_tensor(x):
        return x.detach().cpu().to(torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def _float_dtype(*arrays):
    """The floating dtype of the output: the promoted floating dtype of the inputs, else float64."""
    if is_tensor(arrays[0]):
        floats = [a.dtype for a in arrays if torch.is_floating_point(a)]
        dtype = floats[0] if floats else torch.float64
        for d in floats[1:]:
            dtype = torch.promote_types(dtype, d)
        return dtype
    floats = [a.dtype for a in arrays if np.issubdtype(a.dtype, np.floating)]
    return np.result_type(*floats) if floats else np.dtype(np.float64)


class _Kind:
    """Where results go back to: numpy or torch, which floating dtype, which device."""

    def __init__(self, *arrays):
        ref = arrays[0]
        self.torch = is_tensor(ref)
        self.dtype = _float_dtype(*arrays)
        self.device = ref.device if self.torch else None

    def values(self, x: np.ndarray):
        if self.torch:
            return torch.as_tensor(np.ascontiguousarray(x), dtype=self.dtype, device=self.device)
        return np.asarray(x, dtype=self.dtype)

    def actions(self, x: np.ndarray):
        if self.torch:
            return torch.as_tensor(np.asarray(x, dtype=np.int64), device=self.device)
        return np.asarray(x, dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------

class TabularMDP:
    r"""A finite MDP :math:`(\mathcal S, \mathcal A, P, R, \gamma)` given by tables.

    .. math::
        P[s, a, s'] = \Pr(s_{t+1} = s' \mid s_t = s, a_t = a), \qquad
        R[s, a] = \E[r_{t+1} \mid s_t = s, a_t = a].

    ==========  ==========  ================================================================
    argument    shape       meaning
    ==========  ==========  ================================================================
    ``P``       (S, A, S)   transition probabilities; each row ``P[s, a, :]`` sums to 1
    ``R``       (S, A)      expected immediate reward of taking ``a`` in ``s``
    ``gamma``   scalar      discount factor in [0, 1]
    ==========  ==========  ================================================================

    ``P`` and ``R`` are numpy arrays or torch tensors (both the same kind; lists become numpy);
    the solvers return that kind. Checks, each a ``ValueError`` naming the argument: ``P`` must
    have shape (S, A, S) with S, A >= 1 and ``R`` shape (S, A); both finite; ``P >= 0``; each
    row of ``P`` sums to 1 within ``PROB_ATOL`` = 1e-8 (absolute; ``PROB_ATOL_LOW`` = 1e-5 for
    float32 input); ``gamma`` in [0, 1]; and
    ``gamma = 1`` only if every state can reach the absorbing set (see :attr:`absorbing`), since
    otherwise returns need not be finite and the solvers would not converge.

    Attributes: ``P``, ``R`` (as given), ``gamma`` (a float), ``num_states``, ``num_actions``,
    ``absorbing`` (bool numpy mask of the zero-reward absorbing set).

    Defined in: MDPs and dynamic programming, section The MDP tuple.
    """

    def __init__(self, P, R, gamma):
        P = as_array(P, "P")
        R = as_array(R, "R")
        if is_tensor(P) != is_tensor(R):
            raise ValueError(
                "P and R must be the same kind (both numpy arrays or both torch tensors), got "
                f"P: {type(P).__name__}, R: {type(R).__name__}")
        if P.ndim != 3 or P.shape[0] != P.shape[2]:
            raise ValueError(f"P must have shape (S, A, S), got shape {tuple(P.shape)}")
        S, A = int(P.shape[0]), int(P.shape[1])
        if S < 1 or A < 1:
            raise ValueError(f"P must have at least one state and one action, got shape {tuple(P.shape)}")
        if tuple(R.shape) != (S, A):
            raise ValueError(f"R must have shape (S, A) = {(S, A)} to match P, got shape {tuple(R.shape)}")
        require_finite(P, "P")
        require_finite(R, "R")
        gamma = _scalar(gamma, "gamma")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")

        P64, R64 = _to_numpy64(P), _to_numpy64(R)
        if P64.min() < 0:
            s, a, s2 = np.unravel_index(int(np.argmin(P64)), P64.shape)
            raise ValueError(
                f"P must hold probabilities >= 0, got P[{s}, {a}, {s2}] = {P64[s, a, s2]:.6g}")
        sums = P64.sum(axis=2)
        atol = _prob_atol(P)
        if np.abs(sums - 1.0).max() > atol:
            s, a = np.unravel_index(int(np.argmax(np.abs(sums - 1.0))), sums.shape)
            raise ValueError(
                f"each row P[s, a, :] must sum to 1 (within {atol:g}), "
                f"got P[{s}, {a}, :].sum() = {sums[s, a]:.12g}")

        self.P, self.R, self.gamma = P, R, gamma
        self.num_states, self.num_actions = S, A
        self._P, self._R = P64, R64
        self._kind = _Kind(P, R)
        self.absorbing = _absorbing_set(P64 > 0, R64 == 0)
        if gamma == 1.0:
            stuck = ~_can_reach(P64.max(axis=1) > 0, self.absorbing)
            if stuck.any():
                states = np.flatnonzero(stuck)
                shown = ", ".join(str(int(s)) for s in states[:10]) + (", ..." if len(states) > 10 else "")
                raise ValueError(
                    "gamma = 1 needs an episodic MDP: from every state some actions must reach a "
                    "zero-reward absorbing state, or returns need not be finite and the solvers "
                    f"would not converge; no absorbing state can be reached from state(s) {shown}. "
                    "Use gamma < 1.")

    @classmethod
    def from_gymnasium(cls, env, gamma) -> "TabularMDP":
        r"""Build the MDP of a toy-text gymnasium environment from its model ``env.unwrapped.P``.

        ``env.unwrapped.P[s][a]`` is a list of ``(prob, next_state, reward, terminated)``
        (FrozenLake, CliffWalking, Taxi and rlnotes' own grid worlds). Then

        .. math::
            P[s, a, s'] = \sum_{\text{outcomes to } s'} \text{prob}, \qquad
            R[s, a] = \sum_{\text{outcomes}} \text{prob} \cdot \text{reward}.

        A state entered by any transition flagged ``terminated`` is terminal: its row becomes
        absorbing (``P[s, a, s] = 1``) with zero reward, whatever the table says about leaving it
        (CliffWalking's goal row, for instance, lists ordinary moves). The reward of the
        transition *into* a terminal state is kept. Transitions that enter a terminal state
        without the flag are kept as listed (Taxi has some, from states no episode reaches).

        ==========  ===========================================================================
        argument    meaning
        ==========  ===========================================================================
        ``env``     a gymnasium environment (wrapped or not) whose ``unwrapped`` has ``P`` and
                    discrete observation and action spaces
        ``gamma``   discount factor in [0, 1]
        ==========  ===========================================================================

        Returns a :class:`TabularMDP` with numpy float64 ``P`` (S, A, S) and ``R`` (S, A).

        Defined in: MDPs and dynamic programming, section FrozenLake: a model from gymnasium.
        """
        base = getattr(env, "unwrapped", env)
        table = getattr(base, "P", None)
        if not isinstance(table, dict):
            raise ValueError(
                "env must be a toy-text gymnasium environment with a transition table "
                f"env.unwrapped.P (a dict), got {type(base).__name__} without one")
        S = _space_size(getattr(base, "observation_space", None), "env.observation_space")
        A = _space_size(getattr(base, "action_space", None), "env.action_space")
        for s in range(S):
            if s not in table:
                raise ValueError(f"env.unwrapped.P has no entry for state {s} (expected {S} states)")
            for a in range(A):
                if a not in table[s]:
                    raise ValueError(f"env.unwrapped.P[{s}] has no entry for action {a}")
                for outcome in table[s][a]:
                    if not 0 <= int(outcome[1]) < S:
                        raise ValueError(f"env.unwrapped.P[{s}][{a}] leads to state "
                                         f"{int(outcome[1])}, outside [0, {S})")
        P, R = _tables_from_toy_text(table, S, A)
        return cls(P, R, gamma)

    def __repr__(self) -> str:
        kind = "torch" if self._kind.torch else "numpy"
        return (f"TabularMDP(S={self.num_states}, A={self.num_actions}, gamma={self.gamma}, "
                f"{kind} {self._kind.dtype})")


def _tables_from_toy_text(table, S: int, A: int):
    """P (S, A, S) and R (S, A) from a toy-text table ``table[s][a] = [(prob, s2, r, done), ...]``:
    probabilities of repeated outcomes add up, R is the expected reward, and every terminal state
    (entered by a transition flagged done) becomes absorbing with zero reward.

    Defined in: MDPs and dynamic programming, section FrozenLake: a model from gymnasium.
    """
    P, R = np.zeros((S, A, S)), np.zeros((S, A))
    terminal = np.zeros(S, dtype=bool)
    for s in range(S):
        for a in range(A):
            for prob, s2, reward, done, *_ in table[s][a]:
                P[s, a, int(s2)] += prob                # P(s' | s, a)
                R[s, a] += prob * reward                # R(s, a) = E[r | s, a]
                terminal[int(s2)] |= bool(done)
    for s in np.flatnonzero(terminal):                  # terminal: absorbing, zero reward
        P[s] = 0.0
        P[s, :, s] = 1.0
        R[s] = 0.0
    return P, R


def _scalar(value, name: str) -> float:
    if is_tensor(value) or isinstance(value, np.ndarray):
        size = value.numel() if is_tensor(value) else value.size
        if size != 1:
            raise ValueError(f"{name} must be a scalar, got shape {tuple(value.shape)}")
        value = value.item()
    return require_real(value, name)


def _space_size(space, name: str) -> int:
    n = getattr(space, "n", None)
    if n is None:
        raise ValueError(f"{name} must be Discrete (finite states and actions), got {space!r}")
    return int(n)


def _absorbing_set(edges: np.ndarray, zero_reward: np.ndarray) -> np.ndarray:
    """The largest set Z with zero reward on every action and no edge leaving Z.

    ``edges[s, a, s2]`` (or ``edges[s, s2]`` for a fixed policy) says s2 is reachable in one step.
    """
    if edges.ndim == 3:
        edges = edges.any(axis=1)
        zero = zero_reward.all(axis=1)
    else:
        zero = zero_reward
    Z = zero.copy()
    while True:
        leaves = (edges & ~Z[None, :]).any(axis=1)
        new = Z & ~leaves
        if (new == Z).all():
            return Z
        Z = new


def _can_reach(edges: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Mask of states with a path (edges[s, s2] True) to a state in ``target``."""
    reach = target.copy()
    queue = deque(np.flatnonzero(target))
    preds = [np.flatnonzero(edges[:, s2]) for s2 in range(edges.shape[0])]
    while queue:
        s2 = queue.popleft()
        for s in preds[s2]:
            if not reach[s]:
                reach[s] = True
                queue.append(s)
    return reach


def _require_mdp(mdp) -> TabularMDP:
    if not isinstance(mdp, TabularMDP):
        raise ValueError(f"mdp must be a rlnotes.mdp.TabularMDP, got {type(mdp).__name__}")
    return mdp


def _require_tol(tol) -> float:
    tol = require_real(tol, "tol")
    if tol <= 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    return tol


def _values_in(mdp: TabularMDP, V, name: str = "V") -> np.ndarray:
    V = as_array(V, name)
    if tuple(V.shape) != (mdp.num_states,):
        raise ValueError(f"{name} must have shape (S,) = ({mdp.num_states},), got {tuple(V.shape)}")
    require_finite(V, name)
    return _to_numpy64(V)


def _policy_in(mdp: TabularMDP, policy) -> np.ndarray:
    """A policy as an (S, A) float64 numpy matrix of probabilities."""
    policy = as_array(policy, "policy")
    S, A = mdp.num_states, mdp.num_actions
    if tuple(policy.shape) == (S,):
        actions = _to_numpy64(policy)
        if not np.all(np.isfinite(actions)) or np.any(actions != np.round(actions)):
            raise ValueError("policy of shape (S,) must hold integer actions")
        if actions.min() < 0 or actions.max() >= A:
            raise ValueError(f"policy of shape (S,) must hold actions in [0, {A}), "
                             f"got values in [{actions.min():g}, {actions.max():g}]")
        return np.eye(A)[actions.astype(np.int64)]
    if tuple(policy.shape) != (S, A):
        raise ValueError(f"policy must have shape (S,) = ({S},) of actions or (S, A) = {(S, A)} "
                         f"of probabilities, got {tuple(policy.shape)}")
    pi = _to_numpy64(policy)
    if not np.all(np.isfinite(pi)) or pi.min() < 0:
        raise ValueError("policy of shape (S, A) must hold probabilities >= 0")
    sums = pi.sum(axis=1)
    atol = _prob_atol(policy)
    if np.abs(sums - 1).max() > atol:
        s = int(np.argmax(np.abs(sums - 1)))
        raise ValueError(f"each row policy[s, :] must sum to 1 (within {atol:g}), "
                         f"got policy[{s}, :].sum() = {sums[s]:.12g}")
    return pi


# ----------------------------------------------------------------------------------------------
# Backups
# ----------------------------------------------------------------------------------------------

def _q(mdp: TabularMDP, V: np.ndarray) -> np.ndarray:
    return mdp._R + mdp.gamma * (mdp._P @ V)


def _tied(Q: np.ndarray) -> np.ndarray:
    best = Q.max(axis=1, keepdims=True)
    return Q >= best - TIE_ATOL * np.maximum(1.0, np.abs(best))


def _greedy(Q: np.ndarray) -> np.ndarray:
    return np.argmax(_tied(Q), axis=1)


def _greedy_for(mdp: TabularMDP, Q: np.ndarray) -> np.ndarray:
    """Greedy actions, ties to the lowest index; with gamma = 1 ties go first to actions that
    move closer to the absorbing set, so that a greedy policy of V* also terminates."""
    if mdp.gamma < 1.0:
        return _greedy(Q)
    return _terminating_policy(mdp, _tied(Q))


def _terminating_policy(mdp: TabularMDP, allowed: np.ndarray) -> np.ndarray:
    """Breadth-first from the absorbing set, using only ``allowed[s, a]`` actions: each state
    reached takes the lowest-index allowed action that moves it, with positive probability, one
    layer closer; such a policy ends with probability 1 from those states. Other states take
    their lowest-index allowed action."""
    pi = np.argmax(allowed, axis=1)
    layer = np.full(mdp.num_states, -1)
    layer[mdp.absorbing] = 0
    frontier = mdp.absorbing.copy()
    depth = 0
    while frontier.any():
        depth += 1
        hits = allowed & (mdp._P[:, :, frontier].sum(axis=2) > 0)  # a can enter the frontier
        new = (layer < 0) & hits.any(axis=1)
        pi[new] = np.argmax(hits[new], axis=1)
        layer[new] = depth
        frontier = new
    return pi


def q_values(mdp: TabularMDP, V):
    r"""Action values from state values by a one-step look-ahead.

    .. math::
        Q(s, a) = R(s, a) + \gamma \sum_{s'} P(s' \mid s, a)\, V(s').

    =========  ==========  ======================================
    argument   shape       meaning
    =========  ==========  ======================================
    ``mdp``    .           a :class:`TabularMDP`
    ``V``      (S,)        state values (numpy or torch)
    returns    (S, A)      ``Q``, the same kind and dtype as ``V``
    =========  ==========  ======================================

    Defined in: MDPs and dynamic programming, section Value functions: V, Q and A.
    """
    _require_mdp(mdp)
    V_in = as_array(V, "V")
    return _Kind(V_in).values(_q(mdp, _values_in(mdp, V_in)))


def bellman_expectation_backup(mdp: TabularMDP, V, policy):
    r"""One Bellman expectation backup, :math:`\mathcal{T}^\pi V`.

    .. math::
        (\mathcal{T}^\pi V)(s) = \sum_a \pi(a \mid s) \Big[R(s, a) + \gamma \sum_{s'} P(s' \mid s, a) V(s')\Big].

    ==========  ===============  ========================================================
    argument    shape            meaning
    ==========  ===============  ========================================================
    ``V``       (S,)             state values
    ``policy``  (S, A) or (S,)   action probabilities, or one action per state
    returns     (S,)             :math:`\mathcal{T}^\pi V`, the same kind and dtype as ``V``
    ==========  ===============  ========================================================

    Defined in: MDPs and dynamic programming, section Iterative policy evaluation.
    """
    _require_mdp(mdp)
    V_in = as_array(V, "V")
    pi = _policy_in(mdp, policy)
    return _Kind(V_in).values((pi * _q(mdp, _values_in(mdp, V_in))).sum(axis=1))


def bellman_optimality_backup(mdp: TabularMDP, V):
    r"""One Bellman optimality backup, :math:`\mathcal{T} V`.

    .. math::
        (\mathcal{T} V)(s) = \max_a \Big[R(s, a) + \gamma \sum_{s'} P(s' \mid s, a) V(s')\Big].

    =========  ======  ==============================================
    argument   shape   meaning
    =========  ======  ==============================================
    ``V``      (S,)    state values
    returns    (S,)    :math:`\mathcal{T} V`, the same kind and dtype as ``V``
    =========  ======  ==============================================

    Defined in: MDPs and dynamic programming, section Value iteration.
    """
    _require_mdp(mdp)
    V_in = as_array(V, "V")
    return _Kind(V_in).values(_q(mdp, _values_in(mdp, V_in)).max(axis=1))


def greedy_policy(mdp: TabularMDP, V):
    r"""The greedy policy of ``V``: in each state an action that maximises the look-ahead.

    .. math::
        \pi(s) = \argmax_a \Big[R(s, a) + \gamma \sum_{s'} P(s' \mid s, a) V(s')\Big].

    Ties are broken deterministically: actions whose Q is within ``TIE_ATOL`` = 1e-9 times
    ``max(1, |max_a Q(s, a)|)`` of the best count as tied, and the lowest index among them wins.
    With ``gamma = 1`` a tie goes first to the lowest-index tied action that moves, with positive
    probability, one step closer (breadth-first) to the absorbing set, so that the greedy policy
    of V* terminates and is optimal (on non-slippery FrozenLake, "left" into the wall from the
    start has the same value 1 as "down", but would never end).

    =========  ======  ==========================================================
    argument   shape   meaning
    =========  ======  ==========================================================
    ``V``      (S,)    state values
    returns    (S,)    integer actions (int64 numpy array or torch long tensor,
                       the kind of ``V``)
    =========  ======  ==========================================================

    Defined in: MDPs and dynamic programming, section Greedy policies.
    """
    _require_mdp(mdp)
    V_in = as_array(V, "V")
    return _Kind(V_in).actions(_greedy_for(mdp, _q(mdp, _values_in(mdp, V_in))))


def uniform_policy(mdp: TabularMDP):
    r"""The equiprobable random policy :math:`\pi(a \mid s) = 1/|\mathcal A|`, shape (S, A), in
    the kind and dtype of the MDP.

    Defined in: MDPs and dynamic programming, section Iterative policy evaluation.
    """
    _require_mdp(mdp)
    return mdp._kind.values(np.full((mdp.num_states, mdp.num_actions), 1.0 / mdp.num_actions))


def policy_matrix(mdp: TabularMDP, policy):
    r"""A policy as an (S, A) matrix of probabilities :math:`\pi(a \mid s)`: an (S,) array of
    actions becomes one-hot rows; an (S, A) matrix is checked and returned as float.

    Defined in: MDPs and dynamic programming, section Value functions: V, Q and A.
    """
    _require_mdp(mdp)
    policy_in = as_array(policy, "policy")
    pi = _policy_in(mdp, policy_in)
    return (_Kind(policy_in) if is_tensor(policy_in) else mdp._kind).values(pi)


# ----------------------------------------------------------------------------------------------
# Policy evaluation
# ----------------------------------------------------------------------------------------------

def _evaluate(mdp: TabularMDP, pi: np.ndarray, tol: float) -> np.ndarray:
    """Exact V^pi in float64 for an (S, A) policy matrix (see policy_evaluation)."""
    S = mdp.num_states
    P_pi = np.einsum("sa,sat->st", pi, mdp._P)
    R_pi = (pi * mdp._R).sum(axis=1)
    gamma = mdp.gamma
    V = np.zeros(S)
    if gamma < 1.0:
        M = np.eye(S) - gamma * P_pi
        V = np.linalg.solve(M, R_pi)
        for _ in range(3):  # iterative refinement, should rounding leave a visible residual
            residual = R_pi + gamma * P_pi @ V - V
            if np.abs(residual).max() <= tol:
                break
            V = V + np.linalg.solve(M, residual)
        return V
    # gamma = 1: zero on the closed zero-reward set of the policy, a linear solve elsewhere.
    scale = max(1.0, float(np.abs(mdp._R).max()))
    Z = _absorbing_set(P_pi > 0, np.abs(R_pi) <= 1e-12 * scale)
    stuck = ~_can_reach(P_pi > 0, Z)
    if stuck.any():
        raise ValueError(
            "gamma = 1 and the policy does not reach a zero-reward absorbing state with "
            f"probability 1 from state(s) {np.flatnonzero(stuck)[:10].tolist()}: its return there "
            "is not finite. Use gamma < 1 or a policy that terminates.")
    N = ~Z
    if N.any():
        M = np.eye(int(N.sum())) - P_pi[np.ix_(N, N)]
        V[N] = np.linalg.solve(M, R_pi[N])
    return V


def policy_evaluation(mdp: TabularMDP, policy, tol=1e-10):
    r"""The value :math:`V^\pi` of a policy, solving the Bellman expectation equation exactly.

    .. math::
        V^\pi = R_\pi + \gamma P_\pi V^\pi \quad\Longrightarrow\quad
        V^\pi = (I - \gamma P_\pi)^{-1} R_\pi,

    with :math:`P_\pi[s, s'] = \sum_a \pi(a \mid s) P[s, a, s']` and
    :math:`R_\pi[s] = \sum_a \pi(a \mid s) R[s, a]`. With ``gamma < 1`` the solution of the
    linear system is refined (at most three steps) while its Bellman residual exceeds ``tol``.
    With ``gamma = 1``, V = 0 on the closed zero-reward states of the policy and the system is
    solved on the rest; a policy that some state never ends (its return is not finite) raises
    ``ValueError`` naming gamma.

    ==========  ===============  ============================================================
    argument    shape            meaning
    ==========  ===============  ============================================================
    ``mdp``     .                a :class:`TabularMDP`
    ``policy``  (S, A) or (S,)   probabilities :math:`\pi(a \mid s)` or one action per state
    ``tol``     scalar > 0       largest Bellman residual accepted
    returns     (S,)             :math:`V^\pi`, in the kind and dtype of ``mdp.P``
    ==========  ===============  ============================================================

    Defined in: MDPs and dynamic programming, section Policy evaluation as a linear system.
    """
    _require_mdp(mdp)
    tol = _require_tol(tol)
    return mdp._kind.values(_evaluate(mdp, _policy_in(mdp, policy), tol))


def iterative_policy_evaluation(mdp: TabularMDP, policy, tol=1e-10, max_sweeps=100_000):
    r"""Policy evaluation by repeated synchronous Bellman expectation backups from V = 0.

    .. math::
        V_{k+1}(s) = \sum_a \pi(a \mid s) \Big[R(s, a) + \gamma \sum_{s'} P(s' \mid s, a) V_k(s')\Big].

    With :math:`\Delta_k = \|V_k - V_{k-1}\|_\infty` (the change of sweep k), what is guaranteed:

    * ``gamma < 1``: stops after the first sweep with
      :math:`\frac{\gamma}{1-\gamma}\Delta_k < \text{tol}`, and then
      :math:`\|V_k - V^\pi\|_\infty < \text{tol}`. Should float64 rounding stall the sweeps
      first (a change of a few ulps of :math:`\max|V|`, possible only when ``tol`` is near
      machine precision relative to V), V is finished by the exact solve of
      :func:`policy_evaluation`, so the guarantee holds in every case.
    * ``gamma = 1``: stops when :math:`\Delta_k < \text{tol}`, which alone guarantees nothing;
      what holds is :math:`\|V_k - V^\pi\|_\infty \le (\max_s \E_\pi[T \mid s_0 = s] - 1)
      \, \Delta_k`, with T the episode length, so the error can be many times ``tol`` when
      episodes are long (the chapter measures it on Sutton and Barto's 4x4 grid).

    ==============  ===============  ====================================================
    argument        shape            meaning
    ==============  ===============  ====================================================
    ``mdp``         .                a :class:`TabularMDP`
    ``policy``      (S, A) or (S,)   probabilities or one action per state
    ``tol``         scalar > 0       accuracy (gamma < 1), smallest change (gamma = 1)
    ``max_sweeps``  int >= 1         raises ``ValueError`` if not converged by then
    returns         ((S,), int)      ``(V, sweeps)``: V in the kind of ``mdp.P``
    ==============  ===============  ====================================================

    Defined in: MDPs and dynamic programming, section Iterative policy evaluation.
    """
    _require_mdp(mdp)
    tol = _require_tol(tol)
    max_sweeps = require_int(max_sweeps, "max_sweeps", minimum=1)
    pi = _policy_in(mdp, policy)
    gamma = mdp.gamma
    V, sweep, change = _iterative_evaluation_core(mdp._P, mdp._R, pi, gamma, tol, max_sweeps)
    if sweep is None:
        raise ValueError(f"max_sweeps={max_sweeps} sweeps were not enough to reach tol={tol:g} "
                         f"(last change {change:.3g}); raise max_sweeps, or tol")
    if gamma < 1.0 and gamma * change >= tol * (1.0 - gamma):
        V = _evaluate(mdp, pi, tol)  # stalled by rounding before the bound reached tol
    return mdp._kind.values(V), sweep


def _iterative_evaluation_core(P, R, pi, gamma, tol, max_sweeps):
    """Synchronous Bellman expectation backups from V = 0 (see iterative_policy_evaluation);
    returns (V, sweeps, last change), sweeps = None if max_sweeps were not enough."""
    P_pi = np.einsum("sa,sat->st", pi, P)          # P_pi[s, s'] = sum_a pi(a|s) P(s'|s, a)
    R_pi = (pi * R).sum(axis=1)                    # R_pi[s] = sum_a pi(a|s) R(s, a)
    V = np.zeros(R.shape[0])
    for sweep in range(1, max_sweeps + 1):
        V_new = R_pi + gamma * P_pi @ V            # one sweep: V_{k+1} = R_pi + gamma P_pi V_k
        change = float(np.abs(V_new - V).max())
        V = V_new
        if _small_enough(change, gamma, tol, V):   # gamma change < tol (1 - gamma), or rounding
            return V, sweep, change
    return V, None, change


def in_place_policy_evaluation(mdp: TabularMDP, policy, tol=1e-10, max_sweeps=100_000):
    r"""Policy evaluation by in-place (Gauss-Seidel) sweeps from V = 0: states are updated one
    at a time, in the order 0, 1, ..., S-1, each backup using the values already updated in
    the same sweep,

    .. math::
        V(s) \leftarrow \sum_a \pi(a \mid s) \Big[R(s, a)
              + \gamma \sum_{s'} P(s' \mid s, a) V(s')\Big].

    A whole sweep is again a :math:`\gamma`-contraction in max norm, so the stopping rule and
    the guarantee are those of :func:`iterative_policy_evaluation` (``gamma < 1``). Only
    ``gamma < 1`` is accepted.

    ==============  ===============  ====================================================
    argument        shape            meaning
    ==============  ===============  ====================================================
    ``mdp``         .                a :class:`TabularMDP` with ``gamma < 1``
    ``policy``      (S, A) or (S,)   probabilities or one action per state
    ``tol``         scalar > 0       accuracy of V in max norm
    ``max_sweeps``  int >= 1         raises ``ValueError`` if not converged by then
    returns         ((S,), int)      ``(V, sweeps)``, numpy float64
    ==============  ===============  ====================================================

    Defined in: MDPs and dynamic programming, section In-place and asynchronous DP.
    """
    _require_mdp(mdp)
    tol = _require_tol(tol)
    max_sweeps = require_int(max_sweeps, "max_sweeps", minimum=1)
    gamma = mdp.gamma
    if gamma >= 1.0:
        raise ValueError("gamma must be < 1 for in_place_policy_evaluation, got 1")
    pi = _policy_in(mdp, policy)
    P_pi = np.einsum("sa,sat->st", pi, mdp._P)
    R_pi = (pi * mdp._R).sum(axis=1)
    V = np.zeros(mdp.num_states)
    for sweep in range(1, max_sweeps + 1):
        change = 0.0
        for s in range(mdp.num_states):
            v = R_pi[s] + gamma * P_pi[s] @ V
            change = max(change, abs(v - V[s]))
            V[s] = v
        if _small_enough(change, gamma, tol, V):
            if gamma * change >= tol * (1.0 - gamma):
                V = _evaluate(mdp, pi, tol)
            return V, sweep
    raise ValueError(f"max_sweeps={max_sweeps} sweeps were not enough to reach tol={tol:g}")


def _small_enough(change: float, gamma: float, tol: float, V: np.ndarray) -> bool:
    """The stopping rule: the contraction bound on the error, or rounding-level changes."""
    if change <= 16 * _EPS * max(1.0, float(np.abs(V).max())):
        return True  # a further sweep cannot change V beyond rounding
    if gamma < 1.0:
        return gamma * change < tol * (1.0 - gamma)
    return change < tol


# ----------------------------------------------------------------------------------------------
# Control
# ----------------------------------------------------------------------------------------------

def _initial_policy(mdp: TabularMDP) -> np.ndarray:
    """Action 0 everywhere; with gamma = 1 a policy that terminates (see policy_iteration)."""
    if mdp.gamma < 1.0:
        return np.zeros(mdp.num_states, dtype=np.int64)
    return _terminating_policy(mdp, np.ones((mdp.num_states, mdp.num_actions), dtype=bool))


def policy_iteration_trace(mdp: TabularMDP):
    r"""Howard's policy iteration, returning every policy it evaluates.

    Start from :math:`\pi_0` (action 0 in every state; with ``gamma = 1`` instead a policy that
    terminates: in each state the lowest-index action that can move one step closer to the
    absorbing set). Then repeat: evaluate :math:`V^{\pi_i}` exactly; improve,
    :math:`\pi_{i+1}(s) = \argmax_a Q^{\pi_i}(s, a)`, keeping the current action unless another
    is better by more than the tie tolerance; stop when the policy no longer changes.

    Returns a list of ``(V, policy)`` pairs, one per evaluated policy (numpy float64 and int64);
    the last pair is optimal. :func:`policy_iteration` returns that last pair.

    Defined in: MDPs and dynamic programming, section Policy iteration.
    """
    _require_mdp(mdp)
    S = mdp.num_states
    pi = _initial_policy(mdp)
    trace = []
    tol = 1e-12 * max(1.0, float(np.abs(mdp._R).max()))
    for _ in range(10 * S * mdp.num_actions + 100):
        V = _evaluate(mdp, np.eye(mdp.num_actions)[pi], tol)
        trace.append((V, pi.copy()))
        Q = _q(mdp, V)
        best = Q.max(axis=1)
        current = Q[np.arange(S), pi]
        better = best > current + TIE_ATOL * np.maximum(1.0, np.abs(best))
        if not better.any():
            return trace
        pi = np.where(better, _greedy_for(mdp, Q), pi)
    raise ValueError("policy iteration did not stop; gamma = 1 with an MDP whose values are not "
                     "finite under some policy? Use gamma < 1")


def policy_iteration(mdp: TabularMDP):
    r"""Optimal values and a greedy optimal policy by policy iteration (Howard, 1960).

    Alternate exact policy evaluation, :math:`V^{\pi_i} = (I - \gamma P_{\pi_i})^{-1} R_{\pi_i}`,
    and greedy improvement, :math:`\pi_{i+1}(s) = \argmax_a Q^{\pi_i}(s, a)`, until the policy
    is stable (see :func:`policy_iteration_trace`). The returned policy is the greedy policy of
    the final V with ties broken as in :func:`greedy_policy`, so policy and value iteration
    return the same policy.

    =========  =================  ======================================================
    argument   shape              meaning
    =========  =================  ======================================================
    ``mdp``    .                  a :class:`TabularMDP`
    returns    ((S,), (S,))       ``(V, policy)``: V* in the kind and dtype of ``mdp.P``,
                                  integer greedy actions
    =========  =================  ======================================================

    Defined in: MDPs and dynamic programming, section Policy iteration.
    """
    V, _ = policy_iteration_trace(mdp)[-1]
    return mdp._kind.values(V), mdp._kind.actions(_greedy_for(mdp, _q(mdp, V)))


def _value_iteration_core(P, R, gamma, tol):
    """Value iteration for gamma < 1, as the pseudocode states it: sweep the Bellman optimality
    backup from V = 0 until the contraction bound gamma / (1 - gamma) * Delta is below tol
    (or Delta is at the level of rounding). Returns V and the last change Delta.

    Defined in: MDPs and dynamic programming, section Value iteration.
    """
    V = np.zeros(P.shape[0])
    while True:
        Q = R + gamma * P @ V                  # Q[s, a] = R(s, a) + gamma sum_s' P(s'|s, a) V(s')
        V_new = Q.max(axis=1)                  # the backup: V_{k+1} = T V_k
        Delta = float(np.abs(V_new - V).max())
        V = V_new
        if _small_enough(Delta, gamma, tol, V):  # gamma / (1 - gamma) * Delta < tol
            return V, Delta


def value_iteration(mdp: TabularMDP, tol=1e-10):
    r"""Optimal values and a greedy optimal policy by value iteration (Bellman, 1957).

    .. math::
        V_0 = 0, \qquad V_{k+1}(s) = \max_a \Big[R(s, a) + \gamma \sum_{s'} P(s' \mid s, a) V_k(s')\Big].

    Stopping rule (``gamma < 1``): since the backup is a ``gamma``-contraction,
    :math:`\|V_{k+1} - V^*\|_\infty \le \frac{\gamma}{1-\gamma}\|V_{k+1} - V_k\|_\infty`, so the
    sweeps stop once that bound is below ``tol``, and the returned V is within ``tol`` of V*.
    Should rounding stall the sweeps first (a change of a few ulps of max|V|, possible only when
    ``tol`` is near machine precision relative to V and gamma is close to 1), the greedy
    policy's exact value is returned instead when it satisfies the optimality equation to
    rounding; otherwise (a near-tie between actions) the last sweep is returned, and its error
    bound is gamma / (1 - gamma) times that rounding-level change, which may exceed ``tol``.
    With ``gamma = 1`` there is no contraction
    factor: when a sweep changes V by less than ``tol``, the greedy policy is evaluated exactly,
    and that value is returned if it satisfies the Bellman optimality equation within ``tol``;
    sweeps that stop shrinking (a loop that earns reward forever) raise ``ValueError`` naming
    gamma. The returned V is then the exact value of the returned policy and solves the
    optimality equation; that proves V = V* only under the stochastic-shortest-path conditions
    (Bertsekas and Tsitsiklis: some policy terminates from every state, and every policy that
    does not has return -infinity from some state), which make the solution unique. With a
    zero-reward loop the equation has many solutions (see the chapter's two-state example), and
    which of them is returned depends on the sweeps' start, V_0 = 0.
    The policy is the greedy policy of V, ties broken as in :func:`greedy_policy` (the
    lowest action index; with ``gamma = 1`` first an action that moves towards termination).

    =========  =================  ======================================================
    argument   shape              meaning
    =========  =================  ======================================================
    ``mdp``    .                  a :class:`TabularMDP`
    ``tol``    scalar > 0         accuracy of V in max norm
    returns    ((S,), (S,))       ``(V, policy)``: V in the kind and dtype of ``mdp.P``,
                                  integer greedy actions
    =========  =================  ======================================================

    Defined in: MDPs and dynamic programming, section Value iteration.
    """
    _require_mdp(mdp)
    tol = _require_tol(tol)
    if mdp.gamma < 1.0:
        gamma = mdp.gamma
        V, change = _value_iteration_core(mdp._P, mdp._R, gamma, tol)
        if gamma * change >= tol * (1.0 - gamma):
            # Stopped by rounding before the bound reached tol (gamma close to 1, large values):
            # the greedy policy's exact value is then the more accurate answer, if it is optimal.
            V_pi = _evaluate(mdp, np.eye(mdp.num_actions)[_greedy(_q(mdp, V))], tol)
            if np.abs(_q(mdp, V_pi).max(axis=1) - V_pi).max() <= 64 * _EPS * max(1.0, np.abs(V_pi).max()):
                V = V_pi
    else:
        V = _value_iteration_episodic(mdp, tol)
    return mdp._kind.values(V), mdp._kind.actions(_greedy_for(mdp, _q(mdp, V)))


def _value_iteration_episodic(mdp: TabularMDP, tol: float) -> np.ndarray:
    V = np.zeros(mdp.num_states)
    window_change = math.inf
    last_check = -10
    for sweep in range(1, _MAX_EPISODIC_SWEEPS + 1):
        V_new = _q(mdp, V).max(axis=1)
        change = float(np.abs(V_new - V).max())
        V = V_new
        if _small_enough(change, 1.0, tol, V) and sweep - last_check >= 10:
            last_check = sweep
            pi = _greedy_for(mdp, _q(mdp, V))
            try:
                V_pi = _evaluate(mdp, np.eye(mdp.num_actions)[pi], tol)
                if float(np.abs(_q(mdp, V_pi).max(axis=1) - V_pi).max()) <= tol:
                    return V_pi
            except ValueError:
                pass  # the greedy policy does not terminate yet
            if change == 0.0:
                return V  # an exact fixed point of the backup
        if sweep % _DIVERGENCE_WINDOW == 0:
            if change > tol and change >= 0.999 * window_change:
                raise ValueError(
                    f"gamma = 1: value iteration does not converge (after {sweep} sweeps V still "
                    f"changes by {change:.3g} per sweep): some policy earns reward forever without "
                    "terminating, so V* is not finite. Use gamma < 1")
            window_change = change
    raise ValueError(f"gamma = 1: value iteration did not converge in {_MAX_EPISODIC_SWEEPS} "
                     "sweeps; use gamma < 1")


def modified_policy_iteration(mdp: TabularMDP, m: int, tol=1e-10, max_iterations=100_000):
    r"""Modified (truncated) policy iteration (Puterman and Shin, 1978): from V = 0, repeat

    .. math::
        \pi_{k+1} = \text{greedy}(V_k), \qquad
        V_{k+1} = (\mathcal{T}^{\pi_{k+1}})^{m} V_k ,

    that is, one improvement and then m Bellman expectation backups of the new policy instead
    of its exact evaluation (the first of them equals :math:`\mathcal{T} V_k`). ``m = 1`` is
    value iteration; ``m -> infinity`` is policy iteration. It stops at the first k with
    :math:`\frac{\gamma}{1-\gamma}\|\mathcal{T} V_k - V_k\|_\infty < \text{tol}` and
    returns :math:`\mathcal{T} V_k`, within ``tol`` of V*, and its greedy policy. Only
    ``gamma < 1``.

    ==================  =============  ===================================================
    argument            shape          meaning
    ==================  =============  ===================================================
    ``mdp``             .              a :class:`TabularMDP` with ``gamma < 1``
    ``m``               int >= 1       backups per policy
    ``tol``             scalar > 0     accuracy of V in max norm
    ``max_iterations``  int >= 1       raises ``ValueError`` if not converged by then
    returns             tuple          ``(V, policy, iterations)``: numpy (S,) float64,
                                       (S,) int64, and the number k of improvements
    ==================  =============  ===================================================

    Defined in: MDPs and dynamic programming, section Modified policy iteration.
    """
    _require_mdp(mdp)
    m = require_int(m, "m", minimum=1)
    tol = _require_tol(tol)
    max_iterations = require_int(max_iterations, "max_iterations", minimum=1)
    gamma = mdp.gamma
    if gamma >= 1.0:
        raise ValueError("gamma must be < 1 for modified_policy_iteration, got 1")
    S = mdp.num_states
    V = np.zeros(S)
    for k in range(max_iterations + 1):
        Q = _q(mdp, V)
        pi = _greedy(Q)
        TV = Q[np.arange(S), pi]
        if gamma * float(np.abs(TV - V).max()) < tol * (1.0 - gamma) or k == max_iterations:
            break
        P_pi, R_pi = mdp._P[np.arange(S), pi], mdp._R[np.arange(S), pi]
        V = TV
        for _ in range(m - 1):
            V = R_pi + gamma * P_pi @ V
    if gamma * float(np.abs(TV - V).max()) >= tol * (1.0 - gamma):
        raise ValueError(f"max_iterations={max_iterations} were not enough to reach tol={tol:g}")
    return TV, _greedy(_q(mdp, TV)), k


def value_iteration_bounds(mdp: TabularMDP, num_sweeps: int):
    r"""The value-iteration iterates from :math:`V_0 = 0` and a bound on their error that uses
    how long episodes last.

    :math:`V_k` is the optimal k-step value (k steps, then nothing), the value of the
    non-stationary policy :math:`\pi_k` that, with j steps left, acts greedily on
    :math:`V_{j-1}`. Comparing with :math:`\pi^*` for k steps, and with :math:`\pi_k`
    followed by :math:`\pi^*`,

    .. math::
        |V_k(s) - V^*(s)| \le \gamma^k \max\big(\Pr_{\pi^*}(T > k \mid s_0 = s),
        \Pr_{\pi_k}(T > k \mid s_0 = s)\big)\,\|V^*\|_\infty ,

    where T is the step at which the episode enters the absorbing set. The factor
    :math:`\gamma^k` alone is the contraction bound; the probability of outlasting k steps
    is what makes value iteration fast on problems whose episodes end quickly.

    ===============  ====================  =============================================
    argument         shape                 meaning
    ===============  ====================  =============================================
    ``mdp``          .                     a :class:`TabularMDP`
    ``num_sweeps``   int >= 1              K
    returns          ((K, S), (K, S))      ``(V, bound)``: row k-1 holds V_k and its bound
    ===============  ====================  =============================================

    Defined in: MDPs and dynamic programming, section Value iteration.
    """
    _require_mdp(mdp)
    K = require_int(num_sweeps, "num_sweeps", minimum=1)
    S = mdp.num_states
    V_star, pi_star = policy_iteration_trace(mdp)[-1]
    P_star = mdp._P[np.arange(S), pi_star]
    scale = float(np.abs(V_star).max())
    alive = (~mdp.absorbing).astype(np.float64)
    outlast_star, outlast_k = alive.copy(), alive.copy()
    V = np.zeros(S)
    values, bounds = np.empty((K, S)), np.empty((K, S))
    for k in range(1, K + 1):
        Q = _q(mdp, V)
        pi = _greedy(Q)  # pi_k's first action, greedy on V_{k-1}
        outlast_k = alive * (mdp._P[np.arange(S), pi] @ outlast_k)
        outlast_star = alive * (P_star @ outlast_star)
        V = Q.max(axis=1)
        values[k - 1] = V
        bounds[k - 1] = mdp.gamma ** k * np.maximum(outlast_star, outlast_k) * scale
    return values, bounds


# ----------------------------------------------------------------------------------------------
# Four-argument dynamics, tied optimal actions, the Gambler's problem
# ----------------------------------------------------------------------------------------------

def four_argument_dynamics(env):
    r"""The four-argument dynamics :math:`p(s', r \mid s, a)` of a toy-text environment.

    Sutton and Barto's model of an MDP (their equation 3.2): the joint probability of the next
    state and the reward. The rewards a table can pay are finitely many, ``rewards[k]``, and

    .. math::
        p[s, a, s', k] = \Pr(s_{t+1} = s', r_{t+1} = \text{rewards}[k] \mid s_t = s, a_t = a).

    Terminal states are made absorbing with zero reward, as in
    :meth:`TabularMDP.from_gymnasium`. :func:`mdp_from_dynamics` reduces p to ``P`` and ``R``.

    ===========  ================  ================================================
    argument     shape             meaning
    ===========  ================  ================================================
    ``env``      .                 a toy-text environment (``env.unwrapped.P``)
    returns      ((S, A, S, K),    ``(p, rewards)``: the joint probabilities and
                 (K,))             the K distinct rewards, sorted
    ===========  ================  ================================================

    Defined in: MDPs and dynamic programming, section Four-argument dynamics and the A/B grid
    world.
    """
    base = getattr(env, "unwrapped", env)
    table = getattr(base, "P", None)
    if not isinstance(table, dict):
        raise ValueError("env must be a toy-text gymnasium environment with a transition table "
                         f"env.unwrapped.P (a dict), got {type(base).__name__} without one")
    S = _space_size(getattr(base, "observation_space", None), "env.observation_space")
    A = _space_size(getattr(base, "action_space", None), "env.action_space")
    outcomes = [(s, a, o) for s in range(S) for a in range(A) for o in table[s][a]]
    terminal = np.zeros(S, dtype=bool)
    for _, _, (prob, s2, reward, done, *_) in outcomes:
        if not 0 <= int(s2) < S:
            raise ValueError(f"env.unwrapped.P leads to state {int(s2)}, outside [0, {S})")
        terminal[int(s2)] |= bool(done)
    rewards = np.unique([0.0] + [float(o[2]) for _, _, o in outcomes])
    p = np.zeros((S, A, S, rewards.size))
    zero = int(np.searchsorted(rewards, 0.0))
    for s, a, (prob, s2, reward, done, *_) in outcomes:
        if not terminal[s]:
            p[s, a, int(s2), int(np.searchsorted(rewards, float(reward)))] += prob
    for s in np.flatnonzero(terminal):
        p[s, :, s, zero] = 1.0
    return p, rewards


def mdp_from_dynamics(p, rewards, gamma) -> TabularMDP:
    r"""The MDP :math:`(P, R)` of four-argument dynamics :math:`p(s', r \mid s, a)`:

    .. math::
        P(s' \mid s, a) = \sum_r p(s', r \mid s, a), \qquad
        R(s, a) = \sum_{s', r} r\, p(s', r \mid s, a).

    ===========  =============  =====================================================
    argument     shape          meaning
    ===========  =============  =====================================================
    ``p``        (S, A, S, K)   joint probabilities; each ``p[s, a]`` sums to 1
    ``rewards``  (K,)           the reward values
    ``gamma``    scalar         discount factor in [0, 1]
    returns      .              a :class:`TabularMDP` (numpy float64)
    ===========  =============  =====================================================

    Defined in: MDPs and dynamic programming, section Four-argument dynamics and the A/B grid
    world.
    """
    p = _to_numpy64(as_array(p, "p"))
    rewards = _to_numpy64(as_array(rewards, "rewards"))
    if p.ndim != 4 or p.shape[0] != p.shape[2]:
        raise ValueError(f"p must have shape (S, A, S, K), got {p.shape}")
    if rewards.shape != (p.shape[3],):
        raise ValueError(f"rewards must have shape (K,) = ({p.shape[3]},) to match p, "
                         f"got {rewards.shape}")
    if not np.all(np.isfinite(p)) or p.min() < 0:
        raise ValueError("p must hold finite probabilities >= 0")
    if not np.all(np.isfinite(rewards)):
        raise ValueError("rewards must be finite")
    sums = p.sum(axis=(2, 3))
    if np.abs(sums - 1.0).max() > PROB_ATOL:
        s, a = np.unravel_index(int(np.argmax(np.abs(sums - 1.0))), sums.shape)
        raise ValueError(f"each p[s, a] must sum to 1 over (s', r), got p[{s}, {a}].sum() = "
                         f"{sums[s, a]:.12g}")
    return TabularMDP(p.sum(axis=3), (p * rewards).sum(axis=(2, 3)), gamma)


def tied_greedy_actions(mdp: TabularMDP, V, atol=1e-9):
    r"""All greedy actions of ``V``, not just the one :func:`greedy_policy` picks:

    .. math::
        \text{tied}[s, a] = \Big[\, Q(s, a) \ge \max_{a'} Q(s, a') - \text{atol} \cdot
        \max\big(1, |\max_{a'} Q(s, a')|\big) \Big], \quad
        Q(s, a) = R(s, a) + \gamma \sum_{s'} P(s' \mid s, a) V(s').

    With ``V = V*`` (and ``gamma < 1``) every deterministic policy that picks a tied action in
    every state is optimal; :func:`greedy_policy` returns the one with the lowest indices.

    =========  ==========  ===================================================
    argument   shape       meaning
    =========  ==========  ===================================================
    ``mdp``    .           a :class:`TabularMDP`
    ``V``      (S,)        state values
    ``atol``   scalar      relative tie tolerance, in [0, 1e-3]
    returns    (S, A)      bool numpy mask of the maximising actions
    =========  ==========  ===================================================

    Defined in: MDPs and dynamic programming, section The Gambler's problem: tied optimal
    policies.
    """
    _require_mdp(mdp)
    atol = require_real(atol, "atol")
    if not 0.0 <= atol <= 1e-3:
        raise ValueError(f"atol must be in [0, 1e-3], got {atol}")
    Q = _q(mdp, _values_in(mdp, V))
    best = Q.max(axis=1, keepdims=True)
    return Q >= best - atol * np.maximum(1.0, np.abs(best))


def gamblers_problem(p_heads=0.4, goal: int = 100) -> TabularMDP:
    r"""Sutton and Barto's Gambler's problem (Example 4.3) as an undiscounted MDP.

    The capital s is in 0, ..., ``goal``; a stake of a + 1 (action a) wins with probability
    ``p_heads`` and is lost otherwise. Reaching ``goal`` pays +1 and ends the episode, reaching 0
    ends it with nothing; so V*(s) is the highest probability of reaching the goal from s. The
    stakes allowed in s are 1, ..., min(s, goal - s); a larger one is clipped to that maximum, so
    every action is defined in every state (a clipped action duplicates the largest stake, and
    :func:`tied_greedy_actions` reports it tied with it). Every stake is at least 1, so every
    policy ends its episodes: gamma = 1 is safe.

    =============  ======  =====================================================
    argument       shape   meaning
    =============  ======  =====================================================
    ``p_heads``    scalar  probability of winning a stake, in (0, 1)
    ``goal``       int     the capital to reach, >= 2
    returns        .       a :class:`TabularMDP` with S = goal + 1 states,
                           A = goal // 2 actions (stake = action + 1), gamma = 1
    =============  ======  =====================================================

    Defined in: MDPs and dynamic programming, section The Gambler's problem: tied optimal
    policies.
    """
    p_heads = require_real(p_heads, "p_heads")
    if not 0.0 < p_heads < 1.0:
        raise ValueError(f"p_heads must be in (0, 1), got {p_heads}")
    goal = require_int(goal, "goal", minimum=2)
    S, A = goal + 1, goal // 2
    s = np.arange(1, goal)[:, None]                       # the non-terminal capitals
    stake = np.minimum(np.arange(1, A + 1)[None, :], np.minimum(s, goal - s))
    P = np.zeros((S, A, S))
    R = np.zeros((S, A))
    rows, acts = np.broadcast_arrays(s, np.arange(A)[None, :])
    P[rows, acts, s + stake] += p_heads
    P[rows, acts, s - stake] += 1.0 - p_heads
    R[1:goal] = p_heads * (s + stake == goal)
    P[0, :, 0] = P[goal, :, goal] = 1.0
    return TabularMDP(P, R, 1.0)


# ----------------------------------------------------------------------------------------------
# Test problems and simulation
# ----------------------------------------------------------------------------------------------

def random_mdp(num_states: int, num_actions: int, gamma: float = 0.9, *, seed: int = 0,
               terminal_prob: float = 0.0, concentration: float = 1.0,
               torch_tensors: bool = False) -> TabularMDP:
    r"""A random MDP for tests and exercise checks.

    Rows of ``P`` are Dirichlet(``concentration``) draws over the states (small concentrations
    give nearly deterministic transitions), rewards are standard normal. With
    ``terminal_prob > 0`` the last state is terminal (absorbing, zero reward) and every other
    (s, a) enters it with probability at least ``terminal_prob``, so the problem is episodic
    (and ``gamma = 1`` is allowed).

    Defined in: MDPs and dynamic programming, section Exercises.
    """
    S = require_int(num_states, "num_states", minimum=1)
    A = require_int(num_actions, "num_actions", minimum=1)
    seed = require_int(seed, "seed", minimum=0)
    terminal_prob = require_real(terminal_prob, "terminal_prob")
    if not 0.0 <= terminal_prob <= 1.0:
        raise ValueError(f"terminal_prob must be in [0, 1], got {terminal_prob}")
    if terminal_prob > 0 and S < 2:
        raise ValueError("num_states must be >= 2 when terminal_prob > 0")
    concentration = require_real(concentration, "concentration")
    if concentration <= 0:
        raise ValueError(f"concentration must be > 0, got {concentration}")
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(S, concentration), size=(S, A))
    P /= P.sum(axis=2, keepdims=True)
    R = rng.standard_normal((S, A))
    if terminal_prob > 0:
        P = (1 - terminal_prob) * P
        P[:, :, -1] += terminal_prob
        P[-1] = 0.0
        P[-1, :, -1] = 1.0
        R[-1] = 0.0
    if torch_tensors:
        P, R = torch.as_tensor(P), torch.as_tensor(R)
    return TabularMDP(P, R, gamma)


def rollout_returns(env, policy, num_episodes: int, gamma: float = 1.0, *, seed: int = 0,
                    max_steps: int = 100_000) -> np.ndarray:
    r"""Discounted returns :math:`G_0 = \sum_t \gamma^t r_{t+1}` of episodes played in ``env``
    with a deterministic tabular policy, for Monte Carlo checks of computed values.

    ==================  ======  =================================================================
    argument            shape   meaning
    ==================  ======  =================================================================
    ``env``             .       a gymnasium environment with discrete observations
    ``policy``          (S,)    one action per state
    ``num_episodes``    int     number of episodes; episode i is reset with ``seed + i``
    ``max_steps``       int     an episode still running after this many steps raises ValueError
    returns             (N,)    float64 numpy array of returns
    ==================  ======  =================================================================

    Episodes end when the environment says ``terminated`` or ``truncated`` (a ``TimeLimit``
    truncates, which biases the returns: use ``max_episode_steps`` large enough).

    Defined in: MDPs and dynamic programming, section FrozenLake: a model from gymnasium.
    """
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    gamma = _scalar(gamma, "gamma")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    seed = require_int(seed, "seed", minimum=0)
    max_steps = require_int(max_steps, "max_steps", minimum=1)
    actions = np.asarray(_to_numpy64(as_array(policy, "policy")))
    if actions.ndim != 1 or np.any(actions != np.round(actions)):
        raise ValueError(f"policy must be an (S,) array of integer actions, got shape {actions.shape}")
    actions = actions.astype(np.int64)
    returns = np.zeros(num_episodes)
    for i in range(num_episodes):
        s, _ = env.reset(seed=seed + i)
        discount, G = 1.0, 0.0
        for _ in range(max_steps):
            s, r, terminated, truncated, _ = env.step(int(actions[int(s)]))
            G += discount * float(r)
            discount *= gamma
            if terminated or truncated:
                break
        else:
            raise ValueError(f"an episode ran max_steps={max_steps} steps without ending")
        returns[i] = G
    return returns
