"""What the tape keeps of a plain array it is given: a copy when the caller could change
it in place, with the array's memory layout."""

import numpy as np

from scg.core.tape import kept

rng = np.random.default_rng(0)


def test_a_kept_constant_keeps_its_memory_layout():
    """The tape copies a small writeable constant it keeps (the caller may change it in
    place later); the copy has the constant's layout, as scg.jit's recording, which does
    not copy, sees it: a result's layout, and a sum over it, follow the operands'."""
    c = np.asfortranarray(rng.normal(size=(5, 4, 3)))
    copy = kept(c)
    assert copy is not c and copy.strides == c.strides
    permuted = rng.normal(size=(3, 4, 5)).transpose(2, 0, 1)  # (5, 3, 4), axis 0 innermost
    assert kept(permuted).strides == permuted.strides
