"""A property of plates by position: for sequences of numpy operations on a plate's draws,
where every axis has the plate's size, scg pairs a cost with the plate's elements exactly
when a reference that names each axis explicitly says the plate's axis survived, and the
gradient (by enumeration, exact) equals the exact one; where the plate was mixed,
enumerating element by element is refused."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scg
from scg.stochastic.sites import Plate

B = 3  # the plate's size, and every new axis's
PLATE = Plate("p", B, -1)


def _plain(seed, shape):
    return np.random.default_rng(seed).normal(size=shape)


class Ref:
    """The reference: each axis named ("p" for the plate's, None otherwise), and whether
    an operation combined the plate's elements."""

    def __init__(self):
        self.names, self.mixed = ["p"], False

    def drop(self, k):
        self.mixed |= self.names[k] == "p"
        del self.names[k]

    def blank(self, k):
        self.mixed |= self.names[k] == "p"
        self.names[k] = None


def _axis(a, nd):
    return a % nd


def apply(op, a, b, seed, v, ref):
    """One operation on v (plain or traced: the same numpy code) and on the reference.
    Returns the new value, or v unchanged when the operation does not apply."""
    shape = np.shape(v) if not hasattr(v, "shape") else tuple(v.shape)
    nd = len(shape)
    if op == "outer" and nd < 4:
        ref.names.append(None)
        return v[..., None] * _plain(seed, (B,))
    if op == "front" and nd < 4:
        ref.names.insert(0, None)
        return _plain(seed, (B,) + (1,) * nd) * v
    if op == "T" and nd >= 2:
        ref.names.reverse()
        return v.T
    if op == "swap" and nd >= 2:
        i, j = _axis(a, nd), _axis(b, nd)
        ref.names[i], ref.names[j] = ref.names[j], ref.names[i]
        return np.swapaxes(v, i, j)
    if op == "moveaxis" and nd >= 2:
        i, j = _axis(a, nd), _axis(b, nd)
        ref.names.insert(j, ref.names.pop(i))
        return np.moveaxis(v, i, j)
    if op == "matmul":
        ref.blank(nd - 1)
        return v @ _plain(seed, (shape[-1], B))
    if op == "rmatmul" and nd >= 2:
        ref.blank(nd - 2)
        return _plain(seed, (B, shape[-2])) @ v
    if op == "dot" and nd <= 2:
        ref.blank(nd - 1)
        return np.dot(v, _plain(seed, (shape[-1], B)))
    if op == "einsum":
        k = _axis(a, nd)
        letters = "abcd"[:nd]
        out = letters[:k] + "z" + letters[k + 1:]
        ref.blank(k)
        return np.einsum(f"{letters},{letters[k]}z->{out}", v, _plain(seed, (shape[k], B)))
    if op == "sum" and nd >= 2:
        k = _axis(a, nd)
        ref.drop(k)
        return np.sum(v, axis=k)
    if op == "center":
        k = _axis(a, nd)
        ref.mixed |= ref.names[k] == "p"
        return v - np.mean(v, axis=k, keepdims=True)
    if op == "index" and nd >= 2:
        k = _axis(a, nd)
        ref.drop(k)
        return v[(slice(None),) * k + (1,)]
    if op == "reverse":
        k = _axis(a, nd)
        ref.blank(k)
        return v[(slice(None),) * k + (slice(None, None, -1),)]
    if op == "full slice":
        return v[(slice(None),) * _axis(a, nd)]
    if op == "merge" and nd >= 2:
        ref.blank(nd - 2)
        ref.drop(nd - 1)
        return np.reshape(v, shape[:-2] + (shape[-2] * shape[-1],))
    if op == "split" and nd < 4:
        k = _axis(a, nd)
        if shape[k] % B == 0 and shape[k] > B:
            ref.blank(k)
            ref.names.insert(k, None)
            return np.reshape(v, shape[:k] + (B, shape[k] // B) + shape[k + 1:])
        return v
    if op == "concatenate":
        k = _axis(a, nd)
        ref.blank(k)
        return np.concatenate([v, 2.0 * v], axis=k)
    if op == "stack" and nd < 4:
        ref.names.insert(0, None)
        return np.stack([v, -v, 0.5 * v], axis=0)
    if op == "softmax":
        k = _axis(a, nd)
        ref.blank(k)
        return scg.softmax(v, axis=k)
    if op == "take":
        k = _axis(a, nd)
        ref.blank(k)
        return scg.take(v, np.arange(shape[k])[::-1], axis=k)
    if op == "times own permutation":  # (one argument combines the axis, one keeps it)
        k = _axis(a, nd)
        ref.mixed |= ref.names[k] == "p"
        return v * scg.take(v, np.arange(shape[k])[::-1], axis=k)
    if op == "contract against itself" and nd >= 1:
        k = _axis(a, nd)
        letters = "abcd"[:nd]
        other = letters[:k] + "z" + letters[k + 1:]
        ref.mixed |= ref.names[k] == "p"
        return np.einsum(f"{letters},{other}->{letters}", v, v) if shape[k] == B else v
    if op == "broadcast" and nd < 4:
        ref.names.insert(0, None)
        return np.broadcast_to(v, (B,) + shape)
    if op == "expand and squeeze":
        return np.squeeze(np.expand_dims(v, 0), 0)
    if op == "elementwise":
        return np.where(v > 0, np.tanh(v), 0.5 * v) * _plain(seed, shape[-1:])
    return v


OPS = ["outer", "front", "T", "swap", "moveaxis", "matmul", "rmatmul", "dot", "einsum",
       "sum", "center", "index", "reverse", "full slice", "merge", "split", "concatenate",
       "stack", "softmax", "take", "broadcast", "expand and squeeze", "elementwise",
       "times own permutation", "contract against itself"]
PROGRAMS = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 3), st.integers(0, 3)),
                    min_size=1, max_size=6)


