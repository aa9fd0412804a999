"""Random stochastic computation graphs from a small grammar, printed as Python code.

A generated `Model` is a list of sites and costs in regions of the model's body:

    def model(theta):
        <region "top": sites, loops of sequential sites, costs>
        with scg.plate("p", ...) as idx:           # optional; subsampled or not
            <region "p">
            with scg.plate("q", ...):               # optional, nested in p
                <region "pq">
            <region "p_after": costs that combine the elements of q>
        <region "after": costs that combine the elements of p>
        return <one more cost>                      # optional

Sites: Bernoulli (logits or probs), Categorical and OneHotCategorical (logits or probs),
Normal, Gamma and Poisson. Their parameters are affine in a coordinate of theta, in the
plate's data and in earlier draws (Schulman et al.'s graph 5: a parameter downstream of a
draw), passed through sigmoid, softmax or exp. Costs: arithmetic of draws and theta,
`np.where` on a discrete draw, a table indexed by a Categorical draw (`scg.take` and a
theta-dependent table), `np.einsum` of a one-hot draw, sums over a plate and
`scg.logmeanexp` over a plate (with the proposal's `log_prob` in the log-weights, as an
importance-weighted bound). A loop may be an episode: its Bernoulli steps inside
`with scg.mask(alive):`, a draw of 0 ending that draw's episode, and
`if scg.all(~alive): break` ending the loop once every draw's has (so the loop's length, and
scg.jit's program, change from call to call); nothing after the loop reads its draw. Every site gets an estimator that serves its family, drawn
per site (see estimators.py).

`Model.to_code()` is the model: the tests run that source, under scg and under the exact
reference (reference.py), so a shrunk failure prints exactly what ran.
"""

import math
from dataclasses import dataclass, field

from hypothesis import strategies as st

from . import estimators as est
from .reference import POISSON_SUPPORT

THETA_VALUES = (0.3, -0.5, 0.8, -0.2, 0.6, 0.1, -0.7, 0.0)
CONSTS = (0.0, 0.3, -0.4, 0.7, -0.9, 0.5)
COEFS = (1.0, -0.6, 0.8, 1.5, -1.2, 0.4)
WEIGHTS = (0.5, -0.7, 1.0, -0.3, 0.8)
TABLES = {2: (1.0, -0.5), 3: (1.0, -0.5, 2.0), 4: (1.0, -0.5, 2.0, 0.3)}
LOGIT_SLOPES = {2: (0.0, 1.0), 3: (0.0, 1.0, -0.5), 4: (0.0, 1.0, -0.5, 0.7)}
LOGIT_OFFSETS = {2: (0.2, -0.1), 3: (0.2, -0.1, 0.0), 4: (0.2, -0.1, 0.0, 0.3)}
FEATURES = {2: (0.0, 1.0), 3: (0.0, 1.0, -0.5), 4: (0.0, 1.0, -0.5, 0.5)}
DATA = (0.2, -0.3, 0.4, -0.1)

# quadrature nodes per continuous scalar, by the number of continuous scalars
NODES = {0: 1, 1: 24, 2: 12, 3: 7, 4: 5}
MAX_CONTINUOUS = 4
MAX_STATES = 40_000

FAMILY_ORDER = ("Bernoulli-logits", "Normal", "Categorical-logits", "OneHot-logits",
                "Poisson", "Gamma", "Bernoulli-probs", "Categorical-probs", "OneHot-probs")


def arr(values):
    return "np.array([" + ", ".join(repr(float(v)) for v in values) + "])"


def term(weight, expr):
    """' + w * expr' with the sign folded."""
    if weight == 0:
        return ""
    sign = " - " if weight < 0 else " + "
    w = abs(weight)
    return f"{sign}{expr}" if w == 1 else f"{sign}{w!r} * {expr}"


@dataclass
class Site:
    name: str
    family: str
    scope: str                 # "top", "p" or "pq"
    dist: str                  # the distribution's code; in a loop it reads the previous draw
    K: int = 0                 # categories (Categorical, OneHot)
    steps: int = 0             # > 0: a Python loop of `steps` sequential sites
    step_cost: str = ""        # a loop's cost per step
    step_cost_kind: str = ""
    estimator: str = "auto"    # a key of estimators.BY_KEY
    refs: tuple = ()           # names of the sites its parameters read
    marginal: bool = False     # summed out (scg.Marginalize()); in a loop, scg.markov
    episode: bool = False      # a loop whose episodes end (scg.mask, `if scg.all: break`)

    @property
    def discrete(self):
        return self.family in est.DISCRETE

    def elements(self, plates):
        return math.prod(p.size_in_reference for p in plates if p.name in self.scope_plates)

    @property
    def scope_plates(self):
        return {"top": (), "p": ("p",), "pq": ("p", "q")}[self.scope]

    def estimator_code(self):
        return est.BY_KEY[self.estimator].code.replace("{K}", str(self.K))


