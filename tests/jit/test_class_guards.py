"""scg.jit guards on classes: a class's attributes changed after replays are seen.

Classes reached through an instance, a global, a closure, another class's attribute or a
metaclass; attributes added on a subclass, methods (dunder methods included) replaced on
the class, callable class attributes, properties, slots, enums, dataclass defaults, class
arrays changed in place, globals read by methods, and a class with many methods: after
each change the jitted call gives the eager result, bit for bit.
"""

import dataclasses
import enum

import numpy as np
import pytest

import scg

from .compare import same_bits as same


class _Base:
    scale = 2.0


class _Derived(_Base):
    pass


class _WithMethod:
    def gain(self, x):
        return 2.0 * x


class _WithActivation:
    act = np.tanh


_MISSING = object()


@pytest.mark.parametrize("cls,name,value,use,x", [
    # an attribute added on a subclass (`Derived.scale = 7.0`, shadowing `Base.scale`):
    # the lengths of the class dicts in the MRO are checked, so the new key is seen
    (_Derived, "scale", 7.0, lambda obj, x: obj.scale * x, [1.0, 2.0]),
    # a method monkeypatched on the instance's class (`Cls.gain = ...`) is seen
    (_WithMethod, "gain", lambda self, x: 3.0 * x, lambda obj, x: obj.gain(x), [1.0, 2.0]),
    # a class-level setting that is callable (an activation ufunc) is checked too:
    # switching it from np.tanh to np.sin is seen
    (_WithActivation, "act", np.sin, lambda obj, x: obj.act(x), [0.5, 1.0]),
], ids=["attribute_added_on_a_subclass", "method_replaced_on_the_class",
        "callable_class_attribute_changed"])
def test_a_class_attribute_changed_after_replays_is_seen(cls, name, value, use, x):
    obj = cls()
    original = cls.__dict__.get(name, _MISSING)

    def f(x):
        return use(obj, x)

    jitted = scg.jit(f)
    x = np.array(x)
    for _ in range(4):
        assert same(jitted(x), f(x))
    try:
        setattr(cls, name, value)
        assert same(jitted(x), f(x))
    finally:
        if original is _MISSING:
            delattr(cls, name)
        else:
            setattr(cls, name, original)


def _stale_after(f, mutate, x=np.arange(3.0)):
    jitted = scg.jit(f)
    for _ in range(4):
        assert same(f(x), jitted(x))
    assert jitted.stats["replays"] >= 1, jitted.explain()
    mutate()
    assert same(f(x), jitted(x)), "replayed a value from before the change"


class _Settings:
    scale = 2.0


def test_class_attribute_read_through_a_global_class_is_seen():
    """`x * _Settings.scale`; then `_Settings.scale = 5.0`: a class read as a global is
    guarded too, and the replay gives x * 5."""
    try:
        _stale_after(lambda x: x * _Settings.scale, lambda: setattr(_Settings, "scale", 5.0))
    finally:
        _Settings.scale = 2.0


def test_class_held_as_another_classes_attribute_is_seen():
    """A model class holding its configuration class (`cfg = Config`): the configuration
    class is guarded too, so Config.scale = 3.0 is seen."""
    class Config:
        scale = 2.0

    class Model:
        cfg = Config

        def __call__(self, x):
            return x * self.cfg.scale

    m = Model()
    _stale_after(lambda x: m(x), lambda: setattr(Config, "scale", 3.0))


def test_dataclass_default_read_on_the_class_is_seen():
    @dataclasses.dataclass
    class Hyper:
        lr: float = 2.0

    _stale_after(lambda x: x * Hyper.lr, lambda: setattr(Hyper, "lr", 4.0))


def test_metaclass_attribute_is_seen():
    class Meta(type):
        factor = 2.0

    class WithMeta(metaclass=Meta):
        pass

    o = WithMeta()
    _stale_after(lambda x: x * type(o).factor, lambda: setattr(Meta, "factor", 6.0))


_G = 2.0


def test_dunder_method_reading_a_global_is_seen():
    class Box:
        def __getitem__(self, k):
            return _G * k

    box = Box()

    def change():
        global _G
        _G = 7.0
    try:
        _stale_after(lambda x: x * box[1], change)
    finally:
        globals()["_G"] = 2.0


def test_dunder_method_replaced_on_the_class_is_seen():
    class Box:
        def __getitem__(self, k):
            return 2.0

    box = Box()
    _stale_after(lambda x: x * box[0], lambda: setattr(Box, "__getitem__", lambda s, k: 9.0))


_H = 2.0


def _set_h(v):
    global _H
    _H = v


