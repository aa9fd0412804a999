"""The contract, guards on what ran: the closure cells, defaults, attributes and globals
that the code that ran names, and the modules it imports.

One table: each row is state outside the function's arguments that the function (or code
it calls: methods, properties, dunder methods, helpers, metaclasses) reads, and a change of
that state. Every row is checked by `stale.check_row`: the change is real, the jitted calls
give the numbers of fresh calls before and after it, and the replays went on (a guard saw
the change; it was not avoided by running afresh). Atoms that compare equal but compute
differently (0.0 and -0.0, 1, 1.0 and True, NaNs of either sign) count as changed; an
array whose dtype is reassigned in place counts as changed. The tests after the table
check a guard's other effects (arrays left writeable, scg's own objects, library classes
that still replay).
"""

import collections
import dataclasses
import enum
import functools
import math
import sys
import types

import numpy as np

import pytest

import scg

from .compare import assert_same, pair, same_values as same
from .models import shifted_square
from .stale import Row, check_row

# ---------------------------------------------------------------- module-level state
GLOBAL_SCALE = 2.0
GLOBAL_CONFIG = {"power": 2.0}
GLOBAL_DATA = np.array([1.0, -2.0, 0.5])
_SOURCE = {"value": 1.0}  # (read by the methods of the classes below)


def _reset_globals():
    global GLOBAL_SCALE
    GLOBAL_SCALE = 2.0
    GLOBAL_CONFIG["power"] = 2.0
    GLOBAL_DATA[:] = [1.0, -2.0, 0.5]
    _SOURCE["value"] = 1.0
    _Settings.scale = 2.0
    _Many.scale = 2.0


def _global_rebound():
    _reset_globals()

    def change():
        global GLOBAL_SCALE
        GLOBAL_SCALE = 3.0
    return (lambda: GLOBAL_SCALE), change


def _global_container_in_place():
    _reset_globals()
    return (lambda: np.sum(2.0 ** GLOBAL_CONFIG["power"])), \
        lambda: GLOBAL_CONFIG.__setitem__("power", 3.0)


def _global_array_in_place():
    _reset_globals()
    return (lambda: np.sum(GLOBAL_DATA)), lambda: GLOBAL_DATA.__setitem__(1, 4.0)


class _Settings:
    scale = 2.0


class _Many:
    scale = 2.0

    def get(self):
        return self.scale


for _k in range(300):
    setattr(_Many, f"m{_k}", lambda self, _k=_k: float(_k))


class _Lookup(dict):
    def __getitem__(self, key):
        return _SOURCE["value"]


class _Settable(dict):
    def get(self, key, default=None):
        return _SOURCE["value"]


class _Sequence(list):
    def __getitem__(self, i):
        return _SOURCE["value"]


class _Box:
    def __getitem__(self, k):
        return _SOURCE["value"] * k


class _Gain:
    def gain(self):
        return 1.0


class _OtherGain:
    def gain(self):
        return 3.0


class _ScaledArray(np.ndarray):
    """An array class of the user's with a setting of its own."""
    scale = 1.0


class _Pair(collections.namedtuple("_PairBase", "a b")):
    """The common "namedtuple with methods" pattern."""

    @property
    def target(self):
        return self.a[0] * _SOURCE["value"]


class _Tags(set):
    pass


class _Bound(functools.partial):
    pass


class _HoldsSettings:
    def __init__(self, cfg):
        self.cfg = cfg

    def scale(self):
        return self.cfg.SCALE


_MODULE = "scg_test_guards_cfg"


def _new_module(name=_MODULE, **values):
    cfg = types.ModuleType(name)
    for k, v in values.items():
        setattr(cfg, k, v)
    sys.modules[name] = cfg
    return cfg


def _drop_module():
    sys.modules.pop(_MODULE, None)
    sys.modules.pop("scg_test_pkg", None)


def _import_inside():
    import scg_test_guards_cfg as cfg
    return cfg.SCALE


def _from_import_inside():
    from scg_test_guards_cfg import SCALE
    return SCALE


def _setter(obj, name, value):
    return lambda: setattr(obj, name, value)