@dataclass
class Cost:
    name: str
    region: str                # where scg.cost is called: "top", "p", "pq", "p_after", "after"
    expr: str
    kind: str
    uses: tuple = ()           # names of the sites it reads
    setup: str = ""            # a line computed inside the plate it combines (`lw = ...`)
    bound_over: str = ""       # a logmeanexp over this plate
    bound_log_prob: tuple = ()  # sites whose q.log_prob is in the bound's log-weights
    code: str = ""             # a likelihood term's statement (an obs= site, scg.factor)


@dataclass
class Plate:
    name: str
    size: int
    dim: int
    subsample: int = 0         # 0: every element; else the subsample size
    data: tuple = ()

    @property
    def size_in_reference(self):
        return self.subsample or self.size


@dataclass
class Model:
    theta: tuple
    sites: list = field(default_factory=list)
    costs: list = field(default_factory=list)
    plates: list = field(default_factory=list)
    returns: bool = False      # the last cost of region "after" is the return value
    seed: int = 0
    refusal: str = ""          # a pattern scg must refuse (scg.EstimatorError), if any:
                               # "cost" or "drawn" downstream of a marginalized site

    # ---------------------------------------------------------------- structure
    def site(self, name):
        return next(s for s in self.sites if s.name == name)

    def plate(self, name):
        return next((p for p in self.plates if p.name == name), None)

    def continuous_scalars(self):
        return sum(s.elements(self.plates) * max(s.steps, 1) for s in self.sites
                   if not s.discrete)

    def nodes(self):
        return NODES[self.continuous_scalars()]

    def states(self):
        total = self.nodes() ** self.continuous_scalars()
        for s in self.sites:
            if s.discrete:
                total *= grid_size(s) ** (s.elements(self.plates) * max(s.steps, 1))
        return total

    def cost_kinds(self):
        return {c.kind for c in self.costs} | {s.step_cost_kind for s in self.sites
                                                if s.steps}

    def choices(self):
        return [est.BY_KEY[s.estimator] for s in self.sites]

    @property
    def unbiased(self):
        return all(c.unbiased for c in self.choices())

    @property
    def second_order(self):
        return all(c.second_order for c in self.choices())

    @property
    def exact(self):
        return all(c.exact for c in self.choices())

    @property
    def marginal(self):
        return any(s.marginal for s in self.sites)

    @property
    def subsampled(self):
        return any(p.subsample for p in self.plates)

    @property
    def episodes(self):
        return any(s.episode for s in self.sites)

    def site_names(self):
        """Every name scg.sample is given (a loop's sites are name_0, name_1, ...)."""
        out = []
        for s in self.sites:
            out += [f"{s.name}_{t}" for t in range(s.steps)] if s.steps else [s.name]
        return out

    # ---------------------------------------------------------------- code
    def to_code(self):
        lines = ["def model(theta):"]

        def emit(region, indent):
            pad = "    " * indent
            for item in self._items(region):
                if isinstance(item, Site):
                    lines.extend(pad + line for line in self._site_code(item))
                elif item.setup and region != item.region:
                    lines.append(pad + item.setup)
                else:
                    lines.append(pad + self._cost_code(item))

        emit("top", 1)
        p, q = self.plate("p"), self.plate("q")
        if p is not None:
            args = [repr(p.name), str(p.size)]
            if p.dim != -1:
                args.append(f"dim={p.dim}")
            if p.subsample:
                args.append(f"subsample_size={p.subsample}")
            lines.append(f"    with scg.plate({', '.join(args)}) as idx:")
            data = arr(p.data) + "[idx]" + ("[:, None]" if q is not None else "")
            lines.append(f"        dp = {data}")
            emit("p", 2)
            if q is not None:
                lines.append(f"        with scg.plate({q.name!r}, {q.size}):")
                lines.append(f"            dq = {arr(q.data)}")
                emit("pq", 3)
            emit("p_after", 2)
        emit("after", 1)
        if self.returns:
            last = lines.pop()
            assert last.startswith("    scg.cost(")
            expr = last[len("    scg.cost("):-1].split(", ", 1)[1]
            lines.append(f"    return {expr}")
        return "\n".join(lines) + "\n"

    def _items(self, region):
        """Sites and costs of a region in order, and the setup lines of bounds computed
        inside it for a region outside."""
        items = []
        for kind, obj in self._order:
            if kind == "site" and obj.scope == region:
                items.append(obj)
            elif kind == "cost":
                if obj.region == region:
                    items.append(obj)
                elif obj.setup and _inner_region(obj) == region:
                    items.append(obj)
        return items

    @property
    def _order(self):
        return [("site", s) for s in self.sites] + [("cost", c) for c in self.costs]

    def _site_code(self, s):
        est_code = s.estimator_code()
        if s.marginal and s.steps:
            init = "0" if s.family.startswith("Categorical") else "0.0"
            return [f"{s.name} = {init}",
                    f"for t in scg.markov(range({s.steps})):",
                    f"    q_{s.name} = {s.dist}",
                    f"    {s.name} = scg.sample(f\"{s.name}_{{t}}\", q_{s.name}, "
                    f"estimator={est_code})",
                    f"    {s.step_cost}"]
        if not s.steps:
            return [f"q_{s.name} = {s.dist}",
                    f"{s.name} = scg.sample({s.name!r}, q_{s.name}, estimator={est_code})"]
        init = "0" if s.family.startswith("Categorical") else "0.0"
        if s.episode:  # (a draw of 0 ends the draw's episode; the loop, once all ended)
            return [f"{s.name} = {init}",
                    f"alive_{s.name} = True",
                    f"for t in range({s.steps}):",
                    f"    with scg.mask(alive_{s.name}):",
                    f"        q_{s.name} = {s.dist}",
                    f"        {s.name} = scg.sample(f\"{s.name}_{{t}}\", q_{s.name}, "
                    f"estimator={est_code})",
                    f"        scg.cost(f\"{s.name}_cost_{{t}}\", {s.step_cost})",
                    f"    alive_{s.name} = alive_{s.name} & ({s.name} > 0.5)",
                    f"    if scg.all(~alive_{s.name}):",
                    "        break"]
        return [f"{s.name} = {init}",
                f"for t in range({s.steps}):",
                f"    q_{s.name} = {s.dist}",
                f"    {s.name} = scg.sample(f\"{s.name}_{{t}}\", q_{s.name}, "
                f"estimator={est_code})",
                f"    scg.cost(f\"{s.name}_cost_{{t}}\", {s.step_cost})"]

    def _cost_code(self, c):
        return c.code or f"scg.cost({c.name!r}, {c.expr})"

    def __repr__(self):
        return (f"# theta = np.array({list(self.theta)}); seed = {self.seed}; "
                + (f"refused: {self.refusal}; " if self.refusal else "") + "estimators: "
                + ", ".join(f"{s.name}: {s.estimator}" for s in self.sites) + "\n"
                + self.to_code())

    def _repr_pretty_(self, printer, cycle):
        # (hypothesis prints a failing example with this: the model as code)
        printer.text("\n" + repr(self))


