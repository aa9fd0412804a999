"""Running a generated model under scg and comparing it with its exact reference.

Every check runs the model's printed source (`Model.to_code()`), so what a failure prints
is what ran. The exact reference runs the same source against reference.Exact.
"""

import contextlib
import itertools
import linecache
import re
import warnings

import numpy as np

import scg

from tests.jit.compare import agree, Raised, same_bits
from . import estimators as est
from . import reference

Z_LIMIT = 6.0          # |z| above this in both the first and the confirming run fails
FIRST_N = 4_000        # draws of the first run
CONFIRM_N = 16_000     # draws of the confirming run
HESSIAN_RUNS = 8       # independent Hessian estimates
HESSIAN_N = 1_000
HESSIAN_CONFIRM_RUNS = 24
HESSIAN_CONFIRM_N = 2_000
JIT_N = 64
JIT_CALLS = 5
_counter = itertools.count()


class Failure(AssertionError):
    pass


# ------------------------------------------------------------------- compiling
class _Recorder:
    """The scg module as a model sees it, with the indices of subsampled plates recorded."""

    def __init__(self):
        self.subsamples = {}     # the first run's indices per plate
        self.seen = []           # every run's indices: [{plate: indices}]

    def __getattr__(self, name):
        return getattr(scg, name)

    @contextlib.contextmanager
    def plate(self, name, size, dim=-1, subsample_size=None):
        with scg.plate(name, size, dim=dim, subsample_size=subsample_size) as idx:
            if subsample_size is not None:
                self.subsamples.setdefault(name, np.array(idx))
                self.seen.append({name: np.array(idx)})
            yield idx

    def candidates(self):
        """The distinct subsamples the model's runs in the call drew (a self-tuning
        estimator runs the model again after the gradient's run), the first first."""
        out = []
        for run in [self.subsamples] + self.seen:
            if not any(_same_subsamples(run, o) for o in out):
                out.append(run)
        return out


