"""Pytrees beyond dict / list / tuple: namedtuple, OrderedDict, dataclasses, SimpleNamespace.

Every transformation gives back the argument's own container type, with the values of the
same computation written with a plain dict.
"""

import collections
import dataclasses
import types

import numpy as np
import pytest

import scg
from scg.core import pytree

Params = collections.namedtuple("Params", "mu log_sigma")
Single = collections.namedtuple("Single", "mu")


@dataclasses.dataclass
class DataParams:
    mu: np.ndarray
    log_sigma: float
    name: str = "normal"  # configuration: carried along, not differentiated
    verbose: bool = False


@dataclasses.dataclass(frozen=True)
class FrozenParams:
    mu: np.ndarray
    log_sigma: float


MU = np.array([0.5, -1.0])
LOG_SIGMA = 0.3


def as_dict():
    return {"mu": MU.copy(), "log_sigma": LOG_SIGMA}


CONTAINERS = {
    "namedtuple": lambda: Params(MU.copy(), LOG_SIGMA),
    "OrderedDict": lambda: collections.OrderedDict([("log_sigma", LOG_SIGMA), ("mu", MU.copy())]),
    "dataclass": lambda: DataParams(MU.copy(), LOG_SIGMA),
    "frozen dataclass": lambda: FrozenParams(MU.copy(), LOG_SIGMA),
    "SimpleNamespace": lambda: types.SimpleNamespace(mu=MU.copy(), log_sigma=LOG_SIGMA),
}


def get(p, k):
    return p[k] if isinstance(p, dict) else getattr(p, k)


def to_dict(p):
    return {"mu": get(p, "mu"), "log_sigma": get(p, "log_sigma")}


def check_like(result, arg, expected):
    """`result` has the type and structure of `arg`; its values are those of dict `expected`."""
    assert type(result) is type(arg)
    if isinstance(arg, dict):
        assert list(result) == list(arg)  # the same key order
    for k in ("mu", "log_sigma"):
        np.testing.assert_allclose(get(result, k), expected[k], rtol=1e-12, atol=1e-12)
        assert isinstance(get(result, k), np.ndarray) or hasattr(get(result, k), "shape")
    if isinstance(arg, DataParams):
        assert result.name == arg.name and result.verbose is arg.verbose


def f(p):
    return np.sum(np.sin(get(p, "mu")) * np.exp(get(p, "log_sigma"))) + get(p, "log_sigma") ** 3


def g(p):
    return np.tanh(get(p, "mu")) * get(p, "log_sigma")


@pytest.mark.parametrize("kind", list(CONTAINERS))
def test_grad_and_value_and_grad_keep_the_container(kind):
    arg = CONTAINERS[kind]()
    expected = scg.grad(f)(as_dict())
    check_like(scg.grad(f)(arg), arg, expected)
    value, gradient = scg.value_and_grad(f)(arg)
    assert np.isclose(value, f(as_dict()))
    check_like(gradient, arg, expected)


@pytest.mark.parametrize("kind", list(CONTAINERS))
def test_jacobian_and_hessian_keep_the_container(kind):
    arg = CONTAINERS[kind]()
    check_like(scg.jacobian(g)(arg), arg, scg.jacobian(g)(as_dict()))
    h, h_dict = scg.hessian(f)(arg), scg.hessian(f)(as_dict())
    assert type(h) is type(arg)  # a tree (output structure) of trees (argument structure)
    for k in ("mu", "log_sigma"):
        check_like(get(h, k), arg, h_dict[k])


def model(theta):
    x = scg.sample("x", scg.Normal(get(theta, "mu"), np.exp(get(theta, "log_sigma"))))
    a = scg.sample("a", scg.Bernoulli(probs=scg.sigmoid(np.sum(x))))  # a score-function term
    return np.sum(x ** 2) + a


@pytest.mark.parametrize("kind", list(CONTAINERS))
def test_expectation_gradients_keep_the_container(kind):
    arg = CONTAINERS[kind]()
    E, E_dict = scg.expectation(model, n=500, seed=0), scg.expectation(model, n=500, seed=0)
    check_like(scg.grad(E)(arg), arg, scg.grad(E_dict)(as_dict()))
    gs, gs_dict = scg.grad_samples(E)(arg), scg.grad_samples(E_dict)(as_dict())
    check_like(gs.samples, arg, gs_dict.samples)
    check_like(gs.mean, arg, gs_dict.mean)
    check_like(gs.stderr, arg, gs_dict.stderr)
    assert np.shape(get(gs.samples, "mu")) == (500, 2)


