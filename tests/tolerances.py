"""Tolerances that follow the dtype, never the BLAS build or the processor.

Two routes to the same product (a BLAS kernel, numpy's own loop, `.dot`) may add the
terms in another order or with fused multiply-adds, and which kernel runs depends on the
machine (OpenBLAS picks one per processor, `OPENBLAS_CORETYPE` overrides it). Both results
are then within the classic bound of a dot product of k terms:
|computed - exact| <= k eps (|a| @ |b|), eps the unit roundoff of the result's dtype.
"""

import numpy as np


def unit_roundoff(dtype):
    """eps of a floating (or complex) dtype; 0 for exact ones (integers, bools, objects)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return float(np.finfo(dtype).eps)
    return 0.0


def assert_product_close(got, want, a, b):
    """got and want are two computations of a @ b: equal within twice the dot product's
    rounding bound for the result's dtype (exact for integer, bool and object results)."""
    got, want = np.asarray(got), np.asarray(want)
    eps = unit_roundoff(want.dtype)
    if eps == 0.0:
        np.testing.assert_array_equal(got, want)
        return
    k = np.shape(a)[-1] if np.ndim(a) else 1
    scale = np.abs(np.asarray(a, dtype=complex)) @ np.abs(np.asarray(b, dtype=complex))
    bound = 2 * max(k, 1) * eps * np.real(scale)
    diff = np.abs(got.astype(complex) - want.astype(complex))
    assert np.all(diff <= bound), (
        f"products differ by {np.max(diff)} where the rounding bound for {want.dtype} "
        f"allows {np.min(bound)}")