# ---------------------------------------------------------------- the rows
def _closures():
    def rebound_with_nonlocal():
        scale = 2.0

        def change():
            nonlocal scale
            scale = 3.0
        return (lambda: scale), change

    def array_in_place():
        data = np.array([1.0, 2.0, 3.0])
        return (lambda: np.sum(data ** 2)), lambda: data.__setitem__(0, 5.0)

    def dict_in_place():
        state = {"scale": 1.0}
        return (lambda: state["scale"]), lambda: state.__setitem__("scale", 3.0)

    def default_argument_container():
        def read(d={"s": 2.0}):
            return d["s"]
        return read, lambda: read.__defaults__[0].__setitem__("s", 3.0)

    def namedtuple_array_in_place():
        nt = collections.namedtuple("NT", "a")(np.array([2.0, 2.0]))
        return (lambda: nt.a[0]), lambda: nt.a.__setitem__(0, 3.0)

    def long_list():
        values = [2.0] * 2000
        return (lambda: values[1500]), lambda: values.__setitem__(1500, 3.0)

    def ordered_dict():
        d = collections.OrderedDict(s=2.0)
        return (lambda: d["s"]), lambda: d.__setitem__("s", 3.0)

    def default_dict():
        d = collections.defaultdict(float, s=2.0)
        return (lambda: d["s"]), lambda: d.__setitem__("s", 3.0)

    def deque():
        d = collections.deque([2.0])
        return (lambda: d[0]), lambda: d.__setitem__(0, 3.0)

    def set_():
        s = {2.0}
        return (lambda: max(s)), lambda: (s.clear(), s.add(3.0))

    def deep():
        leaf = [2.0]
        top = leaf
        for _ in range(14):
            top = {"k": top}

        def read():
            t = top
            for _ in range(14):
                t = t["k"]
            return t[0]
        return read, lambda: leaf.__setitem__(0, 3.0)

    def large_array_view():
        big = np.full(100_000, 2.0)
        view = big[:]  # (made before scg.jit locks `big`: stays writeable)
        return (lambda: big[0]), lambda: view.__setitem__(0, 3.0)

    def memmap(tmp=[]):
        import tempfile
        path = tempfile.mktemp(suffix=".dat")
        m = np.memmap(path, dtype=float, mode="w+", shape=(2,))
        m[:] = 2.0
        return (lambda: np.asarray(m)[0]), lambda: m.__setitem__(0, 3.0)

    rows = {f.__name__.strip("_"): Row(f) for f in (
        rebound_with_nonlocal, array_in_place, dict_in_place, default_argument_container,
        namedtuple_array_in_place, long_list, ordered_dict, default_dict, deque, set_,
        deep, large_array_view, memmap)}
    rows["array in place in a model"] = Row(array_in_place, host="model")
    rows["dict in place in a model"] = Row(dict_in_place, host="model")
    return rows


def _globals():
    def method_reads_global():
        class M:
            def s(self):
                return _SOURCE["value"]
        o = M()
        return (lambda: o.s()), lambda: _SOURCE.__setitem__("value", 4.0)

    def staticmethod_reads_global():
        class M:
            @staticmethod
            def s():
                return _SOURCE["value"]
        o = M()
        return (lambda: o.s()), lambda: _SOURCE.__setitem__("value", 11.0)

    def dunder_method_reads_global():
        box = _Box()
        return (lambda: box[1]), lambda: _SOURCE.__setitem__("value", 7.0)

    def class_read_as_a_global():
        return (lambda: _Settings.scale), _setter(_Settings, "scale", 5.0)

    def a_class_with_many_methods():
        o = _Many()
        return (lambda: o.get()), _setter(_Many, "scale", 3.0)

    def library_function_replaced():
        np.tanh = _NP_TANH  # (each run starts from numpy's own)
        return (lambda: np.tanh(1.0)), _setter(np, "tanh", np.cos)

    rows = {f.__name__: Row(f, reset=_reset_globals) for f in (
        method_reads_global, staticmethod_reads_global, dunder_method_reads_global,
        class_read_as_a_global, a_class_with_many_methods)}
    rows["global rebound"] = Row(_global_rebound, reset=_reset_globals)
    rows["global container in place"] = Row(_global_container_in_place, reset=_reset_globals)
    rows["global array in place"] = Row(_global_array_in_place, reset=_reset_globals)
    rows["library function replaced"] = Row(library_function_replaced,
                                            reset=lambda: setattr(np, "tanh", _NP_TANH))
    for name, container, use in [
            ("dict subclass __getitem__", _Lookup, lambda c: c["k"]),
            ("dict subclass get", _Settable, lambda c: c.get("a")),
            ("list subclass __getitem__", _Sequence, lambda c: c[0])]:
        def make(container=container, use=use):
            _reset_globals()
            c = container()
            return (lambda: use(c)), lambda: _SOURCE.__setitem__("value", 5.0)
        rows[name] = Row(make, reset=_reset_globals)
    return rows


