"""RELAX (Grathwohl, Choi, Wu, Roeder and Duvenaud 2018): REBAR with a learned control
variate, for the sites whose family declares a concrete relaxation (Bernoulli,
OneHotCategorical).

The control variate is c(s) = eta f(s) + r(params, s): the relaxed cost of REBAR plus a
function r of the relaxed value s. The estimate

    (f(b) - c(s(z~))) d log p(b) / da + d c(s(z)) / da - d c(s(z~)) / da

is unbiased whatever r, T and eta are (the last two terms make the control's mean zero),
and with `learn=True` all of them, r's parameters included, are tuned after each call by
descending an unbiased estimate of the gradient of the estimate's variance (see
estimators/learned.py). r sees the relaxed values of one plate element at a time (the
site's dims outside its plates, and the categories, are its features) and gives one
number per element; the default is a small tanh MLP whose last layer starts at zero, so
RELAX starts as REBAR.

The control's parameters are the site's: its input width is derived from the site's
distribution and plates (the same way at every draw, so the estimator keeps nothing of a
site), they start from the same deterministic initialization, and they are tuned in the
site's state. So one RELAX object serves any number of sites and expectations, of any
widths, each with a control of its own.
"""

import functools

import numpy as np

from ..core import effects, pytree
from ..core.tape import strip
from ..distributions.base import family_of
from ..errors import EstimatorError
from ..numpy import rules as R
from .. import nn
from .rebar import REBAR


class RELAX(REBAR):
    """REBAR with a learned control variate r(params, relaxed value).

    Args:
        control: None (a tanh MLP with one hidden layer of `hidden` units, its input the
            element's relaxed values), or `(fn, init_params)`: `fn(params, s)` maps relaxed
            values s of shape (..., features) to (..., 1), written with numpy (it is traced).
        learn: tune r, the temperature and the scale after each gradient call.
        temperature, scale: where T and eta start (REBAR's).
        lr: the Adam step size of the tuning.
        hidden: the default control's width.

    Example:
        >>> scg.sample("b", scg.Bernoulli(logits=a), estimator=scg.RELAX())
    """

    name = "relax"

    def __init__(self, control=None, learn=True, temperature=0.5, scale=1.0, lr=0.01,
                 hidden=16):
        super().__init__(temperature, scale, learn, lr)
        if control is not None:
            if not (isinstance(control, tuple) and len(control) == 2 and callable(control[0])):
                raise TypeError("RELAX: control must be None or (fn, init_params), fn(params, "
                                f"relaxed) -> (..., 1); got {control!r}")
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
            raise ValueError(f"RELAX: hidden must be a positive int, got {hidden!r}")
        self.control = control
        self.hidden = hidden

    # ------------------------------------------------------------ the control's parameters
    def _control_init(self, dist, plates):
        """The control's initial parameters at the site of `dist` in `plates`: the user's,
        or the default's, its input width the site's (no site, `dist=None`: none)."""
        if self.control is not None:
            return self.control[1]
        if dist is None:
            return []
        return _default_layers(int(_features(dist, plates)), self.hidden)

    def initial_params(self, dist=None, plates=()):
        params = super().initial_params(dist, plates)
        leaves, _ = pytree.flatten_leaves(self._control_init(dist, plates))
        for i, leaf in enumerate(leaves):
            params[f"control.{i}"] = np.array(leaf, dtype=float)
        return params

    def _control_params(self, params, site):
        leaves, treedef = pytree.flatten_leaves(self._control_init(site.dist, site.plates))
        return pytree.unflatten(treedef, [params[f"control.{i}"] for i in range(len(leaves))])

    def _apply(self, params, s, site):
        fn = self.control[0] if self.control is not None else _default_control
        return fn(self._control_params(params, site), s)

    def shown(self, params):
        shown = super().shown(params)
        shown["control parameters"] = sum(np.size(v) for k, v in params.items() if k.startswith("control."))
        return shown

    # ------------------------------------------------------------ drawing
    def _control_values(self, site, n):
        """r at s(z) and s(z~) for the n draws, on the site's batch layout (n, *batch)."""
        relaxed, relaxed_tilde = site.aux["relaxed"]
        params = site.aux["params"]  # (REBAR's draw read them)
        out = []
        for s in (relaxed, relaxed_tilde):
            # (a per-draw value's physical rows; the estimators layer sits below the
            # stochastic one that defines it, so it is recognised by its dependencies)
            x = s.value if hasattr(s, "deps") else s
            x = x[:n]  # (every copy's rows hold the same relaxed values)
            features = _as_features(x, site)
            r = self._apply(params, features, site)
            _check_control_shape(self, site, np.shape(strip(features)), np.shape(strip(r)))
            out.append(_on_batch(r, site))
        return out

    def _control_at_tilde(self, site, ctx):
        _, c_zt = self._control_values(site, ctx.n)
        plain = effects.asarray(strip(c_zt), dtype=float)
        return ctx.grid.layout(plain, site.dist.batch_shape, site.plates, f"site {site.name!r}")

    def _control_correction(self, site, ctx):
        c_z, c_zt = self._control_values(site, ctx.n)
        difference = R.divide(R.subtract(R.sum_(c_z), R.sum_(c_zt)), ctx.n)
        return R.subtract(difference, R.stop_gradient(difference))  # (zero in value)

    def _probe_control(self, site, n):
        return self._control_values(site, n)

    def describe(self, site):
        return super().describe(site).replace("REBAR", "RELAX", 1).replace(
            "the relaxation at z~", "eta f(relaxation) + a learned r(relaxation) at z~")

    def explain_terms(self, site, trace):
        return [line.replace("eta f(s(z~))", "c(s(z~))").replace("eta df(s(z))", "dc(s(z))")
                .replace("eta df(s(z~))", "dc(s(z~))") + ", c = eta f + r"
                for line in super().explain_terms(site, trace)]

    def __repr__(self):
        control = "default" if self.control is None else self.control[0].__name__
        return (f"RELAX(control={control}, learn={self.learn!r}, temperature="
                f"{self.temperature!r}, scale={self.scale!r})")


