"""A study of every estimator of the worked example: x ~ N(mu, sigma), f(x) = x^2.

At theta = (mu, sigma) = (2, 1) the exact gradient of E[f] is (2 mu, 2 sigma) = (4, 2).
The file defines a study for `python -m scg compare`: the model, its differentiated
argument `params`, the estimators to compare, the exact gradient `reference`, and the
number of draws, seed and chunk size.

Run:
    python -m scg compare examples/study_worked_example.py
    python -m scg compare examples/study_worked_example.py --n 100000 --plot study.png
    python -m scg compare examples/study_worked_example.py --scheduler tcp://HOST:8786

It prints one row per estimator (mean, standard error, bias and z against the reference,
per-draw variance, evaluations and time per draw, efficiency) and writes the plot to
study_worked_example.png in the current directory. docs/studies.md shows the output.
"""

import numpy as np

import scg


def model(theta):
    """x ~ N(theta[0], theta[1]); the cost f(x) = x^2."""
    x = scg.sample("x", scg.Normal(theta[0], theta[1]))
    return x ** 2


params = np.array([2.0, 1.0])          # theta = (mu, sigma)
reference = np.array([4.0, 2.0])       # the exact gradient (2 mu, 2 sigma)
estimators = {
    "pathwise": scg.Pathwise(),
    "pathwise, antithetic": scg.Pathwise(antithetic=True),
    "score": scg.Score(),
    "score, leave-one-out": scg.Score("loo"),
    "score, loo, antithetic": scg.Score("loo", antithetic=True),
    "measure-valued": scg.MeasureValued(),
}
n = 10 ** 6                            # draws per estimator (n / 2 pairs for antithetic ones)
chunk = 100_000                        # draws per chunk: memory is one chunk's
seed = 0

if __name__ == "__main__":             # python examples/study_worked_example.py
    import sys

    from scg.__main__ import main
    sys.exit(main(["compare", __file__, *sys.argv[1:]]))