_NP_TANH = np.tanh


def _objects():
    """Attributes of objects and classes of the user's, read directly or by their code."""
    def bound_method():
        class Scaled:
            def __init__(self, s):
                self.s = s

            def get(self):
                return self.s
        obj = Scaled(2.0)
        return obj.get, _setter(obj, "s", 3.0)

    def namespace():
        cfg = types.SimpleNamespace(s=2.0)
        return (lambda: cfg.s), _setter(cfg, "s", 3.0)

    def dataclass_field():
        @dataclasses.dataclass
        class D:
            s: float = 2.0

            def get(self):
                return self.s
        o = D()
        return o.get, _setter(o, "s", 4.0)

    def slots():
        class S:
            __slots__ = ("s",)
        s = S()
        s.s = 2.0
        return (lambda: s.s), _setter(s, "s", 3.0)

    def slots_property():
        class S:
            __slots__ = ("_a",)

            def __init__(self):
                self._a = 2.0

            @property
            def a(self):
                return self._a
        o = S()
        return (lambda: o.a), _setter(o, "_a", 5.0)

    def property_replaced():
        class P:
            @property
            def a(self):
                return 2.0
        o = P()
        return (lambda: o.a), _setter(P, "a", property(lambda s: 5.0))

    def class_attribute_through_self():
        class C:
            scale = 2.0

            def get(self):
                return self.scale
        return C().get, _setter(C, "scale", 3.0)

    def attribute_added_on_a_subclass():
        class Base:
            scale = 2.0

        class Derived(Base):
            pass
        obj = Derived()
        return (lambda: obj.scale), _setter(Derived, "scale", 7.0)

    def method_replaced_on_the_class():
        class WithMethod:
            def gain(self, x):
                return 2.0 * x
        obj = WithMethod()
        return (lambda: obj.gain(1.5)), _setter(WithMethod, "gain", lambda self, x: 3.0 * x)

    def subclass_override():
        class Base:
            def s(self):
                return 2.0

        class Sub(Base):
            pass
        o = Sub()
        return (lambda: o.s()), _setter(Sub, "s", lambda self: 3.0)

    def callable_class_attribute():
        class WithActivation:
            act = np.tanh
        obj = WithActivation()
        return (lambda: obj.act(0.5)), _setter(WithActivation, "act", np.sin)

    def class_held_by_another_class():
        class Config:
            scale = 2.0

        class Model:
            cfg = Config

            def __call__(self):
                return self.cfg.scale
        return Model(), _setter(Config, "scale", 3.0)

    def dataclass_default_on_the_class():
        @dataclasses.dataclass
        class Hyper:
            lr: float = 2.0
        return (lambda: Hyper.lr), _setter(Hyper, "lr", 4.0)

    def metaclass_attribute():
        class Meta(type):
            factor = 2.0

        class WithMeta(metaclass=Meta):
            pass
        o = WithMeta()
        return (lambda: type(o).factor), _setter(Meta, "factor", 6.0)

    def dunder_method_replaced():
        class Box:
            def __getitem__(self, k):
                return 2.0
        box = Box()
        return (lambda: box[0]), _setter(Box, "__getitem__", lambda s, k: 9.0)

    def class_array_in_place():
        class A:
            w = np.array([1.0, 2.0, 3.0])
        o = A()
        return (lambda: np.sum(o.w)), lambda: o.w.__setitem__(0, 10.0)

    def local_class():
        def make():
            class Local:
                k = 2.0

                def s(self):
                    return self.k
            return Local
        L = make()
        o = L()
        return (lambda: o.s()), _setter(L, "k", 8.0)

    def enum_member():
        class Color(enum.Enum):
            RED = 2.0
            BLUE = 3.0
        cur = [Color.RED]
        return (lambda: cur[0].value), lambda: cur.__setitem__(0, Color.BLUE)

    def class_reassigned():
        obj = _Gain()
        return (lambda: obj.gain()), _setter(obj, "__class__", _OtherGain)

    def instance_dict_replaced():
        obj = _Gain()
        obj.t = 1.0
        return (lambda: obj.t), _setter(obj, "__dict__", {"t": 3.0})

    def bound_dict_get():
        d = {"t": 1.0}
        get = d.get
        return (lambda: get("t")), lambda: d.__setitem__("t", 3.0)

    def bound_array_sum():
        w = np.array([1.0])
        return w.sum, lambda: w.__setitem__(0, 3.0)

    def array_subclass_attribute():
        a = np.array([1.0]).view(_ScaledArray)
        a.scale = 1.0
        return (lambda: a.scale * float(a[0])), _setter(a, "scale", 3.0)

    def namedtuple_subclass_field():
        p = _Pair(np.array([1.0]), 2.0)
        return (lambda: p.a[0]), lambda: p.a.__setitem__(0, 3.0)

    def namedtuple_subclass_property():
        _SOURCE["value"] = 1.0
        p = _Pair(np.array([1.0]), 2.0)
        return (lambda: p.target), lambda: _SOURCE.__setitem__("value", 3.0)

    def set_subclass():
        tags = _Tags({1.0})
        return (lambda: max(tags)), lambda: tags.add(3.0)

    def partial_subclass():
        scaled = _Bound(lambda v, k: v * k, k=1.0)
        return (lambda: scaled(1.0)), lambda: scaled.keywords.__setitem__("k", 3.0)

    def wrapped_function_attribute():
        def target():
            return 1.0

        @functools.wraps(target)
        def setting():
            return setting.value
        setting.value = 1.0
        return (lambda: setting()), _setter(setting, "value", 3.0)

    def function_attribute():
        def read():
            return read.scale
        read.scale = 2.0
        return read, _setter(read, "scale", 3.0)

    return {f.__name__: Row(f, reset=_reset_globals) for f in (
        bound_method, namespace, dataclass_field, slots, slots_property, property_replaced,
        class_attribute_through_self, attribute_added_on_a_subclass,
        method_replaced_on_the_class, subclass_override, callable_class_attribute,
        class_held_by_another_class, dataclass_default_on_the_class, metaclass_attribute,
        dunder_method_replaced, class_array_in_place, local_class, enum_member,
        class_reassigned, instance_dict_replaced, bound_dict_get, bound_array_sum,
        array_subclass_attribute, namedtuple_subclass_field, namedtuple_subclass_property,
        set_subclass, partial_subclass, wrapped_function_attribute, function_attribute)}