def _inner_region(cost):
    return {"p": "p", "q": "pq"}[cost.bound_over] if cost.bound_over else ""


def grid_size(site):
    if site.family.startswith("Bernoulli"):
        return 2
    if site.family == "Poisson":
        return POISSON_SUPPORT
    if site.family == "Binomial":
        return site.K + 1  # (K: the total count)
    return site.K


# ------------------------------------------------------------------- the strategy
class _Builder:
    def __init__(self, draw, model):
        self.draw = draw
        self.m = model
        self.d = len(model.theta)
        self.counter = 0

    def rare(self, n):
        """True about once in n draws (hypothesis draws small integers more often)."""
        return self.draw(st.integers(0, n - 1)) == 0

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def theta(self):
        return f"theta[{self.draw(st.integers(0, self.d - 1))}]"

    def available(self, scope, marginal=False):
        """Sites whose values broadcast into `scope` (their plates a prefix of its): the
        drawn ones (or the marginalized ones)."""
        allowed = {"top": ("top",), "p": ("top", "p"), "pq": ("top", "p", "pq")}[scope]
        # (an episode's draw after its loop is the last step's, drawn masked where the
        # episode had ended, and which step that is depends on every draw's episode:
        # nothing after the loop reads it)
        return [s for s in self.m.sites if s.scope in allowed and s.marginal == marginal
                and not s.episode]

    def feature(self, s):
        """A real-valued function of a site's draw, in the site's shape."""
        if s.family.startswith("OneHot"):
            return f'np.einsum("...i,i->...", {s.name}, {arr(FEATURES[s.K])})'
        if s.family == "Poisson":
            return f"(0.25 * {s.name})"
        if s.family == "Gamma":
            return f"(0.3 * {s.name})"
        if s.family.startswith("Categorical"):
            return f"(0.5 * {s.name})"
        return s.name

    def affine(self, scope, continuous_refs=True, loop_name=None):
        """const + coef theta[j] + data + weighted features of earlier draws."""
        draw = self.draw
        expr = repr(draw(st.sampled_from(CONSTS)))
        expr += term(draw(st.sampled_from(COEFS)), self.theta())
        if scope in ("p", "pq"):
            expr += " + dp"
        if scope == "pq":
            expr += " + dq"
        refs = []
        avail = [s for s in self.available(scope)
                 if continuous_refs or s.discrete]
        if avail:
            for _ in range(draw(st.integers(0, min(2, len(avail))))):
                s = draw(st.sampled_from(avail))
                if s.name not in refs:
                    refs.append(s.name)
                    expr += term(draw(st.sampled_from(WEIGHTS)), self.feature(s))
        if loop_name is not None:
            expr += term(draw(st.sampled_from(WEIGHTS)), loop_name)
        return expr, tuple(refs)

    def site(self, scope, loop=False, episode=False):
        draw, m = self.draw, self.m
        name = self.fresh("x")
        elements = math.prod(p.size_in_reference for p in m.plates
                             if p.name in {"top": (), "p": ("p",), "pq": ("p", "q")}[scope])
        steps = draw(st.integers(2, 3)) if loop else 0
        count = elements * max(steps, 1)
        families = [f for f in FAMILY_ORDER if not loop or f in (
            "Bernoulli-logits", "Normal", "Poisson", "Categorical-logits")]
        if episode:  # (a draw of 0 ends an episode)
            families = ["Bernoulli-logits"]
        ok = []
        for f in families:
            K = 3
            probe = Site(name, f, scope, "", K=K, steps=steps)
            m.sites.append(probe)
            fits = (m.continuous_scalars() <= MAX_CONTINUOUS and m.states() <= MAX_STATES)
            m.sites.pop()
            if fits:
                ok.append(f)
        if not ok:
            return None
        family = draw(st.sampled_from(ok))
        K = draw(st.sampled_from((3, 2, 4))) if family.startswith(("Categorical", "OneHot")) \
            else 0
        probe = Site(name, family, scope, "", K=K, steps=steps)
        m.sites.append(probe)
        if m.states() > MAX_STATES:
            K = 2
        m.sites.pop()
        loop_name = name if loop else None
        if family.startswith("Bernoulli"):
            a, refs = self.affine(scope, loop_name=loop_name)
            dist = (f"scg.Bernoulli(logits={a})" if family.endswith("logits")
                    else f"scg.Bernoulli(probs=scg.sigmoid({a}))")
        elif family.startswith(("Categorical", "OneHot")):
            a, refs = self.affine(scope, loop_name=loop_name)
            logits = f"({a})[..., None] * {arr(LOGIT_SLOPES[K])} + {arr(LOGIT_OFFSETS[K])}"
            cls = "Categorical" if family.startswith("Categorical") else "OneHotCategorical"
            dist = (f"scg.{cls}(logits={logits})" if family.endswith("logits")
                    else f"scg.{cls}(probs=scg.softmax({logits}, axis=-1))")
        elif family == "Normal":
            loc, r1 = self.affine(scope, loop_name=loop_name)
            scale, r2 = self.affine(scope, continuous_refs=False)
            refs = tuple(dict.fromkeys(r1 + r2))
            dist = f"scg.Normal({loc}, np.exp(0.5 * ({scale})))"
        elif family == "Gamma":
            rate, refs = self.affine(scope, continuous_refs=False)
            conc = draw(st.sampled_from(("2.0", "1.5", "theta")))
            if conc == "theta":
                conc = f"1.0 + np.exp(0.3 * {self.theta()})"
            dist = f"scg.Gamma({conc}, np.exp(0.5 * ({rate})))"
        else:  # Poisson
            a, refs = self.affine(scope, loop_name=loop_name)
            dist = f"scg.Poisson(2.0 * scg.sigmoid({a}))"
        s = Site(name, family, scope, dist, K=K, steps=steps, refs=refs, episode=episode)
        if loop:
            s.step_cost, _, s.step_cost_kind = self.simple_cost([s])
        m.sites.append(s)
        return s

    def simple_cost(self, sites):
        """A per-element cost of some of `sites`: (expr, names used, kind)."""
        draw = self.draw
        s = draw(st.sampled_from(sites))
        others = [o for o in sites if o is not s]
        other = draw(st.sampled_from(others)) if others and draw(st.booleans()) else None
        second = self.feature(other) if other is not None else self.theta()
        uses = (s.name,) + ((other.name,) if other is not None else ())
        kinds = ["square", "product"]
        if s.family.startswith("Bernoulli") or s.family.startswith("Categorical") or \
                s.family == "Poisson":
            kinds.append("where")
        if s.family.startswith("Categorical"):
            kinds += ["take", "table"]
        if s.family.startswith("OneHot"):
            kinds += ["einsum", "einsum_theta"]
        kind = draw(st.sampled_from(kinds))
        f = self.feature(s)
        c = draw(st.sampled_from(CONSTS))
        w = draw(st.sampled_from(WEIGHTS))
        if kind == "square":
            shift = "" if not c else (f" - {c!r}" if c > 0 else f" + {-c!r}")
            expr = f"{w!r} * ({f}{shift}) ** 2"
            if other is not None:
                expr += term(1, f"{f} * {second}")
        elif kind == "product":
            expr = f"{f} * {second}"
        elif kind == "where":
            thr = {"Poisson": draw(st.sampled_from((1, 0, 2)))}.get(s.family, None)
            if thr is None:
                thr = 0.5 if s.family.startswith("Bernoulli") else draw(st.sampled_from((0, 1)))
            expr = f"np.where({s.name} > {thr!r}, {second}, {w!r} * {self.theta()})"
        elif kind == "take":
            expr = f"scg.take({arr(TABLES[s.K])}, {s.name}, axis=0) * {second}"
        elif kind == "table":
            expr = f"({self.theta()} * {arr(TABLES[s.K])})[{s.name}] ** 2"
            uses = (s.name,)
        elif kind == "einsum":
            expr = f'np.einsum("...i,i->...", {s.name}, {arr(TABLES[s.K])}) * {second}'
        else:
            expr = (f'np.einsum("...i,...i->...", {s.name}, '
                    f'{self.theta()} * {arr(TABLES[s.K])}) ** 2')
            uses = (s.name,)
        return expr, uses, kind

    def costs(self, region, scope):
        avail = self.available(scope)
        if not avail:
            return
        for _ in range(self.draw(st.integers(1 if scope == "top" else 0, 2))):
            expr, uses, kind = self.simple_cost(avail)
            self.m.costs.append(Cost(self.fresh("c"), region, expr, kind, uses))

    def combining_cost(self, plate, inner_scope, region):
        """A cost outside `plate` of values inside it: a logmeanexp or a sum over it."""
        draw, m = self.draw, self.m
        inside = [s for s in m.sites if s.scope == inner_scope and not s.marginal]
        if not inside:
            return
        kinds = ["lme", "lme_iwae"]
        if plate.dim == -1 and not plate.subsample:
            kinds.append("sum")
        if plate.subsample:  # (a logmeanexp of a minibatch is not an unbiased estimate)
            return
        kind = draw(st.sampled_from(kinds))
        s = draw(st.sampled_from(inside))
        normals = [o for o in inside if o.family == "Normal"]
        if kind == "lme_iwae" and normals:
            s = draw(st.sampled_from(normals))  # (a reparameterized proposal, as for DReG)
        name = self.fresh("c")
        lw = f"lw_{name}"
        body = self.feature(s)
        extra = draw(st.sampled_from([o for o in self.available(inner_scope) if o is not s]
                                     + [None]))
        uses = (s.name,)
        if extra is not None:
            body += term(draw(st.sampled_from(WEIGHTS)), self.feature(extra))
            uses += (extra.name,)
        body += term(draw(st.sampled_from(COEFS)), self.theta())
        if kind == "sum":
            c = Cost(name, region, f"np.sum({body}, axis=-1) ** 2", "plate_sum", uses)
        elif kind == "lme":
            c = Cost(name, region, f"-scg.logmeanexp({lw}, plate={plate.name!r})", kind, uses,
                     setup=f"{lw} = {body}", bound_over=plate.name)
        else:
            c = Cost(name, region, f"-scg.logmeanexp({lw}, plate={plate.name!r})", kind, uses,
                     setup=f"{lw} = {body} - q_{s.name}.log_prob({s.name})",
                     bound_over=plate.name, bound_log_prob=(s.name,))
        m.costs.append(c)

    def estimators(self):
        m = self.m
        # (now and then every site by an exact sum, where each can be)
        exact = self.rare(8)
        # (now and then combinations that scg documents as unsupported: they must raise
        # scg.EstimatorError naming a site; otherwise they are avoided)
        unsupported = self.rare(4)
        copying = exclusive = False
        for s in m.sites:
            if s.marginal:
                s.estimator = "marginalize"
                continue
            bounds = [c for c in m.costs if c.bound_over and s.name in c.uses
                      and s.scope in ({"p": ("p",), "q": ("pq",)}[c.bound_over])]
            combined = any(c.bound_over or c.kind == "plate_sum" for c in m.costs
                           if s.name in c.uses)
            # (the cost "marginal" sums the elements of a plate: it mixes them)
            combined = combined or (m.marginal and s.scope != "top")
            options = []
            for ch in est.CHOICES:
                if s.family not in ch.families:
                    continue
                if ch.needs == "bound" and not bounds:
                    continue
                if ch.needs == "bound_log_prob" and not any(s.name in c.bound_log_prob
                                                            for c in bounds):
                    continue
                if s.steps and ch.needs:
                    continue
                if s.episode and ch.key not in MASKED:
                    continue
                if ch.key == "unordered_set" and s.K < 2:
                    continue
                if not unsupported and _unsupported(ch.key, s, copying, exclusive, combined):
                    continue
                options.append(ch.key)
            # (the estimators of a multi-sample bound, where there is one, half the time)
            special = [o for o in options if est.BY_KEY[o].needs]
            if special and self.draw(st.booleans()):
                options = special
            if exact and any(est.BY_KEY[o].exact for o in options):
                options = [o for o in options if est.BY_KEY[o].exact]
            # (knowingly biased estimators now and then: they are checked for saying so)
            biased = [o for o in options if not est.BY_KEY[o].unbiased]
            unbiased = [o for o in options if est.BY_KEY[o].unbiased]
            if biased and self.rare(25):
                options = biased
            else:
                options = unbiased
            s.estimator = self.draw(st.sampled_from(options))
            copying = copying or s.estimator in COPYING or bool(s.steps and s.estimator
                                                                 in EXCLUSIVE)
            exclusive = exclusive or s.estimator in EXCLUSIVE


