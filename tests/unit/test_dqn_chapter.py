"""The numerical claims of the chapter "Deep Q-networks" (book/dqn.ipynb), checked again with the
same seeds and settings as the chapter, so that a change to the package that breaks a claim
fails here as well as in the book's build."""

import inspect

import numpy as np
import pytest
import torch

from rlnotes import dqn
from rlnotes.deeprl import Evaluator, ReplayBuffer, make_vec_env, step_transitions

# as in the chapter
CHAPTER_SEEDS, CHAPTER_BUDGET = (0, 1, 2), 12_288
ABLATION_SEEDS = CHAPTER_SEEDS  # the ablation reuses the chapter's runs, same budget
EVAL_EVERY = 2_048
GAMMA = inspect.signature(dqn.train).parameters["gamma"].default  # the chapter's discount


def run(seed, total_steps, **hp):
    evaluator = Evaluator("CartPole-v1", seed)
    curve = []

    def callback(steps, policy):
        if steps % EVAL_EVERY == 0:
            curve.append(evaluator(policy).mean())

    policy = dqn.train("CartPole-v1", total_steps, seed=seed, callback=callback, **hp)
    evaluator.close()
    return np.array(curve), policy


def test_replay_decorrelates_successive_samples():
    rng = np.random.default_rng(0)
    envs = make_vec_env("CartPole-v1", 1, seed=0)
    obs, _ = envs.reset(seed=0)
    autoreset = np.zeros(1, dtype=bool)
    buffer = ReplayBuffer(5_000, (4,))
    for _ in range(5_000):
        obs, batch, autoreset = step_transitions(envs, np.asarray([rng.integers(2)]), obs,
                                                 autoreset)
        buffer.add(batch["obs"], batch["actions"], batch["rewards"], batch["next_obs"],
                   batch["terminated"])
    theta = buffer.obs[: len(buffer), 2].numpy()
    sampled = buffer.sample(len(buffer), torch.Generator().manual_seed(0))[0][:, 2].numpy()
    assert np.corrcoef(theta[:-1], theta[1:])[0, 1] > 0.85
    assert abs(np.corrcoef(sampled[:-1], sampled[1:])[0, 1]) < 0.05


def test_polyak_average_lags_by_about_one_over_tau():
    online, soft = [torch.zeros(1)], [torch.zeros(1)]
    for _ in range(400):
        online[0] += 1.0
        dqn.polyak_update(soft, online, 0.02)
    assert abs((400 - soft[0].item()) - (1 / 0.02 - 1)) < 0.5


@pytest.fixture(scope="module")
def chapter_runs():
    return [run(seed, CHAPTER_BUDGET) for seed in CHAPTER_SEEDS]


def test_a_seed_reaches_475_and_every_seed_learns_within_the_chapter_budget(chapter_runs):
    assert sum((c >= 475).any() for c, _ in chapter_runs) >= 1
    assert all(c.max() > 5 * c[0] for c, _ in chapter_runs)


def test_the_chapter_runs_reach_the_epsilon_floor():
    defaults = inspect.signature(dqn.train).parameters
    end, steps = defaults["epsilon_end"].default, defaults["exploration_steps"].default
    assert dqn.epsilon_schedule(CHAPTER_BUDGET, start=1.0, end=end, decay_steps=steps) == end
    assert CHAPTER_BUDGET / 2 < steps < CHAPTER_BUDGET


def test_ablation_claims(chapter_runs):
    variants = {"no replay": dict(buffer_size=256, batch_size=256),
                "no target": dict(tau=1.0, target_update_interval=1),
                "hard": dict(tau=1.0, target_update_interval=200),
                "plain": dict(double=False)}
    late = {"full": np.mean([c[-3:].mean() for c, _ in chapter_runs])}
    est = {"full": np.mean([dqn.start_value_estimate(p, "CartPole-v1", GAMMA, seed=s)
                            for s, (_, p) in zip(ABLATION_SEEDS, chapter_runs)], axis=0)}
    for name, hp in variants.items():
        runs = [run(seed, CHAPTER_BUDGET, **hp) for seed in ABLATION_SEEDS]
        late[name] = np.mean([c[-3:].mean() for c, _ in runs])
        est[name] = np.mean([dqn.start_value_estimate(p, "CartPole-v1", GAMMA, seed=s)
                             for s, (_, p) in zip(ABLATION_SEEDS, runs)], axis=0)
    assert GAMMA == 0.995
    # no target network: the predicted start value near the ceiling of 200, above the others'
    others = max(e[0] for name, e in est.items() if name != "no target")
    assert est["no target"][0] > 150 and est["no target"][0] > 1.25 * others
    assert late["no target"] > 0.5 * late["full"]
    assert est["hard"][0] < est["hard"][1]
    assert abs(sum(0.995 ** np.arange(500)) - 183.69) < 0.01
    assert est["full"][0] < est["full"][1] and est["plain"][0] < est["plain"][1]


