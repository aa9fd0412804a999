"""Exact expectations of generated models, computed with numpy and scipy only.

A generated model is Python source that calls `scg.sample`, `scg.cost`, `scg.plate`,
`scg.logmeanexp` and a few helpers. Here the same source runs against `Exact`, a stand-in
for the `scg` module that knows nothing of scg: every latent scalar (one element of a
site) ranges over a finite grid, and every value the model computes is an array with one
leading row per joint state of the grid (`PerState`). The grid of a discrete element is
its support (Poisson truncated where the tail is below 1e-13); that of a Normal element
is Gauss-Hermite nodes of its standardized noise, that of a Gamma element generalized
Gauss-Laguerre nodes of its unit-rate draw. Each state carries the log of its probability
(discrete) or quadrature weight (continuous); the expectation is the weighted sum of the
costs over the states.

The model runs twice: once with a single state (to learn its sites, their shapes and
grid sizes), then on the product grid. Derivatives of the expectation are central finite
differences of it (the grid of a Normal or Gamma site is fixed noise, so the quadrature is
a smooth function of the parameters).

Sites summed out (`estimator=scg.Marginalize()`) are enumerated on the same grid, but their
log-probability is not a weight: with the `obs=` sites' log-probabilities and the
`scg.factor` terms it is a log-likelihood term. Per state of the drawn sites the model's
cost gains -log sum over the marginalized sites' values of exp(sum of the terms), summed
plate element by plate element from the innermost plate out (each element's own
marginalized sites summed alone, then the elements' logs added, times a subsampled
plate's scale): the objective scg documents, computed here by brute force on the grid
(`_log_evidence`), with no variable elimination.
"""

import contextlib
import math

import numpy as np
from scipy import special, stats

# Poisson rates in generated models are at most POISSON_MAX_RATE (a scaled sigmoid)
POISSON_MAX_RATE = 2.0
POISSON_SUPPORT = int(stats.poisson.isf(1e-13, POISSON_MAX_RATE)) + 2


class OutsideTheReference(Exception):
    """A generated model the reference cannot evaluate (a defect of the generator)."""


