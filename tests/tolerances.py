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


def assert_close_ulps(got, want, ulps, scale=None):
    """|got - want| <= ulps * eps * scale entrywise, eps the unit roundoff of want's dtype.

    scale is the magnitude of the computation that produced want (an array broadcasting
    against it, or a number); by default |want|, a relative bound of ulps eps. Entries
    that are not finite in want (nan, inf) must be the same in got, and results of exact
    dtypes (integers, bools, objects) must be equal."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shapes differ: {got.shape} and {want.shape}"
    eps = unit_roundoff(want.dtype)
    if eps == 0.0:
        np.testing.assert_array_equal(got, want)
        return
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])
    scale = np.abs(want) if scale is None else np.broadcast_to(np.abs(scale), want.shape)
    bound = ulps * eps * np.real(scale)
    # (entries that are not finite were compared above: inf - inf would warn)
    diff = np.abs(np.where(finite, got, 0).astype(complex) - np.where(finite, want, 0).astype(complex))
    bad = finite & ~(diff <= bound)
    assert not np.any(bad), (
        f"{np.count_nonzero(bad)} entries differ by more than {ulps} eps ({want.dtype}) of "
        f"their scale: the worst by {np.max(diff[bad])} where {bound[bad].min()} is allowed")