class _Many:
    scale = 2.0

    def get(self):
        return self.scale


for _k in range(300):
    setattr(_Many, f"m{_k}", lambda self, _k=_k: float(_k))


@pytest.mark.parametrize("case", [
    "method_reads_global", "subclass_override", "class_array_mutated", "local_class",
    "enum_member", "slots_property", "property_replaced", "dataclass_field",
    "staticmethod_reads_global", "many_methods"])
def test_class_changes_that_are_seen(case):
    if case == "method_reads_global":
        class M:
            def s(self):
                return _H
        o = M()
        try:
            _stale_after(lambda x: x * o.s(), lambda: _set_h(4.0))
        finally:
            _set_h(2.0)
    elif case == "staticmethod_reads_global":
        class M:
            @staticmethod
            def s():
                return _H
        o = M()
        try:
            _stale_after(lambda x: x * o.s(), lambda: _set_h(11.0))
        finally:
            _set_h(2.0)
    elif case == "subclass_override":
        class Base:
            def s(self):
                return 2.0

        class Sub(Base):
            pass
        o = Sub()
        _stale_after(lambda x: x * o.s(), lambda: setattr(Sub, "s", lambda self: 3.0))
    elif case == "class_array_mutated":
        class A:
            w = np.array([1.0, 2.0, 3.0])
        o = A()
        _stale_after(lambda x: x * o.w, lambda: A.w.__setitem__(0, 10.0))
    elif case == "local_class":
        def make():
            class Local:
                k = 2.0

                def s(self):
                    return self.k
            return Local
        L = make()
        o = L()
        _stale_after(lambda x: x * o.s(), lambda: setattr(L, "k", 8.0))
    elif case == "enum_member":
        class Color(enum.Enum):
            RED = 2.0
            BLUE = 3.0
        cur = [Color.RED]
        _stale_after(lambda x: x * cur[0].value, lambda: cur.__setitem__(0, Color.BLUE))
    elif case == "slots_property":
        class S:
            __slots__ = ("_a",)

            def __init__(self):
                self._a = 2.0

            @property
            def a(self):
                return self._a
        o = S()
        _stale_after(lambda x: x * o.a, lambda: setattr(o, "_a", 5.0))
    elif case == "property_replaced":
        class P:
            @property
            def a(self):
                return 2.0
        o = P()
        _stale_after(lambda x: x * o.a, lambda: setattr(P, "a", property(lambda s: 5.0)))
    elif case == "dataclass_field":
        @dataclasses.dataclass
        class D:
            s: float = 2.0

            def get(self):
                return self.s
        o = D()
        _stale_after(lambda x: x * o.get(), lambda: setattr(o, "s", 4.0))
    else:
        o = _Many()
        try:
            _stale_after(lambda x: x * o.get(), lambda: setattr(_Many, "scale", 3.0))
        finally:
            _Many.scale = 2.0


_SOURCE = {"value": 1.0}  # (read by the containers' own methods below)


class _Lookup(dict):
    def __getitem__(self, key):
        return _SOURCE["value"]


class _Settable(dict):
    def get(self, key, default=None):
        return _SOURCE["value"]


class _Sequence(list):
    def __getitem__(self, i):
        return _SOURCE["value"]


@pytest.mark.parametrize("container, use", [
    (_Lookup(), lambda c, x: c["k"] * x),
    (_Settable(a=1), lambda c, x: c.get("a") * x),
    (_Sequence([0.0]), lambda c, x: c[0] * x),
], ids=["dict_subclass_getitem", "dict_subclass_get", "list_subclass_getitem"])
def test_a_container_subclass_whose_methods_read_a_global(container, use):
    """A dict or list subclass of the user's whose methods read a global: a change of
    that global is seen (the globals of the code that ran are guarded)."""
    try:
        _stale_after(lambda x: use(container, x), lambda: _SOURCE.update(value=5.0))
    finally:
        _SOURCE["value"] = 1.0


def test_library_container_subclasses_still_replay():
    """OrderedDict, defaultdict and a namedtuple reached by the function replay as before
    (only a user's own container classes are guarded by their methods)."""
    import collections
    point = collections.namedtuple("point", "a b")(2.0, 3.0)
    ordered = collections.OrderedDict(k=4.0)
    default = collections.defaultdict(float, k=5.0)

    def f(x):
        return point.a * ordered["k"] * default["k"] * x
    jitted = scg.jit(f)
    x = np.arange(3.0)
    for _ in range(4):
        assert same(jitted(x), f(x))
    assert jitted.stats["replays"] >= 1, jitted.explain()
