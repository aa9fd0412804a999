"""The large-array fast paths of the sum primitive agree with numpy's reduction."""

import numpy as np
import pytest

from scg.numpy.rules import _sum

RNG = np.random.default_rng(0)
BASE = RNG.normal(size=(5000, 7))


@pytest.mark.parametrize("x", [
    BASE,                                             # contiguous
    np.broadcast_to(BASE[:, :1], (5000, 7)),          # a broadcast column
    np.broadcast_to(BASE[0], (5000, 7)),              # a broadcast row
    np.broadcast_to(RNG.normal(size=(5000, 1, 3)), (5000, 4, 3)),
    BASE.T,                                           # not contiguous: numpy's own path
    RNG.normal(size=(4096, 2, 3)),
    RNG.normal(size=(256, 2)),
], ids=["contiguous", "column", "row", "3d-broadcast", "transposed", "3d", "small"])
@pytest.mark.parametrize("axis", [None, 0, (0,), -1, (0, 1), 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_matches_numpy(x, axis, keepdims):
    expected = np.add.reduce(np.array(x), axis=axis, keepdims=keepdims)
    got = _sum(x, axis=axis, keepdims=keepdims)
    assert np.shape(got) == expected.shape
    assert np.allclose(got, expected, rtol=1e-12, atol=1e-9)
