"""The eager cost of following plates by position: one gradient of a plated minibatch model
(batch 64, 32 Bernoulli latents, a decoder 64 wide, leave-one-out with n = 2), median of 7
loops of 100 gradients, in microseconds. Run it in alternation against another tree:

    for i in 1 2 3; do for t in OLD_TREE .; do PYTHONPATH=$t python benchmarks/plates_overhead.py; done; done
"""

import statistics
import time

import numpy as np

import scg

rng = np.random.default_rng(0)
x = (rng.random((64, 64)) < 0.4).astype(float)
p = {"eW": rng.normal(0, .01, (64, 32)), "dW": rng.normal(0, .01, (32, 64))}


def model(p, x):
    with scg.plate("batch", 64):
        logits = x @ p["eW"]
        z = scg.sample("z", scg.Bernoulli(logits=logits).to_event(1), estimator=scg.Score("loo"))
        out = z @ p["dW"]
        return -np.sum(x * out - scg.softplus(out), -1) + np.sum(z * logits - scg.softplus(logits), -1)


g = scg.grad(scg.expectation(model, n=2, seed=0))
for _ in range(20): g(p, x)
ts = []
for r in range(7):
    t = time.perf_counter()
    for _ in range(100): g(p, x)
    ts.append((time.perf_counter() - t) / 100 * 1e6)
print(f"{statistics.median(ts):.0f}")