def _default_control(params, x):
    return nn.mlp(params, x, activation=R.tanh)


@functools.lru_cache(maxsize=64)
def _default_layers(features, hidden):
    """The default control's initial layers for an input of `features` numbers: a
    deterministic start (seed 0), the last layer zero."""
    layers = nn.init_mlp(0, [features, hidden, 1], init="glorot")
    layers[-1]["W"] = np.zeros_like(layers[-1]["W"])  # (r = 0 at first: REBAR)
    for layer in layers:
        for v in layer.values():
            v.flags.writeable = False  # (shared by the sites of this width)
    return layers


def _plate_axes(dist, plates):
    """The dims of the site's batch (its family's, to_event dims at the right) that are
    plates' (plates count their dims from the right of the outer batch shape)."""
    outer = len(tuple(dist.batch_shape))
    return sorted(outer + p.dim for p in plates if 0 <= outer + p.dim < outer)


def _features(dist, plates):
    """The control's input width: the site's values per plate element (the dims outside
    its plates, to_event dims and categories included)."""
    family = family_of(dist)
    shape = tuple(family.batch_shape) + tuple(family.event_shape)  # (the categories too)
    kept = _plate_axes(dist, plates)
    return int(np.prod([size for j, size in enumerate(shape) if j not in kept], dtype=int))


def _as_features(x, site):
    """Relaxed values (n, *values) as (n, *plate sizes, features)."""
    kept = _plate_axes(site.dist, site.plates)
    nd = len(np.shape(strip(x))) - 1
    rest = [j for j in range(nd) if j not in kept]
    x = R.transpose(x, tuple([0] + [1 + j for j in kept] + [1 + j for j in rest]))
    shape = np.shape(strip(x))
    return R.reshape(x, shape[:1 + len(kept)] + (-1,))


def _check_control_shape(est, site, given, got):
    """The control gives one number per draw and plate element: (n, *plate sizes, 1), its
    input's shape with the features replaced by 1 (or without that last axis)."""
    want = tuple(given[:-1]) + (1,)
    if tuple(got) in (want, want[:-1]):
        return
    fn = getattr(est.control[0], "__name__", "the control") if est.control else "the control"
    axes = "draws, plate elements, features" if len(given) > 2 else "draws, features"
    raise EstimatorError(
        f"site {site.name!r}: the control {fn}(params, s) of RELAX returned shape "
        f"{tuple(got)}; it must return one number per draw and plate element, shape {want}, "
        f"for relaxed values s of shape {tuple(given)} ({axes}). "
        "Keep the leading axes: reduce over the last axis only (np.sum(s, axis=-1, "
        "keepdims=True)); a reduction over the draws would mix them")


def _on_batch(r, site):
    """The control's output (n, *plate sizes, 1) on the layout of the site's costs (n,
    *family batch, its plates' sizes at their dims and 1 elsewhere)."""
    batch = tuple(family_of(site.dist).batch_shape)
    kept = _plate_axes(site.dist, site.plates)
    n = np.shape(strip(r))[0]
    return R.reshape(r, (n,) + tuple(batch[j] if j in kept else 1 for j in range(len(batch))))
