"""seqlab.hmm: filtering and smoothing on the umbrella world (Russell & Norvig's worked numbers)."""

from __future__ import annotations

import numpy as np
import pytest

from seqlab.hmm import filter_step, hmm_backward, hmm_filter, hmm_smooth, hmm_window, sample_hmm

A = np.array([[0.7, 0.3], [0.3, 0.7]])     # state 0 = rain
B = np.array([[0.9, 0.1], [0.2, 0.8]])     # observation 0 = umbrella
PRIOR = np.array([0.5, 0.5])


def test_umbrella_world_textbook_numbers():
    f = hmm_filter(A, B, PRIOR, [0, 0])
    assert np.allclose(f[:, 0], [0.818, 0.883], atol=5e-4)
    assert np.allclose(A.T @ f[0], [0.627, 0.373], atol=5e-4)
    b = hmm_backward(A, B, [0, 0])
    assert np.allclose(b[0] / b[0].sum(), np.array([0.69, 0.41]) / 1.10, atol=1e-9)
    assert np.allclose(hmm_smooth(A, B, PRIOR, [0, 0])[0, 0], 0.883, atol=5e-4)


def test_filter_is_brute_force_bayes():
    rng = np.random.default_rng(0)
    A3 = rng.dirichlet(np.ones(3), size=3)
    B3 = rng.dirichlet(np.ones(2), size=3)
    prior = rng.dirichlet(np.ones(3))
    obs = [1, 0, 1, 1]
    # enumerate all state paths x_0..x_T
    import itertools
    joint_last, joint_each = np.zeros(3), np.zeros((len(obs), 3))
    for path in itertools.product(range(3), repeat=len(obs) + 1):
        p = prior[path[0]]
        for t, e in enumerate(obs, start=1):
            p *= A3[path[t - 1], path[t]] * B3[path[t], e]
        joint_last[path[-1]] += p
        for t in range(len(obs)):
            joint_each[t, path[t + 1]] += p
    assert np.allclose(hmm_filter(A3, B3, prior, obs)[-1], joint_last / joint_last.sum())
    assert np.allclose(hmm_smooth(A3, B3, prior, obs), joint_each / joint_each.sum(1, keepdims=True))


def test_batched_filter_matches_single_runs_and_step():
    obs = np.array([[0, 1, 1, 0], [1, 1, 0, 0]])
    batched = hmm_filter(A, B, PRIOR, obs)
    assert batched.shape == (2, 4, 2)
    for n in range(2):
        assert np.allclose(batched[n], hmm_filter(A, B, PRIOR, obs[n]))
    assert np.allclose(filter_step(PRIOR, A, B, 0), batched[0, 0])
    assert hmm_smooth(A, B, PRIOR, obs).shape == (2, 4, 2)


def test_sampling_is_seeded_and_follows_the_model():
    s1, e1 = sample_hmm(A, B, PRIOR, 50, n=400, seed=1)
    s2, e2 = sample_hmm(A, B, PRIOR, 50, n=400, seed=1)
    assert np.array_equal(s1, s2) and np.array_equal(e1, e2) and s1.shape == (400, 50)
    stay = np.mean(s1[:, 1:] == s1[:, :-1])
    umbrella_if_rain = np.mean(e1[s1 == 0] == 0)
    assert abs(stay - 0.7) < 0.02 and abs(umbrella_if_rain - 0.9) < 0.02


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"A \(transitions\) must be square"):
        hmm_filter(np.ones((2, 3)) / 3, B, PRIOR, [0])
    with pytest.raises(ValueError, match=r"B \(emissions\) must have shape \(S, K\) = \(2, K\)"):
        hmm_filter(A, B.T[:1], PRIOR, [0])
    with pytest.raises(ValueError, match="rows summing to 1"):
        hmm_filter(A * 2, B, PRIOR, [0])
    with pytest.raises(ValueError, match=r"prior must have shape \(2,\)"):
        hmm_filter(A, B, [1.0], [0])
    with pytest.raises(ValueError, match=r"observations must lie in 0..1"):
        hmm_filter(A, B, PRIOR, [0, 2])
    with pytest.raises(ValueError, match="observations must be integers"):
        hmm_filter(A, B, PRIOR, [0.5])
    with pytest.raises(ValueError, match="steps and n must be at least 1"):
        sample_hmm(A, B, PRIOR, 0)


def test_window_of_all_the_evidence_is_the_filter_or_the_smoother():
    _, obs = sample_hmm(A, B, PRIOR, 9, n=5, seed=3)
    skewed = np.array([0.9, 0.1])                               # not stationary: the window's start is pushed through A
    assert np.allclose(hmm_window(A, B, skewed, obs, before=9), hmm_filter(A, B, skewed, obs))
    assert np.allclose(hmm_window(A, B, skewed, obs, before=9, after=9), hmm_smooth(A, B, skewed, obs))
    assert np.allclose(hmm_window(A, B, PRIOR, obs[0], before=9), hmm_filter(A, B, PRIOR, obs[0]))


def test_window_of_one_observation_ignores_the_rest():
    one = hmm_window(A, B, PRIOR, [0, 1, 1, 0], before=0)
    assert np.allclose(one[:, 0], [0.818, 0.111, 0.111, 0.818], atol=5e-4)      # 0.9 / 1.1 and 0.1 / 0.9
    two = hmm_window(A, B, PRIOR, [1, 1, 0, 0], before=1)
    assert np.allclose(two[3], hmm_filter(A, B, PRIOR, [0, 0])[1])                # the last two days only
    with pytest.raises(ValueError, match="must be >= 0"):
        hmm_window(A, B, PRIOR, [0, 1], before=-1)