def _modules():
    """Modules named by the code, imported inside it, held in containers or objects."""
    def module_attribute():
        cfg = types.ModuleType("cfg")
        cfg.scale = 2.0
        return (lambda: cfg.scale), _setter(cfg, "scale", 3.0)

    def submodule_attribute():
        pkg = types.ModuleType("scg_test_pkg")
        pkg.sub = types.ModuleType("scg_test_pkg.sub")
        pkg.sub.X = 2.0
        sys.modules["scg_test_pkg"] = pkg
        return (lambda: pkg.sub.X), _setter(pkg.sub, "X", 3.0)

    def getattr_by_name():
        mod = types.ModuleType("scg_test_settings")
        mod.X = 2.0
        return (lambda: getattr(mod, "X")), _setter(mod, "X", 3.0)

    def two_functions_read_two_attributes():
        """The function reads cfg.A, a helper it calls cfg.B: a change of B shows."""
        cfg = types.ModuleType("scg_test_guards_two")
        cfg.A, cfg.B = 1.0, 1.0

        def helper():
            return cfg.B
        return (lambda: cfg.A * helper()), _setter(cfg, "B", 7.0)

    def imported_inside():
        cfg = _new_module(SCALE=1.0)
        return _import_inside, _setter(cfg, "SCALE", 3.0)

    def from_imported_inside():
        cfg = _new_module(SCALE=1.0)
        return _from_import_inside, _setter(cfg, "SCALE", 3.0)

    rows = {f.__name__: Row(f, reset=_drop_module) for f in (
        module_attribute, submodule_attribute, getattr_by_name,
        two_functions_read_two_attributes, imported_inside, from_imported_inside)}

    def held(holder):
        def make():
            cfg = types.ModuleType("scg_test_guards_held")
            cfg.K = 1.0
            if holder == "list":
                box = [cfg]
                read = lambda: box[0].K
            elif holder == "dict":
                box = {"m": cfg}
                read = lambda: box["m"].K
            else:
                box = types.SimpleNamespace(settings=cfg)
                read = lambda: box.settings.K
            return read, _setter(cfg, "K", 3.0)
        return make
    for holder in ("list", "dict", "object"):
        rows[f"module held in a {holder}"] = Row(held(holder))

    def held_by_a_value(reader):
        """A module reached as a value, read by code other than the function."""
        def make():
            cfg = _new_module(SCALE=1.0, OTHER=1.0)
            return reader(cfg), _setter(cfg, "SCALE", 3.0)
        return make

    def class_attribute(cfg):
        class Settings:
            module = cfg

            @staticmethod
            def scale():
                return Settings.module.SCALE
        return lambda: Settings.scale()

    def two_helpers_of_one_dict(cfg):
        mods = {"cfg": cfg}

        def first():
            return mods["cfg"].OTHER

        def second():
            return mods["cfg"].SCALE
        return lambda: first() * second()

    for name, reader in [
            ("bound method", lambda cfg: _HoldsSettings(cfg).scale),
            ("object through a closure", lambda cfg: (lambda h: lambda: h.scale())(
                _HoldsSettings(cfg))),
            ("class attribute", class_attribute),
            ("partial argument", lambda cfg: functools.partial(lambda m: m.SCALE, cfg)),
            ("two helpers of one dict", two_helpers_of_one_dict)]:
        rows[f"module held by a {name}"] = Row(held_by_a_value(reader), reset=_drop_module)
    return rows


