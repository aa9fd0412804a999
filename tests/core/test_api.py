"""grad / value_and_grad / jacobian / hessian: pytrees, argnums, shapes, errors, jumps."""

import numpy as np
import pytest

import scg
from scg.numpy import rules as R


# ---------------------------------------------------------------- any order
def test_third_derivative_of_sin():
    x = 0.7
    assert np.isclose(scg.grad(scg.grad(scg.grad(np.sin)))(x), -np.cos(x))


def test_fourth_derivative_of_exp_times_x():
    f = lambda x: x * np.exp(x)  # noqa: E731   d^n/dx^n = (x + n) e^x
    d4 = scg.grad(scg.grad(scg.grad(scg.grad(f))))
    assert np.isclose(d4(0.5), 4.5 * np.exp(0.5))


# ---------------------------------------------------------------- pytrees and argnums
def test_pytree_gradient_has_the_structure_of_the_argument():
    params = {"w": np.array([1.0, 2.0]), "b": 0.5, "layers": [np.ones((2, 2)), (3.0, np.zeros(1))]}

    def f(p):
        w, b = p["w"], p["b"]
        m, (c, z) = p["layers"]
        return np.sum(w ** 2) * b + np.sum(m @ w) + c ** 2 + np.sum(z)

    g = scg.grad(f)(params)
    assert set(g) == {"w", "b", "layers"}
    assert isinstance(g["layers"], list) and isinstance(g["layers"][1], tuple)
    np.testing.assert_allclose(g["w"], 2 * params["w"] * 0.5 + np.array([2.0, 2.0]))
    assert isinstance(g["b"], np.ndarray) and g["b"].shape == () and g["b"] == 5.0
    np.testing.assert_allclose(g["layers"][0], np.tile(params["w"], (2, 1)))
    assert g["layers"][1][0].shape == () and g["layers"][1][0] == 6.0
    np.testing.assert_allclose(g["layers"][1][1], [1.0])
    for leaf in (g["w"], g["b"], g["layers"][0]):
        assert leaf.dtype == np.float64


def test_float_argument_gives_0d_float64_array():
    g = scg.grad(lambda x: x ** 3)(2.0)
    assert isinstance(g, np.ndarray) and g.shape == () and g.dtype == np.float64 and g == 12.0
    assert scg.grad(lambda x: x * 2.0)(3).dtype == np.float64  # int argument


def test_argnums_int_and_tuple():
    f = lambda a, b, c: np.sum(a * b) + c  # noqa: E731
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    np.testing.assert_allclose(scg.grad(f, argnums=1)(a, b, 1.0), a)
    ga, gc = scg.grad(f, argnums=(0, 2))(a, b, 1.0)
    np.testing.assert_allclose(ga, b)
    assert gc == 1.0
    (gb,) = scg.grad(f, argnums=(1,))(a, b, 1.0)
    np.testing.assert_allclose(gb, a)
    np.testing.assert_allclose(scg.grad(f, argnums=-2)(a, b, 1.0), a)


def test_argnums_out_of_range():
    with pytest.raises(TypeError, match="argnums"):
        scg.grad(lambda a: a, argnums=1)(1.0)


def test_value_and_grad():
    value, g = scg.value_and_grad(lambda x: np.sum(np.tanh(x) ** 2))(np.ones(3))
    assert isinstance(value, float) and np.isclose(value, 3 * np.tanh(1.0) ** 2)
    np.testing.assert_allclose(g, 2 * np.tanh(1.0) * (1 - np.tanh(1.0) ** 2) * np.ones(3))


def test_unused_argument_gets_zeros():
    assert scg.grad(lambda x, y: y ** 2)(np.ones(2), 3.0).tolist() == [0.0, 0.0]
    assert scg.grad(lambda x: 1.0)(np.ones(2)).tolist() == [0.0, 0.0]


def test_closure_over_outer_variable():
    # d/dx [x * d/dy (x * y)] = d/dx x^2 = 2x: the inner gradient is traced by the outer one.
    f = lambda x: x * scg.grad(lambda y: x * y)(1.0)  # noqa: E731
    assert np.isclose(scg.grad(f)(3.0), 6.0)


# ---------------------------------------------------------------- jacobian and hessian
def test_jacobian_shape_and_values():
    A = np.arange(6.0).reshape(3, 2)
    J = scg.jacobian(lambda w: A @ w)(np.ones(2))
    assert J.shape == (3, 2)
    np.testing.assert_allclose(J, A)
    J = scg.jacobian(lambda w: w ** 2)(np.ones((2, 2)))
    assert J.shape == (2, 2, 2, 2)
    np.testing.assert_allclose(J.reshape(4, 4), 2 * np.eye(4))


