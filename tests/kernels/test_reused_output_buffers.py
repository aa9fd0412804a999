"""Output buffers of the fused per-draw kernels, reused from fused.REUSE_MIN entries.

Per-draw gradients of large expectations (five million draws, pathwise and score
function) never share memory between calls, and an array the caller still holds keeps
its values when the next calls reuse freed buffers.
"""

import numpy as np

import scg


def test_large_grad_samples_never_share_memory_between_calls():
    THETA = {"mu": 2.0, "sigma": 1.3}

    def model(estimator):
        def m(theta):
            x = scg.sample("x", scg.Normal(theta["mu"], theta["sigma"]), estimator=estimator)
            return x ** 2
        return m

    n = 5_000_000
    for estimator in ("pathwise", "score"):
        E = scg.expectation(model(estimator), n=n, seed=0)
        first = scg.grad_samples(E)(THETA).samples
        kept = {k: v.copy() for k, v in first.items()}
        second = scg.grad_samples(E)(THETA).samples
        kept2 = {k: v.copy() for k, v in second.items()}
        mu = first["mu"]
        del first  # (sigma's buffer is free again)
        third = scg.grad_samples(E)(THETA).samples
        for k in kept:
            assert not np.shares_memory(second[k], third[k])
            assert not np.shares_memory(mu, third[k]) and not np.shares_memory(mu, second[k])
        np.testing.assert_array_equal(mu, kept["mu"])
        for k in kept2:
            np.testing.assert_array_equal(second[k], kept2[k])
        del second, third, mu, kept, kept2
