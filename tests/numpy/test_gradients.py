"""Every registered rule against central finite differences, at first and second order."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.gradcheck import check_grads
from tests.numpy.registry import CASES, case_id

EXAMPLES = 8


@pytest.mark.parametrize("key, i, case", CASES, ids=[case_id(*c) for c in CASES])
def test_rule_matches_finite_differences(key, i, case):
    if isinstance(case.strategy, list):  # fixed settings: check every one
        for drawn in case.strategy:
            for seed in range(2):
                _check_drawn(case, drawn, seed)
        return

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
    @given(drawn=case.strategy, seed=st.integers(0, 2 ** 31 - 1))
    def run(drawn, seed):
        _check_drawn(case, drawn, seed)

    run()


def _check_drawn(case, drawn, seed):
    drawn = dict(drawn)
    shapes = drawn.pop("shapes")
    args = case.sample(np.random.default_rng(seed), shapes)
    try:
        check_grads(lambda *xs: case.fn(*xs, **drawn), args, order=case.order, seed=seed)
    except Exception as e:
        e.add_note(f"shapes {shapes}, settings {drawn}, seed {seed}")
        raise