def test_jacobian_of_pytree_output_and_argument():
    J = scg.jacobian(lambda p: {"s": p["a"] * p["b"], "t": [p["a"] ** 2]})(
        {"a": np.array([1.0, 2.0]), "b": 3.0})
    np.testing.assert_allclose(J["s"]["a"], 3.0 * np.eye(2))
    np.testing.assert_allclose(J["s"]["b"], [1.0, 2.0])
    np.testing.assert_allclose(J["t"][0]["a"], np.diag([2.0, 4.0]))


def test_hessian_of_quadratic_form():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(4, 4))
    A = M @ M.T
    H = scg.hessian(lambda x: 0.5 * x @ A @ x + np.sum(x))(rng.normal(size=4))
    assert H.shape == (4, 4)
    np.testing.assert_allclose(H, A, rtol=1e-12)


def test_hessian_analytic_nonlinear():
    # f = sum(exp(x)) * x0 + log(x1) * x2^2
    def f(x):
        return np.sum(np.exp(x)) * x[0] + np.log(x[1]) * x[2] ** 2

    x = np.array([0.3, 1.5, -0.7])
    e = np.exp(x)
    H = np.diag(e * x[0])
    H[0, :] += e
    H[:, 0] += e
    H[1, 1] += -x[2] ** 2 / x[1] ** 2
    H[1, 2] += 2 * x[2] / x[1]
    H[2, 1] += 2 * x[2] / x[1]
    H[2, 2] += 2 * np.log(x[1])
    np.testing.assert_allclose(scg.hessian(f)(x), H, rtol=1e-12)


def test_hessian_of_matrix_argument_and_logsumexp():
    x = np.array([[0.1, -0.3], [0.5, 2.0]])
    H = scg.hessian(scg.logsumexp)(x)
    assert H.shape == (2, 2, 2, 2)
    p = np.exp(x - np.log(np.sum(np.exp(x)))).ravel()
    np.testing.assert_allclose(H.reshape(4, 4), np.diag(p) - np.outer(p, p), atol=1e-14)


def test_hessian_argnums_tuple_blocks():
    H = scg.hessian(lambda a, b: np.sum(a ** 2 * b), argnums=(0, 1))(np.array([1.0, 2.0]), 3.0)
    (Haa, Hab), (Hba, Hbb) = H
    np.testing.assert_allclose(Haa, 6.0 * np.eye(2))
    np.testing.assert_allclose(Hab, [2.0, 4.0])
    np.testing.assert_allclose(Hba, [2.0, 4.0])
    assert Hbb == 0.0


# ---------------------------------------------------------------- errors
def test_grad_of_non_scalar_output_raises():
    with pytest.raises(TypeError, match="scalar output.*jacobian"):
        scg.grad(lambda x: x * 2)(np.ones(3))


@pytest.mark.parametrize("fn, name", [
    (lambda x: np.cumsum(x), "cumsum"),
    (lambda x: np.arcsin(x), "arcsin"),
    (lambda x: np.sort(x), "sort"),
    (lambda x: np.linalg.norm(x), "norm"),
    (lambda x: np.add.reduce(x), "add.reduce"),
    (lambda x: np.prod(x), "prod"),
])
def test_unsupported_numpy_function_raises_type_error_naming_it(fn, name):
    with pytest.raises(TypeError, match=f"'np.{name}'"):
        scg.grad(lambda x: np.sum(fn(x)))(np.array([0.1, 0.2]))


def test_unsupported_keyword_raises():
    with pytest.raises(TypeError, match="out="):
        scg.grad(lambda x: np.sum(x, out=np.zeros(())))(np.ones(2))


def test_float_of_traced_value_raises_tracing_error():
    for convert in (float, int):
        with pytest.raises(scg.TracingError, match="stop_gradient"):
            scg.grad(lambda x: convert(x))(1.0)
    with pytest.raises(scg.TracingError):
        scg.grad(lambda x: np.asarray(x).sum())(np.ones(2))


def test_non_float_argument_raises():
    with pytest.raises(TypeError, match="dtype"):
        scg.grad(lambda s: 1.0)(np.array(["a"]))


# ---------------------------------------------------------------- jumps and stop_gradient
JUMP_FUNCTIONS = [
    (np.floor, R.floor), (np.ceil, R.ceil), (np.round, R.rint), (np.rint, R.rint),
    (np.sign, R.sign), (lambda x: x > 0.1, R.greater), (lambda x: x >= 0.1, R.greater_equal),
    (lambda x: x < 0.1, R.less), (lambda x: x <= 0.1, R.less_equal),
    (lambda x: x == 0.5, R.equal), (lambda x: x != 0.5, R.not_equal),
    (lambda x: np.argmax(x), R.argmax), (lambda x: np.argmin(x), R.argmin),
    (lambda x: np.heaviside(x, 0.5), R.heaviside), (np.isfinite, R.isfinite),
]


