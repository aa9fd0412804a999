"""Invalid parameters raise ValueError naming the family, the parameter, the problem and the count."""

import numpy as np
import pytest

import scg

BAD = [
    (scg.Normal, dict(loc=0.0, scale=np.array([1.0, -1.0, 0.0])), "scale", "2 of 3"),
    (scg.Normal, dict(loc=np.nan, scale=1.0), "loc", "1 of 1"),
    (scg.MultivariateNormal, dict(loc=np.zeros(2), scale_tril=np.array([[1.0, 1.0], [0.0, 1.0]])),
     "scale_tril", "lower triangular"),
    (scg.LogNormal, dict(loc=0.0, scale=-2.0), "scale", "positive"),
    (scg.Uniform, dict(low=np.array([0.0, 1.0]), high=np.array([1.0, 0.5])), "high", "1 of 2"),
    (scg.Exponential, dict(rate=np.array([0.0, 1.0])), "rate", "1 of 2"),
    (scg.Laplace, dict(loc=0.0, scale=0.0), "scale", "positive"),
    (scg.Gumbel, dict(loc=np.inf, scale=1.0), "loc", "real"),
    (scg.Gamma, dict(concentration=-1.0, rate=1.0), "concentration", "positive"),
    (scg.Beta, dict(a=1.0, b=np.array([1.0, np.nan])), "b", "1 of 2"),
    (scg.Dirichlet, dict(concentration=np.array([1.0, 0.0])), "concentration", "positive"),
    (scg.Bernoulli, dict(probs=np.array([0.5, 1.5])), "probs", "[0, 1]"),
    (scg.Categorical, dict(probs=np.array([0.5, 0.6])), "probs", "summing to 1"),
    (scg.Categorical, dict(probs=np.array([[0.5, 0.5], [1.2, -0.2]])), "probs", "1 of 2"),
    (scg.Poisson, dict(rate=-3.0), "rate", "positive"),
    (scg.Binomial, dict(total_count=2.5, probs=0.5), "total_count", "integer"),
    (scg.Binomial, dict(total_count=3, probs=1.5), "probs", "[0, 1]"),
    (scg.Geometric, dict(probs=0.0), "probs", "(0, 1]"),
    (scg.StudentT, dict(df=np.array([1.0, 0.0]), loc=0.0, scale=1.0), "df", "1 of 2"),
    (scg.StudentT, dict(df=3.0, loc=0.0, scale=-1.0), "scale", "positive"),
    (scg.Cauchy, dict(loc=np.nan, scale=1.0), "loc", "real"),
    (scg.HalfNormal, dict(scale=0.0), "scale", "positive"),
    (scg.HalfCauchy, dict(scale=np.array([1.0, -2.0])), "scale", "1 of 2"),
    (scg.NegativeBinomial, dict(total_count=0.0, probs=0.5), "total_count", "positive"),
    (scg.NegativeBinomial, dict(total_count=2.0, probs=1.0), "probs", "[0, 1)"),
    (scg.Multinomial, dict(total_count=2.5, probs=np.array([0.5, 0.5])), "total_count",
     "integer"),
    (scg.Multinomial, dict(total_count=3, probs=np.array([0.5, 0.6])), "probs", "summing to 1"),
]


@pytest.mark.parametrize("cls,params,name,text", BAD, ids=[f"{b[0].__name__}-{b[2]}" for b in BAD])
def test_invalid_parameters_raise(cls, params, name, text):
    with pytest.raises(ValueError) as info:
        cls(**params)
    msg = str(info.value)
    assert cls.__name__ in msg and f"'{name}'" in msg and text in msg, msg


def test_validation_switch():
    scg.distributions.set_validation(False)
    try:
        scg.Normal(0.0, -1.0)           # no error
    finally:
        scg.distributions.set_validation(True)
    with pytest.raises(ValueError):
        scg.Normal(0.0, -1.0)
    scg.Normal(0.0, -1.0, validate_args=False)


def test_validation_sees_through_tracers():
    with pytest.raises(ValueError, match="Gamma: parameter 'rate'"):
        scg.grad(lambda r: scg.Gamma(1.0, r).log_prob(1.0))(-1.0)


def test_exactly_one_of_probs_logits():
    with pytest.raises(ValueError, match="exactly one"):
        scg.Categorical(probs=np.ones(2) / 2, logits=np.zeros(2))