def test_one_field_namedtuple_is_rebuilt_with_its_field():
    grad = scg.grad(lambda p: p.mu ** 2)(Single(3.0))
    assert type(grad) is Single and grad.mu == 6.0


def test_ordered_dict_keeps_its_key_order_through_the_model():
    seen = []

    def h(p):
        seen.append((type(p), list(p)))
        return p["b"] * p["a"]

    arg = collections.OrderedDict([("b", 2.0), ("a", 3.0)])
    grad = scg.grad(h)(arg)
    assert seen == [(collections.OrderedDict, ["b", "a"])]
    assert type(grad) is collections.OrderedDict and list(grad) == ["b", "a"]
    assert grad["b"] == 3.0 and grad["a"] == 2.0


def test_defaultdict_is_rebuilt_with_its_factory():
    arg = collections.defaultdict(list, {"a": 2.0})
    grad = scg.grad(lambda p: p["a"] ** 2)(arg)
    assert type(grad) is collections.defaultdict and grad.default_factory is list
    assert grad["a"] == 4.0


def test_nested_records_and_leaf_paths():
    tree = {"net": DataParams(np.ones(2), 1.0), "extra": [Params(1.0, Single(2.0))],
            "ns": types.SimpleNamespace(w=np.zeros(3))}
    leaves, treedef, paths = pytree.flatten(tree)
    assert paths == ("['net'].mu", "['net'].log_sigma", "['extra'][0].mu",
                     "['extra'][0].log_sigma.mu", "['ns'].w")
    rebuilt = pytree.unflatten(treedef, leaves)
    assert type(rebuilt["net"]) is DataParams and rebuilt["net"].name == "normal"
    assert type(rebuilt["extra"][0].log_sigma) is Single
    assert type(rebuilt["ns"]) is types.SimpleNamespace


def test_record_field_names_appear_in_errors():
    E = scg.expectation(lambda p: scg.sample("x", scg.Normal(p.mu, 1.0)) ** 2, n=4, seed=0)
    with pytest.raises(scg.NoGradientPathError, match=r"argument 0\.log_sigma"):
        scg.grad(E)(Params(0.0, 1.0))
    with pytest.raises(TypeError, match=r"argument 0\.mu"):
        scg.grad(lambda p: p.log_sigma)(Params(np.array(["text"]), 1.0))


def test_dataclass_post_init_sees_traced_fields():
    @dataclasses.dataclass
    class Derived:
        log_scale: float
        scale: float = dataclasses.field(init=False)

        def __post_init__(self):
            self.scale = np.exp(self.log_scale)

    grad = scg.grad(lambda p: p.scale ** 2)(Derived(0.5))  # d/dl exp(2 l) = 2 exp(2 l)
    assert type(grad) is Derived and np.isclose(grad.log_scale, 2 * np.exp(1.0))


def test_dataclass_whose_validation_refuses_the_gradient():
    @dataclasses.dataclass
    class Positive:
        scale: float

        def __post_init__(self):
            if not np.all(np.asarray(scg.stop_gradient(self.scale)) > 0):
                raise ValueError("scale must be positive")

    grad = scg.grad(lambda p: -p.scale)(Positive(2.0))  # the gradient, -1, is not positive
    assert type(grad) is Positive and grad.scale == -1.0


def test_optimizer_steps_keep_the_container():
    arg = DataParams(MU.copy(), LOG_SIGMA)
    opt = scg.optim.Adam(lr=0.1)
    state = opt.init(arg)
    new, state = opt.update(scg.grad(f)(arg), state, arg)
    assert type(new) is DataParams and new.name == "normal"
    assert not np.allclose(new.mu, MU)


def test_a_normalizing_post_init_does_not_touch_the_gradient():
    @dataclasses.dataclass
    class Mix:
        weights: np.ndarray

        def __post_init__(self):
            self.weights = self.weights / np.sum(self.weights)

    grad = scg.grad(lambda p: np.sum(p.weights * np.array([1.0, 2.0, 3.0])))(
        Mix(np.array([1.0, 1.0, 2.0])))
    assert type(grad) is Mix
    np.testing.assert_array_equal(grad.weights, [1.0, 2.0, 3.0])
