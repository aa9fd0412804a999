"""The score-function (REINFORCE) estimator: grad log p(w) times its downstream costs."""

from .baselines import as_baseline


class Score:
    """Weight grad log p(w | parents) by (downstream costs - baseline).

    Args:
        baseline: None (plain REINFORCE), a number, 'loo', 'mean', or a
            `scg.baselines.Baseline` such as `MovingAverage(0.9)`.

    Example:
        >>> scg.sample("a", scg.Bernoulli(probs=p), estimator=scg.Score(baseline="loo"))
    """

    name = "score"

    def __init__(self, baseline=None):
        self.baseline = as_baseline(baseline)

    def __repr__(self):
        return f"Score(baseline={self.baseline!r})"