@pytest.mark.parametrize("fn, prim", JUMP_FUNCTIONS)
def test_jumps_have_zero_gradient_and_are_marked(fn, prim):
    x = np.array([0.3, -1.2, 2.6])
    g = scg.grad(lambda x: np.sum(x * fn(x)))(x)  # d/dx x * J(x) = J(x) where J is constant
    np.testing.assert_allclose(g, np.asarray(fn(x), dtype=float) * np.ones(3))
    assert np.all(scg.grad(lambda x: np.sum(fn(x) * 1.0))(x) == 0.0)
    assert prim.kind == "jump"


def test_stop_gradient():
    assert scg.grad(lambda x: x * scg.stop_gradient(x))(3.0) == 3.0
    assert scg.stop_gradient.kind == "cut"
    # it cuts every level: the second derivative of x * sg(x)^2 is 0
    assert scg.grad(scg.grad(lambda x: x * scg.stop_gradient(x) ** 2))(3.0) == 0.0
    np.testing.assert_allclose(scg.stop_gradient(np.ones(2)), np.ones(2))


def test_bool_of_traced_value_uses_its_value():
    def f(x):
        return x ** 2 if x > 0 else -x

    assert scg.grad(f)(2.0) == 4.0 and scg.grad(f)(-2.0) == -1.0


def test_gradients_are_the_callers_own_arrays():
    ga, gb = scg.grad(lambda a, b: np.sum(a + b), argnums=(0, 1))(np.ones(3), np.ones(3))
    ga *= 10.0
    assert np.all(gb == 1.0)
    g = scg.grad(lambda x: np.sum(x))(np.ones(5000))    # a broadcast cotangent
    g *= 0.5
    assert np.all(g == 0.5)
    # a bias's cotangent is a row of the pre-activation's: no returned array shares memory
    gz, gb = scg.grad(lambda z, b: np.sum((z + b) ** 2), argnums=(0, 1))(
        np.ones((1, 3)), np.ones(3))
    gz *= 0.0
    assert np.all(gb == 4.0)


def test_take_along_axis_gradients_with_float_and_broadcast_indices():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    g = scg.grad(lambda x: np.sum(np.take_along_axis(x, np.array([[1.0], [0.0]]), axis=1)))(x)
    assert np.array_equal(g, [[0.0, 1.0], [1.0, 0.0]])
    g = scg.grad(lambda x: np.sum(np.take_along_axis(x, np.array([[1], [0]]), axis=1)))(
        np.array([[1.0, 2.0]]))
    assert np.array_equal(g, [[1.0, 1.0]])


def test_power_zero_has_zero_derivative_at_zero():
    assert scg.grad(lambda x: x ** 0)(0.0) == 0.0


def test_softplus_and_relu_gradients_at_infinities_and_nan():
    x = np.array([np.inf, 1.0, -2.0, -np.inf])
    sig = 1.0 / (1.0 + np.exp(-x[1:3]))
    g = scg.grad(lambda x: np.sum(scg.softplus(x)))(x)
    assert np.array_equal(g[[0, 3]], [1.0, 0.0]) and np.allclose(g[1:3], sig)
    # a masked-out entry gets 0, not 0 * nan
    g = scg.grad(lambda x: np.sum(np.where(x < 100, scg.softplus(x), 0.0)))(x)
    assert g[0] == 0.0
    h = scg.hessian(lambda x: np.sum(scg.softplus(x)))(np.array([np.inf, 0.0]))
    assert np.array_equal(h, [[0.0, 0.0], [0.0, 0.25]])
    g = scg.grad(lambda x: np.sum(np.where(np.isnan(x), 0.0, scg.relu(x))))(
        np.array([np.nan, 1.0, -1.0]))
    assert np.array_equal(g, [0.0, 1.0, 0.0])


def test_gradients_of_empty_arrays():
    assert scg.grad(lambda x: np.sum(x ** 2))(np.zeros((0, 3))).shape == (0, 3)
    g = scg.grad(lambda x: np.sum(x[2:1] ** 2) + np.sum(x))(np.ones((3, 4)))
    assert np.array_equal(g, np.ones((3, 4)))


def test_relu_gradient_is_zero_where_inactive_even_for_an_infinite_cotangent():
    with np.errstate(divide="ignore"):  # sqrt's derivative at 0 is infinite
        g = scg.grad(lambda x: np.sum(np.sqrt(scg.relu(x))))(np.array([-1.0, 0.0, 2.0]))
    assert np.array_equal(g[:2], [0.0, 0.0]) and np.isclose(g[2], 0.5 / np.sqrt(2.0))


def test_mean_of_large_integers_is_summed_as_floats():
    from scg.numpy import rules as R
    assert R.mean(np.array([2 ** 62] * 3)) == np.mean(np.array([2 ** 62] * 3))
