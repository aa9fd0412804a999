"""What an expectation keeps for each of its sites between calls, in one place.

A site's baseline may keep state (a moving average, its count), and so may an estimator
that tunes itself; both live in the site's `SiteState`, kept by the expectation. Two
expectations of one model keep separate states; a copy of an expectation (pickled for a
dask worker, deep-copied for a study's chunk) carries them along.

A user may replace them between calls (a checkpoint restored: `E.states = saved`, or
`E.states[site].baseline = ...`): the sites read them through `baseline_of` and
`estimator_of` as objects kept between calls (`effects.kept`), so a repetition of the
call (scg.jit's replay) finds the new ones.
"""

from ..core import effects


class SiteState:
    """The state one site keeps between calls of its expectation.

    Attributes:
        baseline: the baseline's state (a dict it updates after each call).
        estimator: the estimator's own state (a dict, for estimators that tune themselves).
        checked: whether the baseline was checked not to use its own draw's cost.
        own_cost: whether that check found it did (the site's estimate is then biased).
    """

    __slots__ = ("baseline", "estimator", "checked", "own_cost")

    def __init__(self):
        self.baseline = {}
        self.estimator = {}
        self.checked = False
        self.own_cost = False

    def __getstate__(self):
        return (self.baseline, self.estimator, self.checked, self.own_cost)

    def __setstate__(self, state):
        self.baseline, self.estimator, self.checked, self.own_cost = state

    def __repr__(self):
        return f"SiteState(baseline={self.baseline!r}, estimator={self.estimator!r})"


class SiteStates:
    """The `SiteState` of every site an expectation has drawn, by site name."""

    __slots__ = ("_sites",)

    def __init__(self):
        self._sites = {}

    def of(self, name):
        """The state of site `name` (made empty on first use)."""
        state = self._sites.get(name)
        if state is None:
            state = self._sites[name] = SiteState()
        return state

    def __getitem__(self, name):
        return self._sites[name]

    def __contains__(self, name):
        return name in self._sites

    def __iter__(self):
        return iter(self._sites)

    def __len__(self):
        return len(self._sites)

    def baselines(self):
        """{site: its baseline's state} for the sites whose baseline keeps any."""
        return {k: s.baseline for k, s in self._sites.items() if s.baseline}

    def __getstate__(self):
        return self._sites

    def __setstate__(self, state):
        self._sites = state

    def __repr__(self):
        return f"SiteStates({self._sites!r})"


def _baseline_state(states, name):
    return states.of(name).baseline


def _estimator_state(states, name):
    return states.of(name).estimator


def baseline_of(states, name):
    """The state site `name`'s baseline keeps between calls (a dict)."""
    return effects.kept(_baseline_state, states, name)


def estimator_of(states, name):
    """The state site `name`'s estimator keeps between calls (a dict)."""
    return effects.kept(_estimator_state, states, name)
