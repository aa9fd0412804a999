"""A warning for expectations built anew in every step of a training loop.

A stateful baseline's history (a moving average, its count) lives in its site's state, in
the expectation (site_states.py). An expectation built inside the loop starts each step
without it, and its estimator is then plain REINFORCE, with nothing wrong to see. To say
so, scg remembers, per model code and site, the last expectation whose stateful baseline
started there: this holds no estimator or baseline state, only weak references and
counts, and it forgets a model whose code is gone.
"""

import warnings
import weakref

# model code -> {site: (a weak reference to the last expectation whose stateful baseline
# started there, its call counter, how many expectations in a row before it were called
# once and dropped)}
_LAST_START = weakref.WeakKeyDictionary()


def model_code(model):
    """What identifies a model across expectations built again: its code (a lambda made
    anew in a loop has the same code), through functools.partial and bound methods."""
    while hasattr(model, "func"):  # functools.partial
        model = model.func
    model = getattr(model, "__func__", model)
    return getattr(model, "__code__", type(model))


def note_fresh_start(E, site, baseline):
    """Note that the stateful `baseline` of `site` starts without history in expectation
    E; warn when expectations of one model are built again and called once, in a row (the
    pattern of a training loop). Several expectations of a model, each called many times,
    as in a comparison of estimators, are fine."""
    starts = _LAST_START.setdefault(model_code(E.model), {})
    last = starts.get(site)
    # the earlier one counts if it was called once and is gone (replaced in a loop); one
    # still alive is a sibling (expectations run side by side)
    once_in_a_row = last[2] + 1 if last is not None and last[1][0] == 1 and \
        last[0]() is None else 0
    starts[site] = (weakref.ref(E), E._calls, once_in_a_row)
    if once_in_a_row >= 2:
        warnings.warn(
            f"site {site!r}: the {baseline.describe()} starts without history, although "
            "this model has run with it in another scg.expectation: the baseline's state "
            "lives in the expectation object, so an expectation built again in every step "
            "of a training loop never remembers a past call (its estimator is plain "
            "REINFORCE). Build the expectation once, before the loop, and call it in the "
            "loop", UserWarning, stacklevel=4)