def test_final_policies_fail_mostly_by_driving_the_cart_off_the_track(chapter_runs):
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    early = off_track = 0
    for _, policy in chapter_runs:
        for episode in range(5):
            obs, _ = env.reset(seed=20_000 + episode)
            length, done = 0, False
            while not done:
                obs, _, terminated, truncated, _ = env.step(int(policy(obs[None])[0]))
                length, done = length + 1, terminated or truncated
            if length < 500:  # an early end: mostly the cart off the track, the pole upright
                early += 1
                off_track += abs(obs[0]) > 2.4 and abs(obs[2]) < 0.21
    env.close()
    assert early >= 1 and off_track >= early / 2
    assert round(0.995**120, 2) == 0.55 and round(0.99**120, 2) == 0.30
    # the cart position's std in the standardisation fitted before the first update (eps near 1)
    x_std = float(chapter_runs[0][1].q_net[0].std[0])
    assert 0.05 < x_std < 0.15 and 10 * x_std < 1.5


def test_baird_hold_needed_scales_like_one_over_alpha():
    """The solution of the exercise ex-dqn-baird-sync: the shortest hold that converges is 9
    sweeps at alpha = 0.1 and 77 at alpha = 0.01 (alpha C_tgt = 0.9 and about 0.77)."""
    from rlnotes.approx import baird_expected_td, baird_features

    X = baird_features()
    gamma, nu = 0.99, np.full(7, 1 / 7)

    def rms(alpha, hold, sweeps):
        w = baird_expected_td(sweeps, alpha=alpha, target_sync=hold)
        return np.sqrt(((w @ X.T) ** 2).mean(axis=1))

    def copy_map_radius(alpha, hold):
        # the map from one copy's values to the next: `hold` sweeps toward fixed targets
        A = np.eye(8) - alpha * X.T @ np.diag(nu) @ X
        B = alpha * gamma * np.outer(X.T @ nu, X[6])
        S = sum(np.linalg.matrix_power(A, j) for j in range(hold))
        M = np.linalg.matrix_power(A, hold) + S @ B
        return max(abs(np.linalg.eigvals(X @ M @ np.linalg.pinv(X))))

    shortest = {alpha: next(k for k in range(1, 200) if copy_map_radius(alpha, k) < 1)
                for alpha in (0.1, 0.01)}
    assert shortest == {0.1: 9, 0.01: 77}
    assert rms(0.01, 20, 5_000)[-1] > 1e4             # 20 sweeps at the smaller step: diverges
    assert rms(0.1, 8, 5_000)[-1] > 10                # just below the threshold at alpha = 0.1
    assert rms(0.1, 10, 5_000)[-1] < 0.01
    # near the threshold at alpha = 0.01 both are far from 0 after 40,000 sweeps; the trend decides
    below, above = rms(0.01, 74, 100_000), rms(0.01, 80, 100_000)
    assert below[40_000] > 10 and above[40_000] > 10
    assert below[-1] > below[40_000] and above[-1] < above[40_000]


def test_an_epsilon_floor_puts_off_balance_states_in_the_buffer():
    """The solution of the exercise ex-dqn-epsilon, part (b)."""
    def balance(obs):
        return (obs[:, 2] + 0.5 * obs[:, 3] + 0.05 * obs[:, 0] + 0.1 * obs[:, 1] > 0).astype(np.int64)

    def share(epsilon, seed, steps=16_000, num_envs=8):
        envs = make_vec_env("CartPole-v1", num_envs)
        obs, _ = envs.reset(seed=seed)
        autoreset, rng, visited, terminated = np.zeros(num_envs, bool), np.random.default_rng(seed), [], 0
        for _ in range(steps // num_envs):
            a = np.where(rng.random(num_envs) < epsilon, rng.integers(2, size=num_envs), balance(obs))
            obs, batch, autoreset = step_transitions(envs, a, obs, autoreset)
            visited.append(batch["obs"])
            terminated += int(batch["terminated"].sum())
        envs.close()
        return float((np.abs(np.concatenate(visited)[:, 2]) > 0.02).mean()), terminated

    for seed in (0, 1, 2):
        (s0, t0), (s1, _), (s5, _) = share(0.0, seed), share(0.01, seed), share(0.05, seed)
        assert t0 == 0 and s0 < 0.1                  # greedy: the pole never falls, stays upright
        assert s5 > 1.3 * s0 and s5 > s1             # the floor of 0.05 adds off-balance states
        assert abs(s1 - s0) < abs(s5 - s0)           # 0.01 changes it less