# estimators of the sites inside scg.mask (those that declare `serves_masks`)
MASKED = {"auto", "score", "score_loo", "score_moving_average", "score_constant"}

# estimators that evaluate copies of the run, and those that serve no model where
# another site's estimator does (scg.EstimatorError)
COPYING = {"measure_valued", "measure_valued_uncoupled", "disarm", "rebar",
           "rebar_hot_small_scale", "rebar_learning", "relax", "unordered_set",
           "unordered_set_all", "enumerate", "score_antithetic", "score_loo_antithetic",
           "pathwise_antithetic"}
EXCLUSIVE = {"rebar", "rebar_hot_small_scale", "rebar_learning", "relax", "unordered_set",
             "unordered_set_all", "vimco"}


def _unsupported(key, site, copying, exclusive, combined):
    """Would this choice meet a limitation scg documents (scg.EstimatorError)?"""
    if key in EXCLUSIVE and (copying or exclusive or site.steps):
        return True
    if exclusive and key in COPYING:
        return True
    if key.startswith("measure_valued") and site.dist.startswith("scg.Gamma(1.0 + np.exp"):
        return True  # (a Gamma concentration that depends on theta)
    if combined and key.startswith(("measure_valued", "unordered_set", "enumerate")) and \
            site.scope != "top":
        return True  # (a cost that mixes the elements of the site's plate)
    return False