def _atoms():
    """Values equal by == that compute differently: each a change."""
    angle = lambda s: np.arctan2(s, -1.0)  # (pi for 0.0, -pi for -0.0)
    pick = lambda i: np.sum(np.array([2.0, 5.0])[i])  # (5 for 1, 7 for True)
    nan_sign = lambda v: np.copysign(1.0, v) + 2.0
    cases = {
        "dict 0.0 -> -0.0": ("dict", 0.0, -0.0, angle),
        "list np.float64(0.0) -> np.float64(-0.0)": ("list", np.float64(0.0),
                                                      np.float64(-0.0), angle),
        "dict 1 -> True": ("dict", 1, True, pick),
        "dict 1 -> 1.0": ("dict", 1, 1.0, lambda v: np.float64(1.0) / (v * 0 + 3) if
                          type(v) is float else np.float64(2.0)),
        "dict nan -> -nan": ("dict", math.nan, -math.nan, nan_sign),
        "dict np.float32(nan) -> -nan": ("dict", np.float32(math.nan),
                                         np.float32(-math.nan), nan_sign),
        "dict complex 0j -> -0j imag": ("dict", complex(1.0, 0.0), complex(1.0, -0.0),
                                        lambda c: np.arctan2(c.imag, -1.0)),
        "tuple in a dict": ("dict", (0.0, 1), (-0.0, 1), lambda t: angle(t[0])),
    }
    rows = {}
    for name, (where, old, new, use) in cases.items():
        def make(where=where, old=old, new=new, use=use):
            holder = {"v": old} if where == "dict" else [old]
            key = "v" if where == "dict" else 0
            return (lambda: use(holder[key])), lambda: holder.__setitem__(key, new)
        rows[name] = Row(make)

    def in_a_set(old, new, first):
        def make():
            s = {old}
            return (lambda: np.arctan2(first(s), -1.0)), lambda: (s.clear(), s.add(new))
        return make
    rows["set 0.0 -> -0.0"] = Row(in_a_set(0.0, -0.0, max))
    rows["set of tuples with signed zeros"] = Row(
        in_a_set((0.0, "a"), (-0.0, "a"), lambda s: next(iter(s))[0]))

    def dict_key(old, new):
        def make():
            d = {old: 1.0}

            def first():
                k = next(iter(d))
                k = k[0] if type(k) is tuple else k
                return np.arctan2(k, -1.0) + (3.0 if type(k) is bool else 0.0)
            return first, lambda: (d.clear(), d.__setitem__(new, 1.0))
        return make
    for old, new in [(0.0, -0.0), (1, True), ((0.0, 1), (-0.0, 1))]:
        rows[f"dict key {old!r} -> {new!r}"] = Row(dict_key(old, new))

    def dtype_reassigned(size):  # (compared by bytes, or by digest when large)
        def make():
            a = np.zeros(size)
            a[:2] = [1.0, 2.0]
            return (lambda: np.sum(a[:2].astype(float)) * 1e-18), \
                _setter(a, "dtype", np.int64)  # (the same bytes, read as integers)
        return make
    rows["array dtype reassigned in place"] = Row(dtype_reassigned(2))
    rows["large array dtype reassigned in place"] = Row(dtype_reassigned((1 << 16) + 2))

    def structured_dtype_renamed():
        a = np.zeros(2, dtype=[("x", "f8"), ("y", "f8")])
        a["x"], a["y"] = 1.0, 5.0
        return (lambda: np.sum(a["x"])), \
            _setter(a, "dtype", np.dtype([("y", "f8"), ("x", "f8")]))
    rows["structured dtype renamed in place"] = Row(structured_dtype_renamed)
    return rows


