"""np.einsum in full: repeated indices (traces, diagonals), ellipses, broadcasting, and
numpy's interleaved form, at first and second order, plain and per draw inside a model."""

import numpy as np
import pytest

import scg

from tests.core.gradcheck import check_grads

CASES = [
    ("ii->", [(3, 3)]),                       # trace
    ("ii", [(3, 3)]),                         # trace, implicit output
    ("ii->i", [(3, 3)]),                      # diagonal
    ("iii->i", [(3, 3, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("bii->b", [(2, 3, 3)]),                  # batched trace
    ("...ii->...i", [(2, 3, 3)]),             # batched diagonal with an ellipsis
    ("ij,ij->", [(2, 3), (2, 3)]),            # Frobenius product
    ("ij,ij", [(2, 3), (2, 3)]),
    ("ii,ij->j", [(3, 3), (3, 2)]),
    ("ii,jj->ij", [(2, 2), (3, 3)]),
    ("...ij,jk->...ik", [(4, 2, 3), (3, 2)]),
    ("...ij,...jk->...ik", [(1, 2, 3), (5, 3, 2)]),
    ("ij,ij->i", [(2, 3), (2, 1)]),           # the second operand broadcast along j
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("ij,k->i", [(2, 3), (5,)]),
]


@pytest.mark.parametrize("subscripts, shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_finite_differences_to_second_order(subscripts, shapes):
    rng = np.random.default_rng(0)
    ops = [rng.normal(size=s) for s in shapes]
    check_grads(lambda *xs: np.einsum(subscripts, *xs), ops, order=2)
    # squared, so that the second derivative is not zero
    check_grads(lambda *xs: np.einsum(subscripts, *xs) ** 2, ops, order=2)


def test_trace_gradient_is_the_identity():
    w = np.arange(9.0).reshape(3, 3)
    assert np.array_equal(scg.grad(lambda w: np.einsum("ii->", w))(w), np.eye(3))
    assert np.allclose(scg.hessian(lambda w: np.einsum("ii->", w) ** 2)(w),
                       2 * np.einsum("ij,kl->ijkl", np.eye(3), np.eye(3)))


def test_interleaved_form():
    rng = np.random.default_rng(1)
    w, v = rng.normal(size=(3, 3)), rng.normal(size=3)
    assert np.array_equal(scg.grad(lambda w: np.einsum(w, [0, 0]))(w), np.eye(3))
    check_grads(lambda w, v: np.einsum(w, [0, 1], v, [1], [0]) ** 2, [w, v], order=2)
    check_grads(lambda w: np.einsum(w, [Ellipsis, 1], w, [Ellipsis, 1], [Ellipsis]) ** 2, [w])


M = np.arange(6.0).reshape(3, 2) / 4


def _models(estimator):
    """The same model written with einsum (traces, diagonals, an ellipsis) and without."""
    def with_einsum(theta):
        w = scg.sample("w", scg.Normal(theta, 1.0), estimator=estimator)
        return (np.einsum("ii->", w) ** 2 + np.sum(np.einsum("ii,ij->j", w, M) ** 2)
                + np.einsum("ij,ij->", w, theta)
                + np.sum(np.einsum("...ij,jk->...ik", w, M) ** 2)
                + np.einsum("ii,i->", theta, np.einsum("ii->i", w)))

    def without_einsum(theta):
        w = scg.sample("w", scg.Normal(theta, 1.0), estimator=estimator)
        eye = np.eye(3)
        diag = np.sum(w * eye, axis=0)
        return (np.sum(w * eye) ** 2 + np.sum((diag @ M) ** 2) + np.sum(w * theta)
                + np.sum((w @ M) ** 2) + np.sum(np.sum(theta * eye, axis=0) * diag))

    return with_einsum, without_einsum


@pytest.mark.parametrize("estimator", ["pathwise", "score"])
def test_einsum_on_draws_inside_a_model(estimator):
    theta = np.arange(9.0).reshape(3, 3) / 10
    with_einsum, without_einsum = _models(estimator)
    for n, seed in ((50, 1), (3, 2)):  # n == 3: the sample axis has the size of a matrix axis
        a = scg.grad(scg.expectation(with_einsum, n=n, seed=seed))(theta)
        b = scg.grad(scg.expectation(without_einsum, n=n, seed=seed))(theta)
        assert np.allclose(a, b)
    ha = scg.hessian(scg.expectation(with_einsum, n=20, seed=3))(theta)
    hb = scg.hessian(scg.expectation(without_einsum, n=20, seed=3))(theta)
    assert np.allclose(ha, hb)


def test_trace_of_a_draw_has_the_right_values():
    def model(theta):
        w = scg.sample("w", scg.Normal(theta, 1.0))
        scg.cost("diag", np.einsum("ii->i", w))
        return np.einsum("ii", w)

    t = scg.trace(model, np.zeros((3, 3)), n=4, seed=0)
    w = t.sites["w"].value
    assert np.allclose(t.costs["return"], np.trace(w, axis1=1, axis2=2))
    assert np.allclose(t.costs["diag"], np.trace(w, axis1=1, axis2=2))
