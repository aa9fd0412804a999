"""The fused passes of many draws (scg/kernels/fused.py, scg/core/facts.py) give the
general path's numbers exactly: numpy's normal noise drawn by numba, the Normal score
term without its log-densities (plain, leave-one-out, other baselines), x ** 2 with its sum and its
cotangent, the location-scale path; their checks raise the same errors; reused output
buffers are never handed out while referenced."""

import warnings

import numpy as np
import pytest

import scg
from scg.core.tape import THREAD
from scg.estimators import score as score_module
from scg.core import facts, rewrites
from scg.kernels import fused
from scg.kernels import parallel as P
from scg.kernels.primitives import PARALLEL_MIN

N = PARALLEL_MIN + 7  # many draws: the fused passes apply
THETA = {"mu": 2.0, "sigma": 1.3}


@pytest.fixture
def general_path(monkeypatch):
    """Switch every fused pass off: the general path of the same gradient."""
    def off():
        none = lambda *args, **kwargs: None  # noqa: E731
        for name in ("standard_normal", "normal_draw", "square", "square_vjp",
                     "loc_scale_path", "normal_score_pair", "normal_log_prob_nonfinite"):
            monkeypatch.setattr(fused, name, none)
        monkeypatch.setitem(rewrites._TABLE, "square", None)
        monkeypatch.setitem(rewrites._TABLE, "square_vjp", None)
        monkeypatch.setattr(score_module, "_FUSED_MIN", 1 << 62)
    return off


def normal_model(estimator):
    def model(theta):
        x = scg.sample("x", scg.Normal(theta["mu"], theta["sigma"]), estimator=estimator)
        return x ** 2
    return model


ESTIMATORS = {"pathwise": "pathwise", "score": "score", "loo": scg.Score("loo"),
              "constant": scg.Score(3.0), "moving": scg.Score(scg.baselines.MovingAverage())}


def _gradients(estimator):
    E = scg.expectation(normal_model(ESTIMATORS[estimator]), n=N, seed=0)
    out = []
    for _ in range(2):  # (a second call: stateful baselines, reused buffers)
        gs = scg.grad_samples(E)(THETA)
        out += [gs.samples["mu"], gs.samples["sigma"]]
    g = scg.grad(scg.expectation(normal_model(ESTIMATORS[estimator]), n=N, seed=1))(THETA)
    v, _ = scg.value_and_grad(scg.expectation(normal_model(ESTIMATORS[estimator]), n=N,
                                              seed=2))(THETA)
    return out + [np.asarray(g["mu"]), np.asarray(g["sigma"]), np.asarray(v)]