def _same_subsamples(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


class Compiled:
    """The model's source compiled once; `model(module)` is its function with `scg`
    bound to `module` (scg itself, a recorder, or the exact reference)."""

    def __init__(self, code):
        self.code = code
        self.filename = f"<differential model {next(_counter)}>"
        linecache.cache[self.filename] = (len(code), None, code.splitlines(True),
                                          self.filename)
        self.bytecode = compile(code, self.filename, "exec")

    def model(self, module):
        namespace = {"np": np, "scg": module}
        exec(self.bytecode, namespace)
        return namespace["model"]

    def exact_function(self, nodes, subsamples=None):
        """theta -> the exact expectation (with the plates' subsamples given)."""
        def run(fake, theta):
            return self.model(fake)(reference.PerState(np.asarray(theta, dtype=float)[None]))

        def run_and_return(fake, theta):
            out = run(fake, theta)
            if out is not None:
                fake.cost("<return>", out)

        return lambda theta: reference.expectation(run_and_return, theta, nodes,
                                                   subsamples=subsamples)


# ------------------------------------------------------------------- helpers
def _site_named(message, model):
    names = model.site_names()
    return any(f"'{n}'" in message or f'"{n}"' in message for n in names)


def _says_biased(text):
    return re.search(r"(?<!un)biased", text) is not None


def _describe(model, **numbers):
    lines = [repr(model)]
    for k, v in numbers.items():
        lines.append(f"{k} = {np.array2string(np.asarray(v), precision=6)}")
    return "\n".join(lines)


class ReferenceFailed(Failure):
    """The exact reference could not evaluate a generated model (a defect of the tester,
    not of scg)."""


def _exact(model, derivative, f, theta):
    try:
        return derivative(f, theta)
    except Exception as error:
        raise ReferenceFailed(_describe(model) + f"\nthe exact reference raised "
                              f"{type(error).__name__}: {error}") from error


def _expectation(model_fn, n, seed):
    E = scg.expectation(model_fn, n=n, seed=seed)
    E.warn_lost_history = False  # (each is called once, by design)
    return E


def _grad_samples(model, compiled, n, seed):
    """(GradSamples, subsamples, explain text, BiasWarnings) of one run."""
    rec = _Recorder()
    E = _expectation(compiled.model(rec), n=n, seed=seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gs = scg.grad_samples(E)(np.array(model.theta))
    bias = [w for w in caught if issubclass(w.category, scg.BiasWarning)]
    return gs, rec.candidates(), E.last_trace.explain(), bias


# estimators that differentiate along (a relaxation of) the draw: a jump downstream
# (np.where, a comparison) biases them, and scg says so with a BiasWarning
_ALONG_THE_DRAW = ("pathwise", "pathwise_antithetic", "pathwise_dreg", "rebar",
                   "rebar_hot_small_scale", "rebar_learning", "relax", "gumbel_softmax",
                   "gumbel_softmax_hard")


def check_bias_warning(model, message, explain):
    """A BiasWarning names a site whose estimator can be biased there, and explain()
    says that site is biased."""
    found = re.match(r"site '([^']+)'", message)
    if not found:
        # (a warning of the expectation as a whole, as a batch-mean baseline's: some
        # estimator of the model is knowingly biased, and explain() says so)
        if model.unbiased or not _says_biased(explain):
            raise Failure(_describe(model) + f"\nBiasWarning ({message}) names no site, and "
                          f"no site is biased in explain():\n{explain}")
        return
    name = found.group(1)
    site = next((s for s in model.sites if name == s.name or
                 (s.steps and re.fullmatch(re.escape(s.name) + r"_\d+", name))), None)
    if site is None:
        raise Failure(_describe(model) + f"\nBiasWarning names an unknown site: {message}")
    choice = site.estimator
    if est.BY_KEY[choice].unbiased and choice not in _ALONG_THE_DRAW:
        raise Failure(_describe(model) + f"\nBiasWarning at a site of an unbiased "
                      f"estimator ({choice}): {message}")
    block = _explain_block(explain, name)
    if not _says_biased(block):
        raise Failure(_describe(model) + f"\nBiasWarning ({message}) but explain() does "
                      f"not say site {name!r} is biased:\n{explain}")


def _explain_block(explain, name):
    """The lines of explain() about one sample site."""
    lines, inside = [], False
    for line in explain.splitlines():
        if re.match(r"  \S", line):
            inside = line.startswith(f"  {name} ~")
        if inside:
            lines.append(line)
    return "\n".join(lines)


def estimator_error_is_clear(error, model):
    """An EstimatorError for a documented limitation must name a site of the model; one
    about marginalized sites only where the model breaks their contract."""
    if not _site_named(str(error), model):
        raise Failure(_describe(model) + f"\nEstimatorError names no site: {error}")
    if model.marginal and not model.refusal and re.search(r"marginaliz", str(error), re.I):
        raise Failure(_describe(model) + f"\nscg refused a model that keeps the contract of "
                      f"marginalized sites: {error}")


def check_refused(model, call):
    """A model that breaks the contract of marginalized sites (a cost, or a drawn site's
    parameters, downstream of one): `call` must raise scg.EstimatorError naming a site,
    not return a number."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = call()
    except scg.EstimatorError as error:
        estimator_error_is_clear(error, model)
        return "refused"
    except Exception as error:
        raise Failure(_describe(model) + f"\nscg raised {type(error).__name__} where it "
                      f"must refuse the model with scg.EstimatorError: {error}") from error
    raise Failure(_describe(model, got=np.asarray(out, dtype=object))
                  + f"\nscg returned a number for a model it must refuse ({model.refusal} "
                  "downstream of a marginalized site)")


# ------------------------------------------------------------------- first order
def check_first_order(model):
    """scg's gradient of the expectation against the exact one, in standard errors.

    Returns what happened: "exact", "z", "biased" or "estimator-error"."""
    compiled = Compiled(model.to_code())
    theta = np.array(model.theta)
    if model.refusal:
        return check_refused(model, lambda: _grad_samples(model, compiled, 100, model.seed)[0]
                             .mean)
    try:
        gs, subs, explain, bias = _grad_samples(model, compiled, FIRST_N, model.seed)
    except scg.EstimatorError as error:
        estimator_error_is_clear(error, model)
        return "estimator-error"
    except Exception as error:
        raise Failure(_describe(model) + f"\nscg raised {type(error).__name__}: {error}") \
            from error
    for w in bias:
        check_bias_warning(model, str(w.message), explain)
    if bias:
        return "biased"
    if not model.unbiased:
        if not _says_biased(explain):
            raise Failure(_describe(model) + f"\na biased estimator, and explain() never "
                          f"says biased:\n{explain}")
        return "biased"
    if not np.all(np.isfinite(gs.mean)):
        raise Failure(_describe(model, got=gs.mean) + "\nnon-finite gradient")
    exact, z = _closest(model, compiled, gs, subs)
    if model.exact:
        if not np.allclose(gs.mean, exact, rtol=1e-6, atol=1e-7):
            raise Failure(_describe(model, got=gs.mean, exact=exact)
                          + "\nan exact estimator differs from the exact gradient")
        return "exact"
    if np.all(np.abs(z) < Z_LIMIT):
        return "z"
    # confirm with independent draws before failing
    gs2, subs2, _, _ = _grad_samples(model, compiled, CONFIRM_N, model.seed + 7919)
    exact2, z2 = _closest(model, compiled, gs2, subs2)
    bad = (np.abs(z) >= Z_LIMIT) & (np.abs(z2) >= Z_LIMIT)
    if np.any(bad):
        raise Failure(_describe(model, got=gs2.mean, exact=exact2, stderr=gs2.stderr, z=z2,
                                first_z=z) + "\nthe gradient is off the exact one")
    return "z"


def _closest(model, compiled, gs, candidates):
    """(exact gradient, z) at the subsample of the call's runs that agrees best (the
    gradient's run is the first; a tuning run after it may draw another minibatch)."""
    best = None
    for subs in candidates:
        exact = _exact(model, reference.gradient,
                       compiled.exact_function(model.nodes(), subs), np.array(model.theta))
        z = _z(gs.mean, gs.stderr, exact)
        if model.exact:
            z = (gs.mean - exact) / (1e-6 * (1 + np.abs(exact)))
        if best is None or np.max(np.abs(z)) < np.max(np.abs(best[1])):
            best = (exact, z)
    return best


def _z(mean, stderr, exact):
    # (coordinates with no variance, as an exact sum's: to the reference's accuracy)
    floor = 1e-6 * (1.0 + np.abs(exact))
    return (mean - exact) / np.maximum(stderr, floor)


# ------------------------------------------------------------------- second order
def check_second_order(model):
    """scg.hessian against the exact Hessian (estimators that serve second order), or
    scg.EstimatorError (those that serve first derivatives only)."""
    compiled = Compiled(model.to_code())
    theta = np.array(model.theta)
    if model.refusal:
        return check_refused(model, lambda: scg.hessian(_expectation(
            compiled.model(_Recorder()), n=100, seed=model.seed))(theta))
    if not model.unbiased:
        # (no expectation to compare with: a Hessian, or a clear error)
        E = _expectation(compiled.model(_Recorder()), n=100, seed=model.seed)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scg.hessian(E)(theta)
        except scg.EstimatorError as error:
            estimator_error_is_clear(error, model)
        except Exception as error:
            raise Failure(_describe(model) + f"\nscg.hessian raised {type(error).__name__}: "
                          f"{error}") from error
        return "biased"
    if not model.second_order:
        # an estimator of first derivatives only raises, unless its site needs no second
        # derivative (no cost downstream, say): then the Hessian must be right
        rec = _Recorder()
        E = _expectation(compiled.model(rec), n=100, seed=model.seed)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", scg.VarianceWarning)
                # (a bias warning of the model, across a jump, is checked at first order)
                warnings.simplefilter("ignore", scg.BiasWarning)
                scg.hessian(E)(theta)
        except scg.EstimatorError as error:
            estimator_error_is_clear(error, model)
            return ("first-order-only" if "first derivatives only" in str(error)
                    else "estimator-error")
        except Exception as error:
            raise Failure(_describe(model) + f"\nscg.hessian raised {type(error).__name__}: "
                          f"{error}") from error
    try:
        got, want = _hessians(model, compiled, 1 if model.exact and model.second_order
                              else HESSIAN_RUNS,
                              HESSIAN_N, model.seed)
    except scg.EstimatorError as error:
        estimator_error_is_clear(error, model)
        return "estimator-error"
    except Failure:
        raise
    except Exception as error:
        raise Failure(_describe(model) + f"\nscg.hessian raised {type(error).__name__}: "
                      f"{error}") from error
    if model.exact and len(got) == 1:
        if not np.allclose(got[0], want[0], rtol=1e-4, atol=1e-5):
            raise Failure(_describe(model, got=got[0], exact=want[0])
                          + "\nan exact Hessian differs from the exact one")
        return "exact"
    t = _t(got, want)
    if np.all(np.abs(t) < Z_LIMIT):
        return "z"
    got2, want2 = _hessians(model, compiled, HESSIAN_CONFIRM_RUNS, HESSIAN_CONFIRM_N,
                            model.seed + 7919)
    t2 = _t(got2, want2)
    if np.any((np.abs(t) >= Z_LIMIT) & (np.abs(t2) >= Z_LIMIT)):
        raise Failure(_describe(model, got=got2.mean(axis=0), exact=want2.mean(axis=0),
                                t=t2, first_t=t) + "\nthe Hessian is off the exact one")
    return "z"


def _hessians(model, compiled, runs, n, seed):
    """(estimates, exact Hessians at each run's subsamples), each (runs, d, d)."""
    theta = np.array(model.theta)
    got, want, cache = [], [], {}
    for r in range(runs):
        rec = _Recorder()
        E = _expectation(compiled.model(rec), n=n, seed=seed + 101 * r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scg.VarianceWarning)
            got.append(np.asarray(scg.hessian(E)(theta)))
        key = tuple((k, tuple(v)) for k, v in sorted(rec.subsamples.items()))
        if key not in cache:
            cache[key] = _exact(model, reference.hessian,
                                compiled.exact_function(model.nodes(), rec.subsamples), theta)
        want.append(cache[key])
    return np.array(got), np.array(want)


def _t(got, want):
    diff = got - want
    mean = diff.mean(axis=0)
    stderr = diff.std(axis=0, ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else 0.0
    floor = 1e-5 * (1.0 + np.abs(want.mean(axis=0)))
    return mean / np.maximum(stderr, floor)


# ------------------------------------------------------------------- jit
GRADIENT_ULPS = 0  # (a replay's gradient is eager's bit for bit: the contract)


def _same_value_near_gradient(a, b):
    """The value bit for bit; the gradient within GRADIENT_ULPS units in the last place of
    its largest coordinate (0: bit for bit, as the contract says; the recorded backward
    pass calls the plain twins of the rules that eager calls, see scg/core/tape.py)."""
    (va, ga), (vb, gb) = a, b
    if not same_bits(va, vb):
        return False
    ga, gb = np.asarray(ga), np.asarray(gb)
    if ga.shape != gb.shape or ga.dtype != gb.dtype:
        return False
    if not GRADIENT_ULPS or not (np.all(np.isfinite(ga)) and np.all(np.isfinite(gb))):
        return same_bits(ga, gb)
    scale = np.max(np.abs(ga), initial=0.0)
    return bool(np.all(np.abs(ga - gb) <= GRADIENT_ULPS * np.spacing(scale)))


def check_jit(model):
    """scg.jit of value_and_grad equals eager call after call, value and gradient bit for
    bit (see _same_value_near_gradient)."""
    compiled = Compiled(model.to_code())
    theta = np.array(model.theta)
    E1 = scg.expectation(compiled.model(scg), n=JIT_N, seed=model.seed)
    E2 = scg.expectation(compiled.model(scg), n=JIT_N, seed=model.seed)
    eager = scg.value_and_grad(E1)
    jitted = scg.jit(scg.value_and_grad(E2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        warnings.simplefilter("ignore", scg.VarianceWarning)
        bad = agree(eager, jitted, [(theta,)] * JIT_CALLS, same=_same_value_near_gradient)
    if bad:
        raise Failure(_describe(model) + f"\nscg.jit differs from eager: {bad}"
                      f"\n{jitted.explain()}")
    if E1.rng.bit_generator.state != E2.rng.bit_generator.state:
        raise Failure(_describe(model) + "\nafter the same calls, the jitted expectation's "
                      "generator is not where the eager one's is")
    if model.refusal:
        return check_refused(model, lambda: eager(theta))
    # (a model that raised raised in both the same way)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eager(theta)
    except scg.EstimatorError as error:
        estimator_error_is_clear(error, model)
        return "estimator-error"
    except Exception as error:
        raise Failure(_describe(model) + f"\nscg raised {type(error).__name__}: {error}") \
            from error
    # (a subsampled plate's indices are read as an index: a new minibatch records again;
    # an episode loop may end at another step on every call)
    if jitted.stats["replays"] < 1 and not model.subsampled and not model.episodes:
        raise Failure(_describe(model) + "\nscg.jit never replayed:\n" + jitted.explain())
    return "replayed"


__all__ = ["check_first_order", "check_second_order", "check_jit", "Compiled", "Failure",
           "Raised"]
