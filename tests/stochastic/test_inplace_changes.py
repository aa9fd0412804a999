"""Values are captured when scg uses them: a numpy array changed in place afterwards leaves
the result unchanged."""

import numpy as np
import pytest

import scg


def test_array_changed_after_a_product():
    a = np.array([1.0, 2.0])

    def f(t):
        y = np.sum(t * a)
        a[:] = 100.0
        return y
    assert scg.grad(f)(1.0) == 3.0


def test_array_changed_after_a_numpy_call():
    w = np.array([[1.0, 2.0], [3.0, 4.0]])

    def f(x):
        y = np.sum(np.matmul(w, x))
        w[:] = 0.0
        return y
    np.testing.assert_array_equal(scg.grad(f)(np.ones(2)), [4.0, 6.0])


def test_array_changed_in_place_as_an_exponent():
    a = np.array([2.0])

    def f(t):
        y = np.sum(t ** a)  # the rule for t uses the exponent a
        a[...] *= 10
        return y
    assert scg.grad(f)(1.5) == 3.0


def test_weight_changed_after_a_pathwise_cost():
    weight = np.array([1.0, 2.0])

    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        scg.cost("c", np.sum(x * weight))
        weight[:] = 100.0  # a buffer reused by the next step of the user's loop

    E = scg.expectation(model, n=10, seed=0)
    assert scg.grad(E)(0.0) == pytest.approx(3.0)  # exact: the path gradient is sum(w)


def test_cost_buffer_changed_after_scg_cost():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        buffer = np.array([1.0, 2.0])
        scg.cost("fixed", buffer)
        buffer[:] = 50.0
        return x

    E = scg.expectation(model, n=1000, seed=0)
    t = scg.trace(model, 0.0, n=4, seed=0)
    np.testing.assert_array_equal(t.costs["fixed"], np.full(4, 3.0))
    assert E(0.0) == pytest.approx(3.0, abs=5 / np.sqrt(1000))


def test_parameter_of_a_score_site_changed_in_a_loop():
    scale = np.ones(1)

    def model(mu):
        total = 0.0
        for t in range(3):
            scale[0] = t + 1.0  # one buffer, refilled for each step
            x = scg.sample(f"x{t}", scg.Normal(mu, scale), estimator=scg.Score("loo"))
            total = total + np.sum(x ** 2)
        return total

    # d/dmu E[sum of x_t^2] = 3 * 2 mu, whatever the scales
    gs = scg.grad_samples(scg.expectation(model, n=200_000, seed=0))(0.5)
    assert abs(gs.mean - 3.0) < 5 * gs.stderr
    # with every site's log-probability at the last scale (3) the score of site t would be
    # (x - mu) / 9 instead of (x - mu) / s_t^2: the estimate 2 mu (1 + 4 + 9) / 9 = 1.56.
    # The standard error is small enough to tell the two apart
    assert gs.stderr < 0.2


def test_parameter_broadcast_by_a_plate_then_changed():
    buffer = np.array(1.0)

    def model(theta):
        with scg.plate("b", 2):
            x = scg.sample("x", scg.Normal(buffer, np.exp(theta)), estimator=scg.Score("loo"))
            c = x ** 2
        buffer[...] = 50.0  # the plate's broadcast view of the buffer sees this change
        return c

    # d/dtheta E[sum_b x_b^2] = d/dtheta 2 (1 + e^{2 theta}) = 4 e^{2 theta}
    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=0))(0.1)
    assert abs(gs.mean - 4 * np.exp(0.2)) < 5 * gs.stderr


def test_index_array_changed_after_indexing():
    idx = np.array([0, 1])

    def f(w):
        y = w[idx]
        idx[:] = 2
        return np.sum(y ** 2)
    np.testing.assert_array_equal(scg.grad(f)(np.array([1.0, 2.0, 3.0])), [2.0, 4.0, 0.0])


def test_a_large_array_is_read_only_while_the_gradient_runs():
    data = np.ones(200_000)  # too large to copy on every call

    def f(w):
        y = np.sum(w * data)
        data[0] = 5.0
        return y
    with pytest.raises(ValueError, match="read-only"):
        scg.grad(f)(1.0)
    assert data.flags.writeable  # given back when the gradient is done
    assert scg.grad(lambda w: np.sum(w * data))(1.0) == 200_000.0
    data[0] = 5.0


def test_a_large_array_used_by_an_outer_derivative_stays_read_only_until_it_is_done():
    data = np.ones(100_000)

    def f(w):
        inner = scg.grad(lambda v: np.sum(v * w * data))(1.0)  # records w * data at both levels
        data[0] = 5.0  # the outer derivative still needs data
        return inner
    with pytest.raises(ValueError, match="read-only"):
        scg.grad(f)(1.0)
    assert data.flags.writeable


def test_an_in_place_operator_on_a_per_draw_value_changes_its_aliases_as_numpy_does():
    # (y = x; y += 1 left x as it was: E[x^2] where numpy gives E[(x + 1)^2])
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        y = x
        y += 1.0
        y *= 2.0
        return x ** 2       # x is y: (2 (x + 1))^2

    E = scg.expectation(model, n=100_000, seed=0)
    gs = scg.grad_samples(E)(0.5)
    # E[(2 (theta + 1 + e))^2] = 4 ((theta + 1)^2 + 1), derivative 8 (theta + 1) = 12
    assert abs(gs.mean - 12.0) < 5 * gs.stderr
    value = scg.expectation(model, n=100_000, seed=1)(0.5)
    assert value == pytest.approx(4 * (1.5 ** 2 + 1), rel=0.02)


def test_an_in_place_change_of_a_draw_leaves_the_site_as_drawn():
    def model(theta):
        x = scg.sample("x", scg.Bernoulli(logits=theta), estimator=scg.Score("loo"))
        x += 1.0          # the model's value changes; the site's draw does not
        return (x - 1.3) ** 2

    p = 1 / (1 + np.exp(-0.2))
    exact = p * (1 - p) * ((2 - 1.3) ** 2 - (1 - 1.3) ** 2)
    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=0))(0.2)
    assert abs(gs.mean - exact) < 5 * gs.stderr
    t = scg.trace(model, 0.2, n=8, seed=0)
    assert set(np.unique(t.sites["x"].value)) <= {0.0, 1.0}


def test_an_in_place_change_of_a_parameter_after_its_site_is_an_error():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        loc = x * 2.0
        y = scg.sample("y", scg.Normal(loc, 1.0), estimator="score")
        loc += 1.0        # y's distribution would now be another one
        return y

    with pytest.raises(ValueError, match="site 'y': a parameter of its distribution was "
                                         "changed in place"):
        scg.grad(scg.expectation(model, n=10, seed=0))(0.3)


def test_an_in_place_operator_that_would_broadcast_is_numpys_error():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        x += np.ones(3)
        return np.sum(x)

    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        scg.expectation(model, n=4, seed=0)(0.3)


def test_an_index_assignment_into_a_per_draw_value_says_what_to_write():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta * np.ones(3), 1.0))
        x[0] += 5.0
        return np.sum(x)

    with pytest.raises(TypeError, match="np.where"):
        scg.expectation(model, n=4, seed=0)(0.3)