def test_distribution_messages_name_the_family():
    with pytest.raises(ValueError, match="Categorical: parameter 'logits' has no categories"):
        scg.Categorical(logits=np.zeros(0))
    with pytest.raises(ValueError, match=r"Normal: the parameters have shapes \(3,\) and "
                                         r"\(2,\), which do not broadcast"):
        scg.Normal(np.zeros(3), np.ones(2))
    with pytest.raises(TypeError, match=r"Normal.sample\(rng\): rng must be a numpy Generator"):
        scg.Normal(0.0, 1.0).sample(None)


@pytest.mark.parametrize("name", ["real", "positive", "nonnegative", "unit_interval",
                                  "open_unit_interval", "half_open_unit_interval"])
def test_one_number_is_tested_as_the_array_test_does(name):
    """A parameter that is one numpy float is tested without numpy's array calls: the
    verdict must be the array test's at the edges (0, -0, 1, subnormals, inf, nan)."""
    from scg.distributions import constraints
    c = getattr(constraints, name)
    for v in [0.0, -0.0, 5e-324, 1e-300, 0.5, 1.0, 1.0 + 2 ** -52, 1 - 2 ** -53, 2.0, -1.0,
              1e308, np.inf, -np.inf, np.nan]:
        assert c.holds(np.float64(v)) == bool(np.all(c.check(np.array([v])))), (name, v)


NOT_NUMBERS = [
    (scg.Normal, dict(loc=None, scale=1.0), "loc", "is None"),
    (scg.Normal, dict(loc="a", scale=1.0), "loc", "the string 'a'"),
    (scg.Normal, dict(loc=[1.0, "b"], scale=1.0), "loc", "array of strings"),
    (scg.Normal, dict(loc=0.0, scale=[1.0, None]), "scale", "holds None"),
    (scg.Gamma, dict(concentration=None, rate=1.0), "concentration", "is None"),
    (scg.Beta, dict(a=1.0, b={"b": 1.0}), "b", "dict"),
    (scg.Bernoulli, dict(probs="x"), "probs", "the string 'x'"),
    (scg.Categorical, dict(logits=np.array(["a", "b"])), "logits", "array of strings"),
    (scg.Binomial, dict(total_count="3", probs=0.5), "total_count", "the string '3'"),
    (scg.MultivariateNormal, dict(loc=np.zeros(2), scale_tril=None), "scale_tril", "is None"),
    (scg.Uniform, dict(low=0.0, high=object()), "high", "object"),
    (scg.Exponential, dict(rate=None), "rate", "is None"),
]


@pytest.mark.parametrize("cls,params,name,text", NOT_NUMBERS,
                         ids=[f"{b[0].__name__}-{b[2]}-{b[3]}" for b in NOT_NUMBERS])
def test_a_parameter_that_is_not_numbers_names_the_family_and_the_parameter(cls, params, name,
                                                                             text):
    with pytest.raises(TypeError) as info:
        cls(**params)
    msg = str(info.value)
    assert msg.startswith(f"{cls.__name__}: parameter '{name}' ") and text in msg, msg
    assert f"pass {name}= a number" in msg
    # positionally too
    if cls is scg.Normal:
        with pytest.raises(TypeError, match=f"Normal: parameter '{name}'"):
            cls(*params.values())


def test_optional_parameters_left_out_and_lists_of_numbers_are_fine():
    scg.Bernoulli(logits=0.3)
    scg.Categorical(probs=[0.5, 0.5])
    scg.Normal([0.0, np.float32(1.0)], np.array([1, 2]))
    with pytest.raises(ValueError, match="exactly one"):
        scg.Bernoulli()


@pytest.mark.parametrize("value, what", [
    (1j, "complex numbers"), (np.array([1.0 + 2j]), "complex numbers"),
    (np.datetime64("2020-01-01"), "datetimes"), (np.array([3], dtype="timedelta64[s]"), "durations"),
])
def test_complex_and_time_parameters_are_a_type_error_naming_the_parameter(value, what):
    with pytest.raises(TypeError, match=f"Normal: parameter 'loc' holds {what}"):
        scg.Normal(value, 1.0)


def test_a_traced_complex_parameter_is_a_type_error_naming_it():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta * 1j, 1.0))
        return x

    with pytest.raises(TypeError, match="parameter 'loc' holds complex numbers"):
        scg.grad(scg.expectation(model, n=4, seed=0))(0.5)