@st.composite
def models(draw, max_top=3):
    d = draw(st.integers(1, 3))
    theta = tuple(draw(st.sampled_from(THETA_VALUES)) for _ in range(d))
    m = Model(theta=theta, seed=draw(st.integers(0, 2 ** 16)))
    b = _Builder(draw, m)
    for _ in range(draw(st.integers(1, max_top))):
        kind = draw(st.integers(0, 5))
        b.site("top", loop=kind >= 4, episode=kind == 5)
    b.costs("top", "top")
    layout = draw(st.sampled_from(("none", "plate", "nested", "plate", "nested")))
    if layout != "none":
        nested = layout == "nested"
        size = draw(st.integers(2, 3))
        sub = draw(st.sampled_from((0, 0, size - 1)))
        p = Plate("p", size, -2 if nested else -1, subsample=sub,
                  data=DATA[:size])
        m.plates.append(p)
        if nested:
            qsize = draw(st.integers(2, 3))
            m.plates.append(Plate("q", qsize, -1, data=DATA[1:1 + qsize][::-1]))
        for _ in range(draw(st.integers(1, 2))):
            b.site("p")
        if not any(s.scope == "p" for s in m.sites):
            m.plates.clear()
        else:
            b.costs("p", "p")
            if nested:
                for _ in range(draw(st.integers(1, 2))):
                    b.site("pq")
                if any(s.scope == "pq" for s in m.sites):
                    b.costs("pq", "pq")
                    if draw(st.booleans()):
                        b.combining_cost(m.plate("q"), "pq", "p_after")
                else:
                    m.plates.pop()
                    p.dim = -1
            if draw(st.integers(0, 2)) > 0:
                b.combining_cost(p, "p", "after")
    if not m.costs:
        b.costs("top", "top")
    after = [c for c in m.costs if c.region == "after"]
    m.returns = bool(after) and m.costs[-1] is after[-1] and draw(st.booleans())
    b.estimators()
    return m