ROWS = {**_closures(), **_globals(), **_objects(), **_modules(), **_atoms()}


@pytest.mark.parametrize("case", list(ROWS))
def test_a_change_of_what_the_code_that_ran_reads_is_seen(case):
    check_row(ROWS[case])


# ---------------------------------------------------------------- other effects of guards
def test_large_closure_array_stays_writable_and_a_write_is_seen():
    """A closure array above the digest limit is not made read-only (eager code may write
    its own array), and a write to it after replays is seen by the next call."""
    data = np.zeros(100_000)

    def f(x):
        return x + data[0]
    jf = scg.jit(f)
    for _ in range(4):
        assert same(jf(np.ones(2)), f(np.ones(2)))
    assert jf.stats["replays"] >= 1
    data[0] = 1.0
    assert data.flags.writeable
    assert same(jf(np.ones(2)), np.full(2, 2.0))


def test_an_object_whose_getattr_raises_key_error_is_guarded_by_its_attributes():
    """A user's __getattr__ raising KeyError for a missing name: the guards read the
    object's attributes themselves, and a change is seen."""
    class Config:
        def __init__(self):
            self.__dict__["values"] = {"scale": 2.0}

        def __getattr__(self, name):
            return self.__dict__["values"][name]

    config = Config()

    def f(x):
        return np.sum(x * config.scale)

    jitted = scg.jit(scg.grad(f))
    for _ in range(3):
        np.testing.assert_array_equal(jitted(np.ones(2)), [2.0, 2.0])
    assert jitted.stats["replays"] > 0
    config.values["scale"] = 3.0
    np.testing.assert_array_equal(jitted(np.ones(2)), [3.0, 3.0])


# ---------------------------------------------------------------- scg's own objects
def test_estimator_in_a_closure_variable_changed():
    def make():
        estimator = "pathwise"

        def model(mu):
            x = scg.sample("x", scg.Normal(mu, 1.0), estimator=estimator)
            return (x - 1.0) ** 2

        def choose(e):
            nonlocal estimator
            estimator = e
        return model, choose
    model, choose = make()
    E, Ej = pair(model, n=8, seed=21)
    step = scg.jit(lambda mu: scg.grad(Ej)(mu))
    mu = np.array(0.3)
    for _ in range(4):
        assert_same(scg.grad(E)(mu), step(mu))
    assert step.stats["replays"] > 0
    choose(scg.Score("loo"))
    for _ in range(4):
        assert_same(scg.grad(E)(mu), step(mu))