def run(program, v):
    ref = Ref()
    for i, (op, a, b) in enumerate(program):
        v = apply(op, a, b, i, v, ref)
    # the final cost: per element of the plate when its axis survived, else the total
    nd = len(ref.names)
    if "p" in ref.names and not ref.mixed:
        v = np.moveaxis(v, ref.names.index("p"), 0)
        w = _plain(99, (B,) + tuple(np.shape(v) if not hasattr(v, "shape") else v.shape)[1:])
        return np.sum(v * w, axis=tuple(range(1, nd))) if nd > 1 else v * w, ref
    w = _plain(99, tuple(np.shape(v) if not hasattr(v, "shape") else v.shape))
    return np.sum(v * w), ref


def model_of(program, estimator):
    def model(theta):
        with scg.plate("p", B):
            z = scg.sample("z", scg.Bernoulli(logits=theta), estimator=estimator)
            return run(program, z)[0]
    return model


def exact_gradient(program, theta):
    p = 1 / (1 + np.exp(-theta))
    g = np.zeros(B)
    for bits in range(2 ** B):
        z = np.array([(bits >> b) & 1 for b in range(B)], dtype=float)
        prob = np.prod(np.where(z == 1, p, 1 - p))
        g += prob * np.sum(run(program, z)[0]) * (z - p)
    return g


THETA = np.array([0.4, -0.7, 1.1])


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(PROGRAMS)
def test_pairing_follows_the_axes_and_the_gradient_is_exact(program):
    _, ref = run(program, np.zeros(B))
    per_element = "p" in ref.names and not ref.mixed
    cost = scg.trace(model_of(program, "score"), THETA, n=2, seed=0).cost_sites["return"]
    assert cost.plates_for("z") == ((PLATE,) if per_element else ()), (program, ref.names)
    E = scg.expectation(model_of(program, scg.Enumerate()), n=2, seed=0)
    if per_element:
        np.testing.assert_allclose(scg.grad(E)(THETA), exact_gradient(program, THETA),
                                   rtol=1e-9, atol=1e-12)
    else:
        with pytest.raises(scg.EstimatorError, match="mixes the elements of plate p"):
            scg.grad(E)(THETA)


@pytest.mark.parametrize("program", [
    [("outer", 0, 0), ("matmul", 0, 0)],                       # (p, x) @ M: p kept
    [("outer", 0, 0), ("T", 0, 0), ("rmatmul", 0, 0)],         # M @ (x, p): p kept
    [("outer", 0, 0), ("outer", 0, 0), ("merge", 0, 0)],       # merging two other axes
    [("outer", 0, 0), ("outer", 0, 0), ("merge", 0, 0), ("split", 1, 0)],
    [("front", 0, 0), ("einsum", 0, 0), ("sum", 0, 0)],
    [("outer", 0, 0), ("reverse", 0, 0)],                      # reversing the plate: mixed
    [("outer", 0, 0), ("sum", 0, 0)],                          # summing the plate: mixed
])
def test_chosen_programs(program):
    test_pairing_follows_the_axes_and_the_gradient_is_exact.hypothesis.inner_test(program)