# ------------------------------------------------------------ sites summed out
# Models with sites summed out of the likelihood (scg.Marginalize()): drawn sites first
# (their estimators drawn as above), then marginalized sites whose parameters may read
# drawn sites and earlier marginalized ones (chains), then the log-likelihood terms that
# read them (`obs=` Normal and Bernoulli sites, `scg.factor`), per element inside a plate;
# a scg.markov loop now and then. A marginalized value carries dims of its own on the
# left under scg, so what reads it broadcasts: elementwise arithmetic, np.where, a
# theta-dependent table indexed by a Categorical value, `z @ vector` for a one-hot value.
# Now and then the model breaks the contract (a cost, or a drawn site's parameters, that
# read a marginalized site): scg must refuse it with scg.EstimatorError.
MARGINAL_FAMILIES = ("Bernoulli-logits", "Categorical-logits", "OneHot-logits",
                     "Bernoulli-probs", "Categorical-probs", "OneHot-probs", "Binomial")
OBS_VALUES = (0.4, -0.8, 1.3, 0.1)
# (a one-hot value @ a matrix: the probabilities of an observed Categorical, 3 categories)
EMISSIONS = ((1.0, -0.5, 0.3), (-0.4, 0.8, 0.0), (0.2, 0.5, -1.0), (0.0, -0.3, 0.9))
SCALES = ("1.0", "0.7", "1.3")


