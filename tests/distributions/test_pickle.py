"""Every family, expanded and with to_event, survives the standard pickle module unchanged."""

import copy
import pickle

import numpy as np
import pytest
from dist_registry import EXAMPLES, ids

import scg
from scg.distributions import constraints
from tests.tolerances import assert_close_ulps


def variants(example):
    """The plain family, expanded, and with batch dimensions turned into event dimensions."""
    d = example.make()
    wide = d.expand((3,) + d.batch_shape)
    out = {"plain": d, "expand": wide, "to_event(1)": wide.to_event(1),
           "to_event(all)": wide.to_event(len(wide.batch_shape))}
    if len(wide.batch_shape) >= 2:
        out["to_event(1).to_event(1)"] = wide.to_event(1).to_event(1)
        out["to_event(1).expand"] = wide.to_event(1).expand((2,) + wide.batch_shape[:-1])
    return out


def same_stat(got, want):
    """Within 4 eps of want relative, plus eps times the dtype's tiny (zeros, subnormals)."""
    want = np.asarray(want)
    tiny = float(np.finfo(want.dtype).tiny) if want.dtype.kind in "fc" else 0.0
    assert_close_ulps(got, want, 4, scale=np.abs(want) + tiny)


def same_behaviour(a, b):
    assert type(a) is type(b)
    assert a.batch_shape == b.batch_shape and a.event_shape == b.event_shape
    assert a.has_rsample == b.has_rsample
    assert a.support is b.support or repr(a.support) == repr(b.support)
    assert a.moving_support == b.moving_support
    assert a.params.keys() == b.params.keys()
    for k, v in a.params.items():
        if v is None:
            assert b.params[k] is None
        else:
            np.testing.assert_array_equal(v, b.params[k])
    # Derived stats may take another route after unpickling (a broadcast parameter comes
    # back as a contiguous copy, and R.sigmoid loops only over small contiguous input).
    try:
        mean, variance = a.mean, a.variance
    except NotImplementedError:  # (no closed form: a TransformedDistribution through exp)
        mean = variance = None
    if mean is not None:
        same_stat(b.mean, mean)
        same_stat(b.variance, variance)
    values = a.sample(np.random.default_rng(0), (4,))
    again = b.sample(np.random.default_rng(0), (4,))
    if "scale_tril" in a.params:
        # loc + L @ z: matmul may sum a copied L's d terms in another order
        z = a.noise(np.random.default_rng(0), (4,))
        L = np.abs(a.params["scale_tril"])
        scale = np.abs(a.params["loc"]) + np.squeeze(L @ np.abs(z)[..., None], -1)
        assert_close_ulps(again, values, 2 * a.event_shape[-1], scale)
    else:
        same_stat(again, values)
    np.testing.assert_allclose(a.log_prob(values), b.log_prob(values), rtol=1e-14)
    assert repr(a) == repr(b)


@pytest.mark.parametrize("protocol", [2, pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL])
@pytest.mark.parametrize("example", EXAMPLES, ids=ids(EXAMPLES))
def test_every_family_round_trips_through_pickle(example, protocol):
    for name, d in variants(example).items():
        again = pickle.loads(pickle.dumps(d, protocol=protocol))
        same_behaviour(d, again)


@pytest.mark.parametrize("example", EXAMPLES, ids=ids(EXAMPLES))
def test_copies_behave_the_same(example):
    for name, d in variants(example).items():
        same_behaviour(d, copy.copy(d))
        same_behaviour(d, copy.deepcopy(d))


def test_parameter_validation_still_works_after_unpickling():
    d = pickle.loads(pickle.dumps(scg.Normal(np.zeros(2), np.ones(2)).to_event(1)))
    assert d.base._validate_args
    with pytest.raises(ValueError, match="Normal: parameter 'scale'"):
        type(d.base)(np.zeros(2), -np.ones(2))


def test_module_constraints_unpickle_as_themselves():
    for name in ("real", "real_vector", "positive", "positive_vector", "nonnegative",
                 "unit_interval", "open_unit_interval", "half_open_unit_interval", "boolean",
                 "nonnegative_integer", "positive_integer", "simplex", "lower_cholesky"):
        c = getattr(constraints, name)
        assert pickle.loads(pickle.dumps(c)) is c
    interval = pickle.loads(pickle.dumps(constraints.interval("low", "high")))
    assert (interval.low_name, interval.high_name) == ("low", "high")


def test_a_distribution_pickled_inside_a_list_of_sites():
    """A to_event distribution stored alongside other objects, as a checkpoint would."""
    model_spec = {"prior": scg.Normal(np.zeros((2, 3)), np.ones((2, 3))).to_event(2),
                  "likelihood": scg.Bernoulli(logits=np.zeros(5)).to_event(1)}
    again = pickle.loads(pickle.dumps(model_spec))
    for k in model_spec:
        same_behaviour(model_spec[k], again[k])
