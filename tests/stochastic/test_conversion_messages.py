"""Errors for values that cannot become Python numbers or plain arrays say what works, and
never send the user to advice that has already been followed (or cannot help)."""

import warnings

import numpy as np
import pytest

import scg


def _message(excinfo):
    return str(excinfo.value)


# ------------------------------------------------- a per-draw value cannot become one number
@pytest.mark.parametrize("convert", [int, float, lambda a: [1.0, 2.0, 3.0][a],
                                     lambda a: list(range(a))], ids=["int", "float", "index",
                                                                     "range"])
def test_per_draw_value_to_a_python_number_points_to_what_works(convert):
    def model(theta):
        a = scg.sample("a", scg.Normal(theta, 1.0))
        return float(np.size(convert(scg.stop_gradient(a))))  # stop_gradient already applied

    with pytest.raises(scg.TracingError) as excinfo:
        scg.expectation(model, n=4, seed=0)(0.0)
    message = _message(excinfo)
    assert "differs between draws" in message and "one Python number" in message
    for advice in ("scg.take(table, k, axis=0)", "np.where", "scg.blackbox"):
        assert advice in message
    assert "stop_gradient" not in message  # the user did that already: it cannot help


def test_per_draw_value_without_stop_gradient_gets_the_same_advice():
    def model(theta):
        return float(scg.sample("a", scg.Categorical(probs=np.ones(3) / 3)))

    with pytest.raises(scg.TracingError, match="scg.take") as excinfo:
        scg.grad(scg.expectation(model, n=4, seed=0))(0.0)
    assert "stop_gradient" not in _message(excinfo)


def test_value_being_differentiated_to_a_python_number_suggests_stop_gradient():
    with pytest.raises(scg.TracingError, match=r"scg\.stop_gradient\(x\)") as excinfo:
        scg.grad(lambda x: int(x))(1.0)
    assert "differs between draws" not in _message(excinfo)


def test_parameter_copied_per_draw_converts_after_stop_gradient():
    # scg.grad_samples copies the parameters once per draw: they depend on no draw, so the
    # advice to apply scg.stop_gradient must then work
    def model(mu):
        k = int(scg.stop_gradient(mu))
        return k + scg.sample("a", scg.Normal(mu, 1.0))

    gs = scg.grad_samples(scg.expectation(model, n=4, seed=0))(1.0)
    assert np.allclose(gs.samples, 1.0)
    with pytest.raises(scg.TracingError, match="stop_gradient"):
        scg.grad_samples(scg.expectation(lambda mu: float(mu) * mu, n=4, seed=0))(1.0)


# ------------------------------------------------- numpy sampling from a traced parameter
SAMPLE_ADVICE = 'scg.sample("name", scg.Normal(mu, 1.0))'


def _check_sampling_advice(message):
    assert SAMPLE_ADVICE in message
    assert "scg.blackbox" in message
    # sampling comes first; stop_gradient (which would cut the derivative path of the draw)
    # is the last resort, for dropping the derivative deliberately
    assert message.index(SAMPLE_ADVICE) < message.index("scg.blackbox")
    assert message.index(SAMPLE_ADVICE) < message.index("stop_gradient")
    assert "deliberately" in message


def test_numpy_sampling_from_a_traced_parameter_in_a_model():
    rng = np.random.default_rng(0)

    def model(mu):
        x = rng.normal(mu, 1.0)
        return x ** 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (numpy randomness in a model may also be flagged)
        with pytest.raises(scg.TracingError) as excinfo:
            scg.grad(scg.expectation(model, n=4, seed=0))(1.0)
    _check_sampling_advice(_message(excinfo))


def test_numpy_sampling_from_a_traced_parameter_outside_a_model():
    rng = np.random.default_rng(0)
    with pytest.raises(scg.TracingError) as excinfo:
        scg.grad(lambda mu: np.mean(rng.normal(mu, 1.0, size=10) ** 2))(1.0)
    _check_sampling_advice(_message(excinfo))
    with pytest.raises(scg.TracingError) as excinfo:
        scg.grad(lambda mu: np.asarray(mu).sum())(np.ones(2))
    _check_sampling_advice(_message(excinfo))


# ------------------------------------------------- numpy functions without a rule
def test_function_without_rule_on_a_per_draw_value_points_to_blackbox():
    def model(mu):
        a = scg.sample("a", scg.Normal(mu, 1.0))
        return np.sum(np.cumsum(scg.stop_gradient(a)))

    with pytest.raises(TypeError, match="'np.cumsum'") as excinfo:
        scg.grad(scg.expectation(model, n=4, seed=0))(1.0)
    message = _message(excinfo)
    assert "scg.blackbox" in message and "differs between draws" in message
    assert "stop_gradient" not in message


def test_function_without_rule_on_a_value_being_differentiated():
    with pytest.raises(TypeError, match="'np.cumsum'") as excinfo:
        scg.grad(lambda x: np.sum(np.cumsum(x)))(np.ones(3))
    message = _message(excinfo)
    assert "scg.blackbox" in message and "scg.stop_gradient" in message
    assert "API.md" not in message  # a file users do not have


def test_numpy_sampling_from_a_per_draw_value_points_to_scg_sample():
    rng = np.random.default_rng(0)

    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return rng.normal(x, 1.0)  # the port of torch.distributions.Normal(x, 1).sample()

    with pytest.raises(scg.TracingError, match=r"scg\.sample\(\"name\", scg\.Normal\(x, 1\.0\)\)"):
        scg.expectation(model, n=4, seed=0)(0.0)
