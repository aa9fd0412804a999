"""x.astype(dtype) on traced values, as code ported from PyTorch writes `.float()`."""

import numpy as np
import scg


def test_astype_between_floats_carries_the_derivative_to_second_order():
    x0 = np.array([1.5, -2.0, 0.25])

    def f(x):
        return np.sum(np.sin(x.astype(np.float64)) * x.astype(float) ** 2)

    g, h = scg.grad(f)(x0), scg.hessian(f)(x0)
    np.testing.assert_allclose(g, np.cos(x0) * x0 ** 2 + 2 * x0 * np.sin(x0), rtol=1e-12)
    exact = -np.sin(x0) * x0 ** 2 + 4 * x0 * np.cos(x0) + 2 * np.sin(x0)
    np.testing.assert_allclose(h, np.diag(exact), rtol=1e-12, atol=1e-12)


def test_astype_through_float32_and_back():
    x0 = np.array([1.5, 2.0])
    f = lambda x: np.sum(x.astype(np.float32).astype(np.float64) ** 2)  # noqa: E731
    g = scg.grad(f)(x0)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, 2 * x0, rtol=1e-6)


def test_astype_to_and_from_integers_and_bools_has_no_derivative():
    x0 = np.array([0.5, 2.0, 3.7])
    g = scg.grad(lambda x: np.sum((x > 1).astype(float) * x + x.astype(int) * x))(x0)
    np.testing.assert_allclose(g, (x0 > 1) + x0.astype(int))
    # (a step, as np.floor: zero almost everywhere)
    np.testing.assert_array_equal(scg.grad(lambda x: np.sum(x.astype(int).astype(float)))(x0),
                                  np.zeros(3))


def test_a_pytorch_style_mask_in_a_model_matches_np_where():
    """`(x > 0).float()` ported as `(x > 0).astype(float)` on per-draw values."""
    def ported(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        b = scg.sample("b", scg.Bernoulli(logits=theta * np.ones(3)))
        return (x > 0).astype(float) * x ** 2 + np.sum(b.astype(np.float64) * x)

    def written(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        b = scg.sample("b", scg.Bernoulli(logits=theta * np.ones(3)))
        return np.where(x > 0, 1.0, 0.0) * x ** 2 + np.sum(b * x)

    a = scg.value_and_grad(scg.expectation(ported, n=64, seed=3))(0.4)
    b = scg.value_and_grad(scg.expectation(written, n=64, seed=3))(0.4)
    np.testing.assert_allclose(a, b, rtol=1e-14)
    jitted = scg.jit(scg.value_and_grad(scg.expectation(ported, n=64, seed=3)))
    eager = scg.value_and_grad(scg.expectation(ported, n=64, seed=3))
    for _ in range(4):
        np.testing.assert_array_equal(jitted(0.4), eager(0.4))


def test_astype_values_and_derivatives_eagerly():
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_array_equal(scg.grad(lambda x: np.sum(x * x.astype(int)))(x),
                                  x.astype(int).astype(float))
    np.testing.assert_array_equal(scg.grad(lambda x: np.sum(x * x.astype(bool)))(x),
                                  np.ones(3))
    h = scg.hessian(lambda x: np.sum(x.astype(np.float32).astype(np.float64) ** 3))(x)
    np.testing.assert_allclose(np.diag(h), 6 * x, rtol=1e-6)

    def model(mu):
        with scg.plate("p", 3):
            z = scg.sample("z", scg.Normal(mu, 1.0))
        return np.sum(z.astype(np.float32) * z)

    g = scg.grad(scg.expectation(model, n=4, seed=0))(np.array([0.5, 0.1, 0.2]))
    assert g.dtype == np.float64 and g.shape == (3,)