class _MarginalBuilder(_Builder):
    # (the marginal likelihood is not a polynomial in a continuous draw: the reference's
    # quadrature is accurate enough for second derivatives with one continuous scalar,
    # 24 nodes, so marginalized sites and terms read a Normal or Gamma draw only then)
    continuous_refs = True

    def rare(self, n):
        return self.draw(st.integers(0, n - 1)) == n - 1

    def value_feature(self, s):
        """A real function of a marginalized value that broadcasts over its dims."""
        draw = self.draw
        if s.family.startswith("OneHot"):
            return f"({s.name} @ {arr(FEATURES[s.K])})"
        if s.family == "Binomial":
            return draw(st.sampled_from((
                f"(0.5 * {s.name})", f"np.where({s.name} > 1, {self.theta()}, "
                                     f"{draw(st.sampled_from(CONSTS))!r})")))
        if s.family.startswith("Categorical"):
            return draw(st.sampled_from((
                f"(0.5 * {s.name})",
                f"({self.theta()} * {arr(TABLES[s.K])})[{s.name}]",
                f"np.where({s.name} > {draw(st.sampled_from((0, 1)))}, {self.theta()}, "
                f"{draw(st.sampled_from(CONSTS))!r})")))
        return draw(st.sampled_from((
            s.name, f"np.where({s.name} > 0.5, {self.theta()}, "
                    f"{draw(st.sampled_from(CONSTS))!r})")))

    def reads(self, scope, most=2):
        """Up to `most` marginalized sites of `scope` and around it, the latest likelier."""
        avail = self.available(scope, marginal=True)
        if not avail:
            return []
        out = []
        for _ in range(self.draw(st.integers(1, min(most, len(avail))))):
            s = self.draw(st.sampled_from(avail[::-1]))
            if s not in out:
                out.append(s)
        return out

    def with_values(self, expr, sites):
        for s in sites:
            expr += term(self.draw(st.sampled_from(WEIGHTS)), self.value_feature(s))
        return expr

    def marginal_site(self, scope, loop=False):
        draw, m = self.draw, self.m
        name = self.fresh("z")
        steps = draw(st.integers(2, 3)) if loop else 0
        families = [f for f in MARGINAL_FAMILIES
                    if not loop or f in ("Bernoulli-logits", "Categorical-logits")]
        family = draw(st.sampled_from(families))
        K = draw(st.sampled_from((3, 2, 4))) if family.startswith(("Categorical", "OneHot")) \
            else draw(st.sampled_from((2, 3))) if family == "Binomial" else 0
        for k in dict.fromkeys((K, 2)):
            m.sites.append(Site(name, family, scope, "", K=k, steps=steps, marginal=True))
            fits = m.states() <= MAX_STATES
            m.sites.pop()
            if fits:
                K = k
                break
        else:
            return None
        a, refs = self.affine(scope, continuous_refs=self.continuous_refs,
                              loop_name=name if loop else None)
        parents = self.reads(scope) if draw(st.integers(0, 2)) > 0 else []
        a = self.with_values(a, parents)
        if family.startswith("Bernoulli"):
            dist = (f"scg.Bernoulli(logits={a})" if family.endswith("logits")
                    else f"scg.Bernoulli(probs=scg.sigmoid({a}))")
        elif family == "Binomial":
            dist = f"scg.Binomial({K}, scg.sigmoid({a}))"
        else:
            logits = f"({a})[..., None] * {arr(LOGIT_SLOPES[K])} + {arr(LOGIT_OFFSETS[K])}"
            cls = "Categorical" if family.startswith("Categorical") else "OneHotCategorical"
            dist = (f"scg.{cls}(logits={logits})" if family.endswith("logits")
                    else f"scg.{cls}(probs=scg.softmax({logits}, axis=-1))")
        s = Site(name, family, scope, dist, K=K, steps=steps, marginal=True,
                 refs=refs + tuple(p.name for p in parents), estimator="marginalize")
        m.sites.append(s)
        if loop:  # (a term per step, of this step's value)
            s.step_cost, s.step_cost_kind = self.term_code(scope, [s], step=s)
        return s

    def data(self, scope):
        return {"top": "", "p": " + dp", "pq": " + dp + dq"}[scope]

    def term_code(self, scope, sites, step=None):
        """A log-likelihood term of `sites` (per element inside a plate: it reads the
        plate's data): (statement, kind)."""
        draw = self.draw
        name = self.fresh("o")
        if step is not None:
            name = f'f"{step.name}_{name}_{{t}}"'
            obs_const = f"{arr(OBS_VALUES[:step.steps])}[t]"
        else:
            name = repr(name)
            obs_const = repr(draw(st.sampled_from(OBS_VALUES)))
        # (drawn sites too, through the affine part)
        a, _ = self.affine(scope, continuous_refs=self.continuous_refs) if step is None else (
            repr(draw(st.sampled_from(CONSTS))) + self.data(scope), ())
        a = self.with_values(a, sites)
        kinds = ["obs_normal", "obs_normal", "obs_bernoulli", "factor"]
        if sites[0].family.startswith("OneHot"):
            kinds += ["obs_categorical"] * 3
        kind = draw(st.sampled_from(kinds))
        if kind == "obs_categorical":
            z = sites[0]
            matrix = "np.array([" + ", ".join(arr(row)[9:-1] for row in EMISSIONS[:z.K]) + "])"
            probs = f"{z.name} @ scg.softmax({self.theta()} * {matrix}, axis=-1)"
            obs = {"top": draw(st.sampled_from(("0", "2"))), "p": "1.0 * (dp > 0)",
                   "pq": "2.0 * (dp + dq > 0)"}[scope]
            code = f"scg.sample({name}, scg.Categorical(probs={probs}), obs={obs})"
        elif kind == "obs_normal":
            scale = draw(st.sampled_from(SCALES + ("theta",)))
            if scale == "theta":
                scale = f"np.exp(0.3 * {self.theta()})"
            code = (f"scg.sample({name}, scg.Normal({a}, {scale}), "
                    f"obs={obs_const}{self.data(scope)})")
        elif kind == "obs_bernoulli":
            obs = {"top": draw(st.sampled_from(("1.0", "0.0"))), "p": "1.0 * (dp > 0)",
                   "pq": "1.0 * (dp + dq > 0)"}[scope]
            if step is not None and scope == "top":
                obs = f"{arr([1.0, 0.0, 1.0][:step.steps])}[t]"
            code = f"scg.sample({name}, scg.Bernoulli(logits={a}), obs={obs})"
        else:
            w = draw(st.sampled_from((0.5, 1.0, 0.3)))
            code = f"scg.factor({name}, -{w!r} * ({a} - {obs_const}) ** 2)"
        return code, kind

    def terms(self, scope, region):
        """Likelihood terms in `scope`: one for most marginalized sites there with no
        term yet, now and then one of the sites around it."""
        m = self.m
        here = [s for s in m.sites if s.marginal and s.scope == scope and not s.steps]
        for s in here:
            if self.draw(st.integers(0, 5)) == 5:
                continue  # (a site with no term: its sum is 1)
            sites = [s] + [o for o in self.reads(scope, most=1) if o is not s]
            code, kind = self.term_code(scope, sites)
            m.costs.append(Cost(code.split("(", 2)[1].split(",")[0].strip("'\""), region,
                                "", kind, code=code))
        if self.available(scope, marginal=True) and self.draw(st.integers(0, 2)) == 2:
            code, kind = self.term_code(scope, self.reads(scope))
            m.costs.append(Cost(code.split("(", 2)[1].split(",")[0].strip("'\""), region,
                                "", kind, code=code))

    def refused(self):
        """A cost, or a drawn site's parameters, that read a marginalized site."""
        m, draw = self.m, self.draw
        targets = [s for s in m.sites if s.marginal and not s.steps]
        if not targets:
            return
        s = draw(st.sampled_from(targets))
        f = self.value_feature(s)
        if draw(st.booleans()):
            m.refusal = "cost"
            m.costs.append(Cost(self.fresh("c"), s.scope, f"{f} * {self.theta()}", "refused",
                                (s.name,)))
        else:
            m.refusal = "drawn"
            y = Site(self.fresh("y"), "Normal", s.scope,
                     f"scg.Normal({f} + {self.theta()}{self.data(s.scope)}, 1.0)",
                     refs=(s.name,))
            m.sites.append(y)
            m.costs.append(Cost(self.fresh("c"), s.scope, f"{y.name} ** 2", "square",
                                (y.name,)))