@pytest.mark.filterwarnings("ignore:site 'x'.*starts without history")
@pytest.mark.parametrize("estimator", list(ESTIMATORS))
def test_fused_passes_give_the_general_paths_numbers(estimator, general_path):
    fast = _gradients(estimator)
    general_path()
    for a, b in zip(fast, _gradients(estimator)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("baseline", [None, "loo"])
def test_the_score_term_is_the_cost_times_the_score(baseline):
    E = scg.expectation(normal_model(scg.Score(baseline)), n=N, seed=0)
    gs = scg.grad_samples(E)(THETA)
    x = E.last_trace.sites["x"].value
    q = x ** 2
    if baseline == "loo":
        q = q * (N / (N - 1)) - np.sum(q) / (N - 1)
    mu, sigma = THETA["mu"], THETA["sigma"]
    z = (x - mu) / sigma
    np.testing.assert_array_equal(gs.samples["mu"], q * (z / sigma))
    np.testing.assert_array_equal(gs.samples["sigma"], q * ((z * z - 1.0) / sigma))
    assert E.last_trace.sites["x"]._log_prob is None  # (no log-densities were stored)


@pytest.mark.parametrize("which", ["mu", "sigma"])
def test_one_parameter_differentiated(which, general_path):
    def model(p):
        mu, sigma = (p, 1.3) if which == "mu" else (2.0, p)
        return scg.sample("x", scg.Normal(mu, sigma), estimator="score") ** 2

    def run():
        return scg.grad_samples(scg.expectation(model, n=N, seed=0))(THETA[which]).samples
    fast = run()
    general_path()
    np.testing.assert_array_equal(fast, run())


def test_parameters_that_differ_between_draws(general_path):
    def model(mu):
        z = scg.sample("z", scg.Normal(mu, 1.0))
        x = scg.sample("x", scg.Normal(z, 0.5), estimator=scg.Score("loo"))
        return x ** 2 + z

    def run():
        return scg.grad_samples(scg.expectation(model, n=N, seed=0))(0.7).samples
    fast = run()
    general_path()
    np.testing.assert_array_equal(fast, run())


def test_a_degenerate_scale_names_the_site():
    scg.distributions.set_validation(False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with pytest.raises(FloatingPointError, match="site 'x': log_prob is not finite"):
                scg.grad_samples(scg.expectation(normal_model("score"), n=N, seed=0))(
                    {"mu": 2.0, "sigma": 0.0})
    finally:
        scg.distributions.set_validation(True)


@pytest.mark.parametrize("estimator", ["pathwise", "score"])
def test_an_overflowing_cost_is_caught(estimator):
    # (a scale of 1 beside 1e200 would be lost in the rounding, which the score refuses
    # first: tests/distributions/test_distribution_edges.py)
    with pytest.raises(FloatingPointError, match="cost 'return'"):
        scg.grad_samples(scg.expectation(normal_model(estimator), n=N, seed=0))(
            {"mu": 1e200, "sigma": 1e190})


def test_an_overflowing_gradient_is_caught():
    # q = 1e300 x^2 is about 1e300 and the score about 1e11: their product is not finite
    def model(theta):
        x = scg.sample("x", scg.Normal(theta["mu"], theta["sigma"]), estimator="score")
        return 1e300 * x ** 2
    with pytest.raises(FloatingPointError, match="gradient estimate for .* is not finite"):
        scg.grad_samples(scg.expectation(model, n=N, seed=0))({"mu": 1.0, "sigma": 1e-11})


def test_counts_are_used_once_and_sums_only_inside_a_call():
    x = np.random.default_rng(0).normal(size=N)
    a = fused.square(x)
    a[0] = np.inf  # (a change after the kernel: the count it noted is no longer used...)
    assert P.count_nonfinite(a) == 0  # (...once it is taken: a cost is checked on arrival)
    assert P.count_nonfinite(a) == 1  # taken once: counted again
    scg.grad_samples(scg.expectation(normal_model(scg.Score("loo")), n=N, seed=0))(THETA)
    assert not THREAD.sums  # sums are dropped when the call ends
    assert facts.known_sum(a) is None


def test_reused_buffers_are_never_handed_out_while_referenced():
    M = fused.REUSE_MIN + 7  # (outputs this large are reused; smaller ones are np.empty)
    a = fused.empty((M,))
    address = a.__array_interface__["data"][0]
    b = fused.empty((M,))
    assert not np.shares_memory(a, b)
    a.flags.writeable = False
    del a
    c = fused.empty((M,))  # the buffer of a, free again
    assert c.__array_interface__["data"][0] == address and c.flags.writeable
    assert any(buffer is c.base for buffer in fused._BUFFERS)  # (kept by the module)
    assert not any(buffer is fused.empty((N,)).base for buffer in fused._BUFFERS)
    del b, c
    E = scg.expectation(normal_model("pathwise"), n=M, seed=0)
    first = scg.grad_samples(E)(THETA).samples
    kept = {k: v.copy() for k, v in first.items()}
    second = scg.grad_samples(E)(THETA).samples
    for k in first:
        np.testing.assert_array_equal(first[k], kept[k])
        assert not np.shares_memory(first[k], second[k])


@pytest.mark.parametrize("shape", [(N,), (N // 7, 7)])
def test_numpys_normal_noise_drawn_by_numba(shape):
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    for _ in range(3):
        np.testing.assert_array_equal(scg.Normal(0.0, 1.0).noise(a, shape),
                                      b.standard_normal(shape))
    assert a.bit_generator.state == b.bit_generator.state
    other = np.random.Generator(np.random.Philox(3))  # (numpy's own draw)
    np.testing.assert_array_equal(scg.Normal(0.0, 1.0).noise(other, (N,)),
                                  np.random.Generator(np.random.Philox(3)).standard_normal(N))


def test_a_draws_log_density_count_is_used_only_while_it_is_read_only():
    x = fused.normal_draw(np.random.default_rng(0).normal(size=N), 2.0, 0.0)
    assert fused.normal_log_prob_nonfinite(x, 2.0, 0.0) == N  # (counted again: writeable)
    x.flags.writeable = False
    assert facts.noted(x, ("normal_log_prob_nonfinite", 2.0, 0.0)) == N


def test_a_forked_child_has_its_own_buffers():
    import multiprocessing
    kept = fused.empty((N,))  # (held here: the child must not be handed it again)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        assert pool.apply(_child_gradient) == pytest.approx(4.0, abs=0.2)
    assert kept.shape == (N,)


def _child_gradient():
    E = scg.expectation(normal_model(scg.Score("loo")), n=N, seed=0)
    return float(scg.grad_samples(E)({"mu": 2.0, "sigma": 1.0}).mean["mu"])
