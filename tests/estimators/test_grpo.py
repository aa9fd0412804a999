"""The GRPO baseline: the expectation of the GRPO estimator itself, by enumeration.

GRPO is knowingly biased, so the test is not against the gradient of the expected cost
but against the exact expectation of what GRPO computes, over every assignment of the
group's draws (a softmax policy over a few tokens); and the bias against the exact
gradient is there (it is not RLOO in disguise). One BiasWarning per expectation.
"""

import itertools
import warnings

import numpy as np
import pytest

import scg

REWARDS = np.array([1.0, 0.0, 2.5])
THETA = np.array([0.3, -0.2, 0.1])


def _softmax(theta):
    p = np.exp(theta - theta.max())
    return p / p.sum()


def exact_grpo(theta, n, groups, scale, eps):
    """E of (1/n) sum_i sum_g A_ig grad log p(k_ig), over all V^(n groups) assignments."""
    p = _softmax(theta)
    V = len(p)
    total = np.zeros(V)
    for ks in itertools.product(range(V), repeat=n * groups):
        k = np.array(ks).reshape(n, groups)
        q = -REWARDS[k]  # (the cost: minus the reward)
        centered = q - q.mean(axis=0, keepdims=True)
        if scale == "group":
            a = centered / (q.std(axis=0, ddof=1, keepdims=True) + eps)
        elif scale == "batch":
            a = centered / (q.std(ddof=1) + eps)
        else:
            a = centered
        score = np.eye(V)[k] - p  # grad log p(k) of a softmax
        g = np.einsum("ig,igv->v", a, score) / n
        total += np.prod(p[k]) * g
    return total


def exact_gradient(theta):
    p = _softmax(theta)
    return p * (-REWARDS - p @ -REWARDS)


def _model(baseline, groups):
    def model(theta):
        with scg.plate("prompts", groups):
            k = scg.sample("k", scg.Categorical(logits=np.broadcast_to(theta, (groups, 3))),
                           estimator=scg.Score(baseline))
            return -scg.take(REWARDS, k)
    return model


def _estimates(baseline, n, groups, calls, seed):
    E = scg.expectation(_model(baseline, groups), n=n, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        return np.array([scg.grad(E)(THETA) for _ in range(calls)])


@pytest.mark.parametrize("scale, n, groups", [("group", 3, 1), ("group", 2, 2),
                                              ("batch", 2, 2), (None, 3, 1)])
def test_equal_to_the_exact_expectation_of_grpo_itself(scale, n, groups):
    eps = 1e-4
    runs = _estimates(scg.baselines.GRPO(scale=scale, eps=eps), n, groups, 3_000, seed=1)
    mean, stderr = runs.mean(axis=0), runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
    exact = exact_grpo(THETA, n, groups, scale, eps)
    z = (mean - exact) / stderr
    assert np.all(np.abs(z) < 5), (mean, exact, z)
    # and it is biased: the exact gradient of the expected cost (times the groups) differs
    truth = groups * exact_gradient(THETA)
    assert np.max(np.abs(exact - truth)) > 10 * np.max(stderr)


def test_dr_grpo_is_the_gradient_scaled_by_n_minus_1_over_n():
    n = 3
    exact = exact_grpo(THETA, n, 1, None, 0.0)
    np.testing.assert_allclose(exact, (n - 1) / n * exact_gradient(THETA), rtol=1e-12,
                               atol=1e-15)


def test_one_bias_warning_per_expectation_and_explain_says_biased():
    E = scg.expectation(_model(scg.baselines.GRPO(), 4), n=8, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            scg.grad(E)(THETA)
    bias = [w for w in caught if issubclass(w.category, scg.BiasWarning)]
    assert len(bias) == 1
    assert "(n - 1) / n = 1 - 1/8" in str(bias[0].message)
    assert "scg.Score('loo')" in str(bias[0].message)
    text = E.last_trace.explain()
    assert "biased;" in text and "GRPO" in text and "group std + eps" in text
    # (a second expectation warns once again)
    E2 = scg.expectation(_model(scg.baselines.GRPO(), 4), n=8, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scg.grad(E2)(THETA)
    assert sum(issubclass(w.category, scg.BiasWarning) for w in caught) == 1


def test_errors():
    with pytest.raises(ValueError, match="scale must be 'group', 'batch' or None"):
        scg.baselines.GRPO(scale="std")
    with pytest.raises(ValueError, match="eps must be a number >= 0"):
        scg.baselines.GRPO(eps=-1.0)
    E = scg.expectation(_model(scg.baselines.GRPO(), 2), n=1, seed=0)
    with pytest.raises(scg.EstimatorError, match="needs n >= 2"):
        scg.grad(E)(THETA)
    E = scg.expectation(_model(scg.baselines.GRPO(), 2), n=4, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        with pytest.raises(scg.EstimatorError, match="first derivatives only"):
            scg.hessian(E)(THETA)


def test_under_jit_equal_to_eager():
    E, Ej = (scg.expectation(_model(scg.baselines.GRPO("batch"), 4), n=8, seed=2)
             for _ in range(2))
    step = scg.jit(scg.grad(Ej))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        for _ in range(5):
            np.testing.assert_allclose(step(THETA), scg.grad(E)(THETA), rtol=1e-12,
                                       atol=1e-14)
    assert step.stats["replays"] >= 2, step.explain()


def test_a_group_of_equal_costs_has_advantage_zero_also_at_eps_zero():
    q = np.full((6, 2), 0.1)
    q[:, 1] = [0.3, 0.1, 0.7, 0.2, 0.2, 0.9]  # (element 1 varies, element 0 does not)
    for eps in (0.0, 1e-4):
        a = scg.baselines.GRPO(eps=eps).advantage(q, {"warned": True})
        assert np.all(a[:, 0] == 0.0)  # (exactly: 0.1 is not a sum's rounding away)
        c = q[:, 1] - q[:, 1].mean()
        np.testing.assert_allclose(a[:, 1], c / (np.std(q[:, 1], ddof=1) + eps), rtol=1e-12)

    def model(theta):
        x = scg.sample("x", scg.Bernoulli(logits=theta),
                       estimator=scg.Score(scg.baselines.GRPO(eps=0)))
        return 0.0 * x + 1.0

    E = scg.expectation(model, n=8, seed=0)
    with pytest.warns(scg.BiasWarning):
        g = scg.grad(E)(np.zeros(3))
    assert np.all(g == 0.0)