def test_estimators_dict_changed_in_place():
    spec = {"x": "pathwise"}
    E, Ej = pair(shifted_square, n=8, seed=22, estimators=spec)
    step = scg.jit(lambda mu: scg.grad(Ej)(mu))
    mu = np.array(0.3)
    for k in range(12):
        if k == 4:  # the dict the expectation holds, changed in place
            E.estimators["x"] = scg.Score("loo")
            Ej.estimators["x"] = scg.Score("loo")
        if k == 8:  # the dict the user passed (the expectation holds a copy)
            spec["x"] = "score"
        assert_same(scg.grad(E)(mu), step(mu))
    assert step.stats["replays"] > 0


def test_expectation_draws_and_generator_changed():
    E, Ej = pair(shifted_square, n=4, seed=24)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    mu = np.array(0.3)
    for k in range(16):
        if k == 4:  # more draws per call
            E.n = Ej.n = 8
        if k == 8:  # a new generator
            E.rng, Ej.rng = np.random.default_rng(99), np.random.default_rng(99)
        if k == 12:  # the same generator object, its state reset
            state = np.random.default_rng(7).bit_generator.state
            E.rng.bit_generator.state = state
            Ej.rng.bit_generator.state = state
        assert_same(scg.value_and_grad(E)(mu), step(mu))
    assert step.stats["replays"] > 0


def test_a_method_named_like_a_compiled_numpy_function_is_no_obstacle():
    # `rng.random` in code that also names the module `np`: its guard looks up
    # np.random.random (a method of numpy's global RandomState, its function compiled by
    # Cython), compared by identity; the call itself is a recorded draw
    from scg.distributions._util import plain
    from tests.distributions.test_capabilities import ThreeLevels

    class Taken(ThreeLevels):  # (the draws index the levels through scg.take)
        def _sample(self, rng, shape):
            logits = plain(self.logits)
            p = np.exp(logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True))
            u = rng.random(self._extended_shape(shape))
            index = np.sum(u[..., None] > np.cumsum(p, axis=-1)[..., :-1], axis=-1)
            return scg.take(self.LEVELS, index, axis=0)

    theta = np.array([0.3, -0.2, 0.5])
    for estimator in (scg.Score(), scg.IndeCateR()):
        def model(theta):
            return (scg.sample("x", Taken(theta), estimator=estimator) - 0.5) ** 2
        eager = scg.grad(scg.expectation(model, n=4, seed=0))
        jitted = scg.jit(scg.grad(scg.expectation(model, n=4, seed=0)))
        for _ in range(5):
            assert same(jitted(theta), eager(theta))
        assert jitted.stats["replays"] >= 2, jitted.explain()


def test_a_class_made_by_exec_in_a_library_main_module_is_the_users(monkeypatch):
    # (a notebook's or a test runner's cell: the class's module is named __main__, and
    # __main__ is a library's module; its methods' file says it is the user's code)
    import json
    monkeypatch.setitem(sys.modules, "__main__", json)
    source = (
        "class Scaled:\n"
        "    def __init__(self, k):\n"
        "        self.k = k\n"
        "    def __call__(self, x):\n"
        "        return self.k * x\n"
        "scale = Scaled(2.0)\n"
        "def f(x):\n"
        "    return scale(x) + 1.0\n")
    ns = {"__name__": "__main__"}
    exec(compile(source, "a cell of the user's", "exec"), ns)
    jf = scg.jit(ns["f"])
    x = np.array([1.0, 2.0])
    for _ in range(4):
        assert same(jf(x), ns["f"](x))
    assert jf.stats["replays"] >= 1, jf.explain()
    ns["scale"].k = 3.0  # (an attribute of the user's object: guarded, seen)
    assert same(jf(x), np.array([4.0, 7.0])), jf.explain()
