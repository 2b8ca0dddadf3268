"""Blackjack as in Sutton and Barto's Example 5.1 and gymnasium's ``Blackjack-v1`` with
``sab=True``, simulated for many episodes at once with numpy.

Cards are drawn with replacement (an infinite deck): 1 (ace) to 9 with probability 1/13 each,
10 with probability 4/13 (ten, jack, queen, king). The player and the dealer get two cards; one
of the dealer's cards is showing. An ace counts 11 if that does not bust the hand (a *usable*
ace), else 1. The player hits until it sticks or goes over 21 (reward -1); then the dealer hits
until its sum is at least 17. Reward +1 if the player's sum is higher or the dealer busts, 0 on a
draw, -1 otherwise; gamma = 1. A *natural* (an ace and a ten-card as the first two cards, the
player sticking on it) wins, +1, unless the dealer's two cards are a natural too (a draw): Sutton
and Barto's rule, which gymnasium applies with ``gym.make("Blackjack-v1", sab=True)``; its
default ``Blackjack-v1`` instead compares the natural's 21 with the dealer's final sum, so a
dealer who draws to 21 gets a draw there. The state is (usable ace, player's sum, dealer's card); the
player's decisions matter only for sums 12 to 21 (below 12 a hit can never bust), so those 200
states are the ones the book's figures show.

Defined in: Learning without a model: Monte Carlo and TD, section Blackjack: Monte Carlo
prediction.
"""

from __future__ import annotations

import numpy as np

from rlnotes._validate import require_int

__all__ = ["blackjack_mc_prediction", "blackjack_returns"]


def _draw(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.minimum(rng.integers(1, 14, size=n), 10)          # 10, J, Q, K all count 10


def _total(raw: np.ndarray, ace: np.ndarray) -> np.ndarray:
    """The hand's value: an ace counts 11 when that keeps the sum at most 21."""
    return np.where(ace & (raw + 10 <= 21), raw + 10, raw)


def _play(num_episodes: int, stick_at: int, seed):
    """Play episodes with the policy "stick on stick_at or more"; returns the outcome of each
    episode, the (episode, state index) pairs visited with a sum of 12 to 21, and whether the
    player stuck on a natural."""
    rng = np.random.default_rng(seed)
    n = num_episodes
    c1, c2 = _draw(rng, n), _draw(rng, n)
    raw, ace = c1 + c2, (c1 == 1) | (c2 == 1)
    show, hidden = _draw(rng, n), _draw(rng, n)
    natural = (raw == 11) & ace                                  # an ace and a ten-card
    hit_ever = np.zeros(n, dtype=bool)
    reward = np.zeros(n)
    playing = np.ones(n, dtype=bool)
    visits = []                                                  # (episodes, state indices)
    while playing.any():
        total = _total(raw, ace)
        usable = ace & (raw + 10 <= 21)
        idx = np.flatnonzero(playing & (total >= 12))
        visits.append((idx, usable[idx] * 100 + (total[idx] - 12) * 10 + (show[idx] - 1)))
        hit = playing & (total < stick_at)
        hit_ever |= hit
        card = _draw(rng, n)
        raw = np.where(hit, raw + card, raw)
        ace |= hit & (card == 1)
        bust = hit & (_total(raw, ace) > 21)
        reward[bust] = -1.0
        playing &= hit & ~bust                                   # sticking ends the player's turn
    stuck = reward == 0.0                                        # did not bust: the dealer plays
    d_raw, d_ace = show + hidden, (show == 1) | (hidden == 1)
    while True:
        hits = stuck & (_total(d_raw, d_ace) < 17)
        if not hits.any():
            break
        card = _draw(rng, n)
        d_raw = np.where(hits, d_raw + card, d_raw)
        d_ace |= hits & (card == 1)
    player, dealer = _total(raw, ace), _total(d_raw, d_ace)
    outcome = np.sign(player - np.where(dealer > 21, 0, dealer)).astype(np.float64)
    dealer_natural = (show + hidden == 11) & ((show == 1) | (hidden == 1))
    outcome[natural & ~hit_ever & ~dealer_natural] = 1.0         # a natural wins (S&B)
    reward = np.where(stuck, outcome, reward)
    return reward, visits, natural & ~hit_ever


def _check(num_episodes, stick_at, seed):
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    stick_at = require_int(stick_at, "stick_at", minimum=12)
    if stick_at > 22:
        raise ValueError(f"stick_at must be in [12, 22], got {stick_at}")
    if seed is not None:
        seed = require_int(seed, "seed", minimum=0)
    return num_episodes, stick_at, seed


def blackjack_returns(num_episodes: int, stick_at: int = 20, seed: int | None = None) -> np.ndarray:
    """The returns (+1, 0 or -1) of ``num_episodes`` episodes of the policy that sticks on
    ``stick_at`` or more and hits otherwise.

    Defined in: Learning without a model: Monte Carlo and TD, section Blackjack: Monte Carlo
    prediction.
    """
    return _play(*_check(num_episodes, stick_at, seed))[0]


def blackjack_mc_prediction(num_episodes: int, stick_at: int = 20, seed: int | None = None):
    r"""First-visit Monte Carlo prediction of the policy "stick on ``stick_at`` or more" (Sutton
    and Barto, Example 5.1): $V(s)$ is the average return of the episodes that visit s. With
    $\gamma = 1$ and a reward only at the end, every visit's return is the episode's outcome, and
    a state cannot repeat within an episode (the sum only grows, or an ace stops being usable),
    so first-visit and every-visit MC coincide.

    | result | shape |
    | --- | --- |
    | ``V`` | (2, 10, 10): [usable ace][player's sum 12..21][dealer's card 1..10] |
    | ``visits`` | (2, 10, 10): the number of episodes that visited each state |

    Defined in: Learning without a model: Monte Carlo and TD, section Blackjack: Monte Carlo
    prediction.
    """
    reward, visits, _ = _play(*_check(num_episodes, stick_at, seed))
    episodes = np.concatenate([e for e, _ in visits])
    states = np.concatenate([s for _, s in visits])
    count = np.bincount(states, minlength=200)
    total = np.bincount(states, weights=reward[episodes], minlength=200)
    V = np.divide(total, count, out=np.zeros(200), where=count > 0)
    return V.reshape(2, 10, 10), count.reshape(2, 10, 10)