@st.composite
def marginal_models(draw):
    d = draw(st.integers(1, 3))
    theta = tuple(draw(st.sampled_from(THETA_VALUES)) for _ in range(d))
    m = Model(theta=theta, seed=draw(st.integers(0, 2 ** 16)))
    b = _MarginalBuilder(draw, m)
    layout = draw(st.sampled_from(("none", "plate", "nested", "plate")))
    nested = layout == "nested"
    # the plates, then the drawn sites (upstream of every marginalized one), then the
    # marginalized sites, their terms and the costs region by region
    scopes = ["top"]
    if layout != "none":
        # (nested plates of two elements each: room on the reference's grid for a site
        # per element of both)
        size = 2 if nested else draw(st.integers(2, 3))
        sub = draw(st.sampled_from((0, 0, size - 1)))
        m.plates.append(Plate("p", size, -2 if nested else -1, subsample=sub,
                              data=DATA[:size]))
        scopes.append("p")
        if nested:
            m.plates.append(Plate("q", 2, -1, data=DATA[1:3][::-1]))
            scopes.append("pq")
    for scope in scopes:
        for _ in range(draw(st.integers(0, 2 if scope == "top" else 1))):
            b.site(scope)
    b.continuous_refs = m.continuous_scalars() <= 1
    # (fewer global sites beside nested plates: room for the elements' own sites)
    for _ in range(draw(st.integers(1 if layout == "none" else 0, 1 if nested else 3))):
        b.marginal_site("top")
    if not nested and draw(st.integers(0, 3)) == 3:
        b.marginal_site("top", loop=True)
    b.terms("top", "top")
    b.costs("top", "top")
    if "p" in scopes:
        for _ in range(draw(st.integers(1 if not nested else 0, 2 if not nested else 1))):
            b.marginal_site("p")
        if not nested and draw(st.integers(0, 3)) == 3:
            b.marginal_site("p", loop=True)
        b.terms("p", "p")
        b.costs("p", "p")
    if "pq" in scopes:
        for _ in range(draw(st.integers(1, 2))):
            b.marginal_site("pq")
        b.terms("pq", "pq")
        b.costs("pq", "pq")
    if "p" in scopes and draw(st.integers(0, 3)) == 3:
        b.combining_cost(m.plate("p"), "p", "after")
    if draw(st.integers(0, 5)) == 5:
        b.refused()
    if not m.costs and not any(s.steps for s in m.sites):
        # (a model needs a cost: one of the drawn sites of the outermost scope that has
        # one; with no site at all, the gradient is rightly refused, which is no test)
        for scope in scopes:
            avail = b.available(scope)
            if avail:
                expr, uses, kind = b.simple_cost(avail)
                m.costs.append(Cost(b.fresh("c"), scope, expr, kind, uses))
                break
    after = [c for c in m.costs if c.region == "after"]
    m.returns = bool(after) and m.costs[-1] is after[-1] and draw(st.booleans())
    b.estimators()
    return m
