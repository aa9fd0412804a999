"""The table-driven check of a stale case: outside state a function reads, and a change.

A row is `Row(make, expect, names)`: `make()` -> `(read, change)`, where `read()` gives a
value of some state outside the function's arguments and `change()` changes that state
(None: the state changes on its own, a generator or a clock). The function checked is
`x * read()` (host "direct") or the gradient of an expectation whose cost is
`read() * x ** 2` (host "model": the read runs in code scg calls on the user's behalf),
or that gradient times `read()` (host "step": a training step reading outside the model).

`check_row` runs it eagerly and under scg.jit, each from its own `make()`: `before` calls,
the change, `after` calls. It checks that the change is real (the eager results before and
after differ, so a replay of stale numbers would fail), that every jitted call gives the
eager result, and how: `expect="replays"` (replays before and after the change: a guard
saw it), `"afresh"` (no replay; explain() says the function runs afresh and names each of
`names`), or `"either"`. `reset()`, if given, puts shared state (globals, classes,
sys.modules) back before each run and after the check.
"""

import collections

import numpy as np

import scg

from .compare import same_values

Row = collections.namedtuple("Row", "make expect names host reset",
                             defaults=("replays", (), "direct", None))


def _host(read, host):
    if host == "direct":
        return lambda x: x * read()

    def model(theta):
        z = scg.sample("z", scg.Normal(theta[0], 1.0))
        return (read() if host == "model" else 1.0) * z ** 2
    grad = scg.grad(scg.expectation(model, n=5, seed=1))
    return grad if host == "model" else (lambda theta: grad(theta) * read())


def check_row(row, before=4, after=3):
    x = np.array([0.3, 2.0]) if row.host == "direct" else np.array([0.3])
    results = []
    try:
        for jit in (False, True):
            if row.reset is not None:
                row.reset()
            read, change = row.make()
            step = _host(read, row.host)
            f = scg.jit(step) if jit else step
            out = [f(x) for _ in range(before)]
            replays_before = f.stats["replays"] if jit else 0
            if change is not None:
                change()
            out += [f(x) for _ in range(after)]
            results.append(out)
    finally:
        if row.reset is not None:
            row.reset()
    eager, jitted = results
    if row.host == "direct":  # (the change is real: stale numbers would differ)
        assert not same_values(eager[before - 1], eager[before]), "the change changes nothing"
    for k, (want, got) in enumerate(zip(eager, jitted)):
        assert same_values(want, got), (k, want, got, f.explain())
    text = f.explain()
    replays_after = f.stats["replays"] - replays_before
    replayed = replays_before > 0 and replays_after > 0
    afresh = f.stats["replays"] == 0 and "runs afresh on every call" in text
    if row.expect == "replays":
        assert replayed, text
    elif row.expect == "afresh":
        assert afresh, text
    else:
        assert replayed or "runs afresh on every call" in text, text
    for name in row.names:
        assert name in text, (name, text)
    return f


def rows_of(table):
    """pytest parameters: the names of a dict of rows."""
    return list(table)
