"""The shortcuts of a per-draw operation give what the general path gives: the labels of
an elementwise operation (plates.label_op without the rule, against `_settle` of the
rule's labels), the dependencies joined (one of the two, or the same result again,
against the union of the sets), and a jump's dependencies."""

import itertools

import numpy as np
import pytest

import scg
from scg.numpy import rules as R
from scg.stochastic import plates
from scg.stochastic.persample import NO_DEPS, Deps, PerSample


def _general_labels(prim, args, result, level, sites):
    """The labels by the axis-label rule and `_settle`, as label_op finds them without its
    shortcut."""
    inputs = [a for a in args if type(a) is PerSample and a.level == level]
    labels = [a.axes or None if type(a) is PerSample and a.level == level else None
              for a in args]
    shapes = [a.shape if type(a) is PerSample and a.level == level else np.shape(a)
              for a in args]
    out = R.axes_rule(prim)(args, {}, labels, shapes, result.shape)
    return plates._settle(out, inputs, sites, result.shape)


def _labelled_values(sizes):
    """Per-draw values of a model run inside plates of `sizes` (one of them of size 1),
    and the run's level and sites."""
    found = {}

    def model(theta):
        with scg.plate("a", sizes[0], dim=-2), scg.plate("b", sizes[1], dim=-1):
            x = scg.sample("x", scg.Normal(theta, 1.0), estimator="score")
        y = scg.sample("y", scg.Normal(theta, 1.0), estimator="score")
        found["values"] = [x, x * 2.0, x[0] if sizes[0] == 1 else x, y, np.sum(x, axis=-1),
                           x + y]
        found["run"] = scg.stochastic.runtime.innermost_run()
        return np.sum(x) + y
    scg.trace(model, 0.3, n=4, seed=0)
    return found["values"], found["run"]


@pytest.mark.parametrize("sizes", [(2, 3), (1, 3), (3, 1)])
def test_elementwise_labels_equal_the_rules(sizes):
    values, run = _labelled_values(sizes)
    level = values[0].level
    plain = [1.5, np.ones(sizes[1]), np.ones((sizes[0], 1)), np.ones((5, 1, 1))]
    for prim in (R.add, R.multiply, R.where):
        for a, b in itertools.product(values + plain, repeat=2):
            args = (a, b) if prim is not R.where else (np.array(True), a, b)
            if not any(type(v) is PerSample for v in args):
                continue
            try:
                result = prim(*args)
            except ValueError:  # (shapes that do not broadcast)
                continue
            result.axes, result.mixed = (), frozenset()
            inputs = [v for v in args if type(v) is PerSample and v.level == level]
            plates.label_op(prim, args, {}, inputs, level, result, run.sites)
            if not any(v.axes for v in inputs):
                continue
            assert (result.axes, result.mixed) == _general_labels(prim, args, result, level,
                                                                  run.sites)


def test_joined_dependencies_are_the_union_and_repeat():
    rng = np.random.default_rng(0)
    names = list("abcdefg")
    for _ in range(200):
        one, two = (Deps(*[frozenset(rng.choice(names, rng.integers(0, 4), replace=False))
                           for _ in range(3)]) for _ in range(2))
        out = one.joined(two)
        assert (out.up, out.smooth, out.rough) == (one.up | two.up, one.smooth | two.smooth,
                                                    one.rough | two.rough)
        assert one.joined(two) is out and two.joined(one) is out
        assert one.joined(NO_DEPS) is one and NO_DEPS.joined(two) is two
        merged = Deps.merge([one, None, two, one])
        assert (merged.up, merged.smooth, merged.rough) == (out.up, out.smooth, out.rough)
    big = Deps(frozenset("abc"), frozenset("ab"), frozenset("c"))
    small = Deps(frozenset("ab"), frozenset("a"), frozenset())
    assert big.joined(small) is big and Deps(frozenset("a")).joined(big) is big


def test_a_jump_cuts_the_smooth_paths_once():
    d = Deps(frozenset("ab"), frozenset("a"), frozenset("b"))
    jumped = d.through("jump")
    assert (jumped.up, jumped.smooth, jumped.rough) == (d.up, frozenset(), frozenset("ab"))
    assert d.through("jump") is jumped and jumped.through("jump") is jumped
    cut = d.through("cut")
    assert (cut.up, cut.smooth, cut.rough) == (d.up, frozenset(), frozenset("b"))
    assert d.through("smooth") is d