# --------------------------------------------------------------------- per-state values
class PerState:
    """A value with one leading row per joint state; the rest is the model's logical shape.

    Numpy's functions on it broadcast logical shapes from the right, as scg's per-draw
    values do; a row count of 1 means the value does not depend on any draw."""

    __array_priority__ = 1000

    def __init__(self, a):
        self.a = np.asarray(a)
        if self.a.ndim == 0:
            raise OutsideTheReference("a per-state value needs its state axis")

    @property
    def rank(self):
        return self.a.ndim - 1

    @property
    def shape(self):
        return self.a.shape[1:]

    @property
    def ndim(self):
        return self.rank

    def __repr__(self):
        return f"PerState(rows={self.a.shape[0]}, shape={self.shape})"

    # numpy's ufuncs: align the logical shapes from the right, keep the state axis first
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or "out" in kwargs:
            return NotImplemented
        return _apply(ufunc, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        impl = _FUNCTIONS.get(func)
        if impl is None:
            raise OutsideTheReference(f"the reference has no rule for np.{func.__name__}")
        return impl(*args, **kwargs)

    def __array__(self, dtype=None, copy=None):
        raise OutsideTheReference("a per-state value cannot become a plain array")

    def __getitem__(self, key):
        if isinstance(key, PerState):
            if self.a.shape[0] != 1:
                raise OutsideTheReference("a table indexed by a draw must not depend on draws")
            return PerState(self.a[0][key.a])
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            return PerState(self.a[(slice(None),) + key])
        if any(isinstance(k, (PerState, np.ndarray)) for k in key):
            raise OutsideTheReference("the reference indexes by ints, slices, None and ...")
        return PerState(self.a[(slice(None),) + key])

    def __len__(self):
        return self.shape[0]

    def _op(ufunc, reflected=False):
        if reflected:
            return lambda self, other: ufunc(other, self)
        return lambda self, other: ufunc(self, other)

    __add__, __radd__ = _op(np.add), _op(np.add, True)
    __sub__, __rsub__ = _op(np.subtract), _op(np.subtract, True)
    __mul__, __rmul__ = _op(np.multiply), _op(np.multiply, True)
    __truediv__, __rtruediv__ = _op(np.true_divide), _op(np.true_divide, True)
    __pow__, __rpow__ = _op(np.power), _op(np.power, True)
    def __matmul__(self, other):
        return _matmul(self, other)
    __gt__, __lt__ = _op(np.greater), _op(np.less)
    __ge__, __le__ = _op(np.greater_equal), _op(np.less_equal)
    __and__, __rand__ = _op(np.logical_and), _op(np.logical_and, True)
    __or__, __ror__ = _op(np.logical_or), _op(np.logical_or, True)
    del _op

    def __invert__(self):
        return np.logical_not(self)

    def __neg__(self):
        return np.negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return np.absolute(self)


def _rank(x):
    return x.rank if isinstance(x, PerState) else np.ndim(x)


def _lift(x, rank):
    """x as an array whose last `rank` axes are its logical ones (states first)."""
    if isinstance(x, PerState):
        a = x.a
        return a.reshape(a.shape[:1] + (1,) * (rank - x.rank) + a.shape[1:])
    return np.asarray(x)


def _apply(fn, inputs, kwargs=None):
    rank = max(_rank(x) for x in inputs)
    out = fn(*[_lift(x, rank) for x in inputs], **(kwargs or {}))
    if not any(isinstance(x, PerState) for x in inputs):
        return out
    if isinstance(out, tuple):
        return tuple(PerState(o) for o in out)
    return PerState(out)


def _where(cond, a, b):
    return _apply(np.where, (cond, a, b))


def _sum(x, axis=None, keepdims=False):
    if not isinstance(x, PerState):
        return np.sum(x, axis=axis, keepdims=keepdims)
    if axis is None:
        axes = tuple(range(1, x.a.ndim))
    else:
        axes = tuple(ax if ax < 0 else ax + 1 for ax in np.atleast_1d(axis))
        if any(ax >= 0 or -ax > x.rank for ax in axes):
            raise OutsideTheReference(f"sum over axis {axis} of a value of shape {x.shape}")
    return PerState(np.sum(x.a, axis=axes, keepdims=keepdims))


def _einsum(subscripts, a, b):
    """The two contractions generated models use: '...i,i->...' and '...i,...i->...'."""
    if subscripts.replace(" ", "") not in ("...i,i->...", "...i,...i->..."):
        raise OutsideTheReference(f"the reference has no rule for einsum {subscripts!r}")
    return _sum(_apply(np.multiply, (a, b)), axis=-1)


def _matmul(a, b):
    """a @ b for a vector a (one per state and batch element) and a vector or a matrix b
    that does not depend on draws."""
    if _rank(b) == 1:
        return _einsum("...i,i->...", a, b)
    if _rank(b) != 2:
        raise OutsideTheReference("@ a vector or a matrix only")
    ra = max(_rank(a), 1)
    A, B = _lift(_p(a), ra), _lift(_p(b), 2)
    B = B.reshape(B.shape[:1] + (1,) * (ra - 1) + B.shape[1:])
    return PerState(np.sum(A[..., None] * B, axis=-2))


def _expand_dims(x, axis):
    if axis != -1:
        raise OutsideTheReference("expand_dims at the last axis only")
    return x[..., None]


_FUNCTIONS = {np.where: _where, np.sum: _sum, np.einsum: _einsum,
              np.expand_dims: _expand_dims}


def _plain(x):
    """The plain array of a value that must not depend on draws."""
    if isinstance(x, PerState):
        if x.a.shape[0] != 1:
            raise OutsideTheReference("a value that must be shared by all draws depends on draws")
        return x.a[0]
    return np.asarray(x, dtype=float)


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _log_softmax(x):
    return x - special.logsumexp(x, axis=-1, keepdims=True)


# ------------------------------------------------------------------------- families
class _Dist:
    family = None
    discrete = True

    def __init__(self, **params):
        self.params = params

    def batch_rank_shape(self):
        """The logical batch shape (state axis excluded)."""
        shapes = [np.shape(_lift(v, _rank(v)))[1:] if isinstance(v, PerState) else np.shape(v)
                  for v in self.params.values() if v is not None]
        shape = np.broadcast_shapes(*shapes) if shapes else ()
        if self.categorical:
            shape = shape[:-1]
        return shape

    categorical = False


def _p(x):
    """x as a PerState (a plain value gets one row)."""
    return x if isinstance(x, PerState) else PerState(np.asarray(x, dtype=float)[None])


class Bernoulli(_Dist):
    family = "Bernoulli"

    def __init__(self, probs=None, logits=None):
        super().__init__(probs=probs, logits=logits)

    def grid_size(self, nodes):
        return 2

    def log_prob(self, value):
        logits = self.params["logits"]
        if logits is not None:
            lp1, lp0 = _apply(_log_sigmoid, (logits,)), _apply(_log_sigmoid, (-logits,))
        else:
            # (a probability that rounds to 0 or 1 at a far quadrature node: its state
            # has weight 0)
            with np.errstate(divide="ignore"):
                probs = self.params["probs"]
                lp1, lp0 = np.log(probs), np.log(1.0 - probs)
        return _where(value > 0.5, lp1, lp0)

    def value(self, index, nodes):
        return PerState(index.astype(float))


class Categorical(_Dist):
    family = "Categorical"
    categorical = True

    def __init__(self, probs=None, logits=None):
        super().__init__(probs=probs, logits=logits)

    def _log_probs(self):
        if self.params["logits"] is not None:
            return _apply(_log_softmax, (self.params["logits"],))
        p = self.params["probs"]
        with np.errstate(divide="ignore"):
            return _apply(lambda q: np.log(q / np.sum(q, axis=-1, keepdims=True)), (p,))

    @property
    def num_categories(self):
        v = self.params["logits"] if self.params["logits"] is not None else self.params["probs"]
        return (v.shape if isinstance(v, PerState) else np.shape(v))[-1]

    def grid_size(self, nodes):
        return self.num_categories

    def _index_of(self, value):
        return value

    def log_prob(self, value):
        lp = _p(self._log_probs())
        idx = _p(self._index_of(value))
        rank = max(lp.rank - 1, idx.rank)
        a = _lift(lp, rank + 1)
        i = _lift(idx, rank).astype(np.intp)
        shape = np.broadcast_shapes(a.shape[:-1], i.shape)
        a = np.broadcast_to(a, shape + a.shape[-1:])
        i = np.broadcast_to(i, shape)
        return PerState(np.take_along_axis(a, i[..., None], axis=-1)[..., 0])

    def value(self, index, nodes):
        return PerState(index.astype(np.int64))


class OneHotCategorical(Categorical):
    family = "OneHotCategorical"

    def _index_of(self, value):
        return PerState(np.argmax(_p(value).a, axis=-1))

    def value(self, index, nodes):
        return PerState(np.eye(self.num_categories)[index])


class Binomial(_Dist):
    family = "Binomial"

    def __init__(self, total_count, probs):
        super().__init__(probs=probs)
        self.total_count = int(_plain(total_count))

    def grid_size(self, nodes):
        return self.total_count + 1

    def log_prob(self, value):
        n = self.total_count
        # (xlogy: a count of 0 at p = 0 or 1, where a far quadrature node rounds p, adds 0)
        with np.errstate(divide="ignore"):
            return _apply(lambda k, p: special.gammaln(n + 1.0) - special.gammaln(k + 1.0)
                          - special.gammaln(n - k + 1.0) + special.xlogy(k, p)
                          + special.xlog1py(n - k, -p), (value, self.params["probs"]))

    def value(self, index, nodes):
        return PerState(index.astype(float))


class Poisson(_Dist):
    family = "Poisson"

    def __init__(self, rate):
        super().__init__(rate=rate)

    def grid_size(self, nodes):
        return POISSON_SUPPORT

    def log_prob(self, value):
        rate = self.params["rate"]
        return _apply(lambda k, r: k * np.log(r) - r - special.gammaln(k + 1.0), (value, rate))

    def value(self, index, nodes):
        return PerState(index.astype(float))


class Normal(_Dist):
    family = "Normal"
    discrete = False

    def __init__(self, loc, scale):
        super().__init__(loc=loc, scale=scale)

    def grid_size(self, nodes):
        return nodes

    def log_prob(self, value):
        return _apply(lambda x, m, s: stats.norm.logpdf(x, m, s),
                      (value, self.params["loc"], self.params["scale"]))

    def quadrature(self, nodes):
        x, w = np.polynomial.hermite_e.hermegauss(nodes)
        return x, w / w.sum()

    def value(self, index, nodes):
        x, _ = self.quadrature(nodes)
        return self.params["loc"] + self.params["scale"] * PerState(x[index])


class Gamma(_Dist):
    family = "Gamma"
    discrete = False

    def __init__(self, concentration, rate):
        super().__init__(concentration=concentration, rate=rate)

    def grid_size(self, nodes):
        return nodes

    def _concentration(self):
        a = _plain(self.params["concentration"])
        if np.ndim(a) != 0:
            raise OutsideTheReference("a Gamma concentration must be one number")
        return float(a)

    def log_prob(self, value):
        a = self._concentration()
        return _apply(lambda x, r: stats.gamma.logpdf(x, a, scale=1.0 / r),
                      (value, self.params["rate"]))

    def quadrature(self, nodes):
        t, w = special.roots_genlaguerre(nodes, self._concentration() - 1.0)
        return t, w / w.sum()

    def value(self, index, nodes):
        t, _ = self.quadrature(nodes)
        return PerState(t[index]) / self.params["rate"]


# -------------------------------------------------------------------- the stand-in module
class _Anything:
    """Estimator and baseline constructors: the reference ignores them."""

    def __call__(self, *args, **kwargs):
        return self

    def __getattr__(self, name):
        return self


class _Marginalized:
    """What `scg.Marginalize()` gives the reference: a mark that the site is summed out."""

    def __init__(self, *args, **kwargs):
        pass


class Exact:
    """A stand-in for the scg module that evaluates a model on a grid of joint states."""

    Marginalize = _Marginalized

    Bernoulli, Categorical, OneHotCategorical = Bernoulli, Categorical, OneHotCategorical
    Normal, Gamma, Poisson, Binomial = Normal, Gamma, Poisson, Binomial

    def __init__(self, grid=None, nodes=8, subsamples=None):
        # grid: None (discovery: one state) or {site name: (indices of shape (S, *batch))}
        self.grid = grid
        self.nodes = nodes
        self.subsamples = dict(subsamples or {})
        self.sites = []          # (name, dist, batch shape) in order
        self.plates = []         # the open plates: (name, size, dim, scale)
        self.log_weight = 0.0
        self.total = 0.0
        self.cost_names = []
        self.known_plates = {}   # name -> dim of every plate opened so far
        self.plate_sizes = {}    # name -> (elements in the run, scale)
        self.marginal = {}       # marginalized site -> the names of the plates open there
        self.terms = []          # log-likelihood terms: (PerState, names of the open plates)
        self.masks = []          # the conditions of the open scg.mask blocks

    def __getattr__(self, name):  # scg.Score(...), scg.baselines.MovingAverage(...), ...
        if name[:1].isupper() or name in ("baselines",):
            return _Anything()
        raise AttributeError(name)

    # helpers of scg's namespace that generated models use
    @staticmethod
    def sigmoid(x):
        return _apply(special.expit, (x,))

    @staticmethod
    def softmax(x, axis=-1):
        if axis != -1:
            raise OutsideTheReference("softmax over the last axis only")
        return _apply(lambda v: special.softmax(v, axis=-1), (x,))

    @staticmethod
    def take(table, index, axis=0):
        if axis != 0:
            raise OutsideTheReference("take along axis 0 only")
        return PerState(np.take(_plain(table), _p(index).a, axis=0))

    def sample(self, name, dist, estimator=None, obs=None):
        if obs is not None:
            # an observed site: its log-probability is a log-likelihood term
            self.terms.append((_p(dist.log_prob(obs)), self._open_plates()))
            return obs
        marginal = isinstance(estimator, _Marginalized)
        if marginal and not dist.discrete:
            raise OutsideTheReference(f"site {name!r}: only finite sites are summed out")
        batch = tuple(dist.batch_rank_shape())
        if self.grid is None:
            self.sites.append((name, dist, batch))
            index = np.zeros((1,) + batch, dtype=np.intp)
        else:
            index = self.grid[name]
            if index.shape[1:] != batch:
                raise OutsideTheReference(f"site {name!r} changed its shape between passes")
        value = dist.value(index, self.nodes)
        if marginal:
            self.marginal[name] = self._open_plates()
            self.terms.append((_p(dist.log_prob(value)), self._open_plates()))
            return value
        if dist.discrete:
            lw = dist.log_prob(value)
        else:
            _, w = dist.quadrature(self.nodes)
            lw = PerState(np.log(w)[index])
        lw = _lift(_p(lw), len(batch))
        self.log_weight = self.log_weight + lw.reshape(lw.shape[0], -1).sum(axis=1)
        return value

    def factor(self, name, log_value):
        self.terms.append((_p(log_value), self._open_plates()))

    @staticmethod
    def markov(iterable, history=1):
        return iter(iterable)

    def _open_plates(self):
        return tuple(p[0] for p in self.plates)

    def cost(self, name, value):
        self.cost_names.append(name)
        for mask in self.masks:  # (a cost counts only where its episode is alive)
            value = _where(mask, value, 0.0)
        a = _p(value).a
        total = a.reshape(a.shape[0], -1).sum(axis=1)
        for _, _, _, scale in self.plates:
            total = total * scale
        self.total = self.total + total

    @contextlib.contextmanager
    def mask(self, condition):
        """Sites inside draw as usual (their values sum out where the mask is off: their
        probabilities add to 1); costs inside count where `condition` holds."""
        self.masks.append(condition)
        try:
            yield
        finally:
            self.masks.pop()

    def all(self, condition):
        """True when `condition` holds in every state (the loop then ends). The grid holds
        the state that never ends (every draw 1): the loop runs to its end there, and so
        does the pass that discovers the sites."""
        if self.grid is None:
            return False
        return bool(np.all(_p(condition).a))

    @contextlib.contextmanager
    def plate(self, name, size, dim=-1, subsample_size=None):
        if subsample_size is None or name not in self.subsamples:
            idx, scale = np.arange(size), 1.0
        else:
            idx = np.asarray(self.subsamples[name])
            if len(idx) != subsample_size:
                raise OutsideTheReference(f"plate {name!r}: {len(idx)} indices given")
            scale = size / subsample_size
        self.plates.append((name, len(idx), dim, scale))
        self.known_plates[name] = dim
        self.plate_sizes[name] = (len(idx), scale)
        try:
            yield idx
        finally:
            self.plates.pop()

    def logmeanexp(self, value, plate):
        if plate not in self.known_plates:
            raise OutsideTheReference(f"no plate {plate!r}")
        value = _p(value)
        dim = self.known_plates[plate]
        if value.rank < -dim:
            return value
        axis = value.a.ndim + dim
        return PerState(special.logsumexp(value.a, axis=axis)
                        - np.log(value.a.shape[axis]))


def _discover(run, theta, subsamples):
    """The sites of the model, in order: [(name, dist, batch shape)]."""
    fake = Exact(grid=None, subsamples=subsamples)
    run(fake, theta)
    return fake.sites, fake.marginal


def grid_shape(sites, nodes):
    """Per site, (elements, values per element)."""
    return [(int(np.prod(batch, dtype=np.int64)), dist.grid_size(nodes))
            for _, dist, batch in sites]


def joint_states(sites, nodes):
    return math.prod(g ** m for m, g in grid_shape(sites, nodes))


def continuous_scalars(sites):
    return sum(int(np.prod(batch, dtype=np.int64)) for _, dist, batch in sites
               if not dist.discrete)


def expectation(run, theta, nodes, subsamples=None, max_states=200_000):
    """The exact expectation of the model `run(scg_module, theta)` at theta."""
    theta = np.asarray(theta, dtype=float)
    sites, marginal = _discover(run, theta, subsamples)
    sizes = grid_shape(sites, nodes)
    radices = [g for m, g in sizes for _ in range(m)]
    S = math.prod(radices)
    if S > max_states:
        raise OutsideTheReference(f"{S} joint states")
    # mixed-radix digits of every state, one column per latent scalar
    digits = np.empty((S, len(radices)), dtype=np.intp)
    stride = 1
    for k in range(len(radices) - 1, -1, -1):
        digits[:, k] = (np.arange(S) // stride) % radices[k]
        stride *= radices[k]
    grid, col = {}, 0
    for (name, _, batch), (m, _) in zip(sites, sizes):
        grid[name] = digits[:, col:col + m].reshape((S,) + batch)
        col += m
    fake = Exact(grid=grid, nodes=nodes, subsamples=subsamples)
    run(fake, theta)
    lw = np.broadcast_to(np.asarray(fake.log_weight, dtype=float), (S,))
    total = np.broadcast_to(np.asarray(fake.total, dtype=float), (S,))
    if not fake.terms:
        return float(np.sum(np.exp(lw) * total))
    # the states of the drawn sites: the marginalized sites' digits at 0 (nothing else
    # depends on them), and per state -log of the sum over them
    shape = tuple(radices) or (1,)
    axes = _marginal_axes(sites, sizes, fake.marginal, fake.known_plates)
    first = tuple(slice(0, 1) if k in {a for ax in axes.values() for a in ax} else slice(None)
                  for k in range(len(shape)))
    log_z = np.broadcast_to(_log_evidence(fake, shape, axes), shape)[first]
    lw, total = lw.reshape(shape)[first], total.reshape(shape)[first]
    return float(np.sum(np.exp(lw) * (total - log_z)))


def _marginal_axes(sites, sizes, marginal, dims):
    """{(the plates of a marginalized site, an element of them): the grid's axes (one per
    latent scalar) of that element's marginalized scalars}. A site's batch shape aligns
    with its plates' dims from the right (`dims`: plate -> dim)."""
    axes, col = {}, 0
    for (name, dist, batch), (m, _) in zip(sites, sizes):
        if name in marginal:
            plates = marginal[name]
            declared = {len(batch) + dims[p] for p in plates}
            if any(n > 1 and k not in declared for k, n in enumerate(batch)) or \
                    any(k < 0 for k in declared):
                raise OutsideTheReference(f"marginalized site {name!r} of batch shape {batch} "
                                          f"in plates {plates}")
            for k, coord in enumerate(np.ndindex(*batch)):
                el = tuple(coord[len(batch) + dims[p]] for p in plates)
                axes.setdefault((plates, el), []).append(col + k)
        col += m
    return axes


def _log_evidence(fake, shape, axes):
    """log sum over the marginalized sites of exp(sum of the log-likelihood terms), on the
    grid of shape `shape` (an axis per latent scalar): the deepest plates first, each
    element's marginalized sites summed alone, then the elements' logs added (times the
    plate's scale) into the level around it. (Along a marginalized axis the result is
    constant.)"""
    chain = ()
    for plates in [p for _, p in fake.terms] + list(fake.marginal.values()):
        if len(plates) > len(chain):
            chain = plates
    for plates in [p for _, p in fake.terms] + list(fake.marginal.values()):
        if plates != chain[:len(plates)]:
            raise OutsideTheReference(f"plates {plates} are not nested in {chain}")
    S = math.prod(shape)
    rank = max((-fake.known_plates[p] for p in chain), default=0)
    levels = [np.zeros(shape + tuple(fake.plate_sizes[p][0] for p in chain[:k]))
              for k in range(len(chain) + 1)]
    for value, plates in fake.terms:
        a = _lift(value, max(rank, value.rank))
        if a.ndim - 1 > rank:
            raise OutsideTheReference(f"a likelihood term of shape {value.shape} has dims "
                                      "left of its plates")
        a = np.broadcast_to(a, (S,) + a.shape[1:])
        dims = {fake.known_plates[p]: p for p in plates}
        for d in range(-rank, 0):  # (dims no plate of the term declares: summed)
            if d not in dims:
                a = np.sum(a, axis=a.ndim + d, keepdims=True)
        a = a.reshape((S,) + tuple(a.shape[a.ndim + fake.known_plates[p]] for p in plates))
        sizes = tuple(fake.plate_sizes[p][0] for p in plates)
        levels[len(plates)] = levels[len(plates)] + np.broadcast_to(a, (S,) + sizes).reshape(
            shape + sizes)
    carry = 0.0
    for k in range(len(chain), -1, -1):
        cur = levels[k] + carry
        sizes = tuple(fake.plate_sizes[p][0] for p in chain[:k])
        here = sorted({a for (plates, _), ax in axes.items() if len(plates) == k for a in ax})
        out = []
        for el in np.ndindex(*sizes):
            v = cur[(Ellipsis,) + el] if sizes else cur
            own = axes.get((chain[:k], el), [])
            if own:
                v = special.logsumexp(v, axis=tuple(own), keepdims=True)
            for a in here:
                if a not in own:
                    v = np.take(v, [0], axis=a)
            out.append(v)
        if not sizes:
            return out[0]
        stacked = np.stack(out, axis=-1).reshape(out[0].shape + sizes)
        carry = fake.plate_sizes[chain[k - 1]][1] * np.sum(stacked, axis=-1)
    raise AssertionError("unreachable")


def gradient(f, theta, h=1e-5):
    theta = np.asarray(theta, dtype=float)
    out = np.empty_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        out[i] = (f(theta + e) - f(theta - e)) / (2 * h)
    return out


def hessian(f, theta, h=1e-4):
    theta = np.asarray(theta, dtype=float)
    d = theta.size
    f0 = f(theta)
    out = np.empty((d, d))
    for i in range(d):
        ei = np.zeros(d)
        ei[i] = h
        out[i, i] = (f(theta + ei) - 2 * f0 + f(theta - ei)) / h ** 2
        for j in range(i):
            ej = np.zeros(d)
            ej[j] = h
            v = (f(theta + ei + ej) - f(theta + ei - ej) - f(theta - ei + ej)
                 + f(theta - ei - ej)) / (4 * h * h)
            out[i, j] = out[j, i] = v
    return out
