"""The fingerprint Watch of scg.jit: each kind of read notices its change.

`scg.core.fingerprint.Watch` re-checks what a function reads on every call, by generated
code for small check lists and by a loop for large ones: cells, globals, attributes,
properties, slots, deleted attributes, class attributes, keyword-named attributes, dict and
list items, list lengths, sets, array contents, defaults and code objects. Each change gives
a new token (and the jitted call the eager result); an unchanged function keeps its token.
"""

import numpy as np
import pytest

import scg
from scg.jit import fingerprint as F

from .compare import same_bits as same


class _Settings:
    __slots__ = ("gain",)


def test_watch_sees_each_kind_of_read_change_and_nothing_else():
    """The function's fingerprint is re-checked by generated code on every call: each kind
    of read (cell, global, attribute, slot, dict item, list item and length, set, array
    contents, an emptied cell) must notice its change, and an unchanged function keep its
    token."""
    from scg.jit.fingerprint import Watch

    class Config:
        pass

    cfg = Config()
    cfg.scale = 2.0
    slots = _Settings()
    slots.gain = 1.0
    table = {"k": 1.0}
    items = [1.0, 2.0]
    flags = {1, 2}
    weights = np.ones(3)
    late = 1.0

    def f(x):
        return x * cfg.scale * slots.gain * table["k"] * items[0] * len(flags) * weights * late

    watch = Watch()
    first = watch.get(f)
    assert watch.get(f) == first

    def changed(mutate, undo):
        mutate()
        token = watch.get(f)
        undo()
        assert watch.get(f) == first
        return token != first

    assert changed(lambda: setattr(cfg, "scale", 3.0), lambda: setattr(cfg, "scale", 2.0))
    assert changed(lambda: setattr(cfg, "extra", 1), lambda: delattr(cfg, "extra"))
    assert changed(lambda: setattr(slots, "gain", 5.0), lambda: setattr(slots, "gain", 1.0))
    assert changed(lambda: table.update(k=4.0), lambda: table.update(k=1.0))
    assert changed(lambda: items.__setitem__(0, 9.0), lambda: items.__setitem__(0, 1.0))
    assert changed(lambda: items.append(3.0), lambda: items.pop())
    assert changed(lambda: flags.add(3), lambda: flags.discard(3))
    assert changed(lambda: weights.__setitem__(1, 2.0), lambda: weights.__setitem__(1, 1.0))

    def rebind(value):
        nonlocal late
        late = value
    assert changed(lambda: rebind(2.0), lambda: rebind(1.0))
    del slots.gain  # (an attribute gone: the walk runs again and sees it)
    assert watch.get(f) != first


def test_watch_of_a_large_closure_is_checked_by_the_loop_not_compiled(monkeypatch):
    """`Watch.get` checks a long list of reads (a function reading a 3000-entry table:
    15,000 reads) by a loop rather than by generated code, whose compile cost would be paid
    whenever anything the function reads changes (e.g. a flag switched between training and
    evaluation calls); the loop sees changes all the same, and a small closure still gets
    generated code."""
    import builtins
    compiled = []

    def counting_compile(*args, **kwargs):
        compiled.append(1)
        return builtins.compile(*args, **kwargs)
    monkeypatch.setattr(F, "compile", counting_compile, raising=False)

    class Model:
        pass

    model = Model()
    model.table = {f"k{i}": [float(i), 1.0, 2.0] for i in range(3000)}
    model.training = True

    def f(x):
        return x * model.table["k0"][0] * (2.0 if model.training else 1.0)

    watch = F.Watch()
    first = watch.get(f)
    assert not compiled  # (the loop, not 15 000 lines of generated code)
    model.training = False
    second = watch.get(f)
    model.table["k0"][0] = 5.0
    third = watch.get(f)
    assert len({first, second, third}) == 3 and not compiled
    scale = 2.0
    F.Watch().get(lambda x: x * scale)
    assert compiled  # (a small closure: generated code)


class _Prop:
    def __init__(self):
        self._s = 2.0

    @property
    def s(self):
        return self._s


class _Slots:
    __slots__ = ("s",)


class _Shadow:
    s = 2.0


_GLOBAL_SCALE = 2.0


def _watch_cases():
    def prop():
        o = _Prop()
        return (lambda x: x * o.s), lambda: setattr(o, "_s", 3.0)

    def slots():
        o = _Slots()
        o.s = 2.0
        return (lambda x: x * o.s), lambda: setattr(o, "s", 3.0)

    def deleted_attribute():
        o = _Shadow()
        o.s = 5.0
        return (lambda x: x * o.s), lambda: delattr(o, "s")

    def class_attribute():
        o = _Shadow()
        return (lambda x: x * o.s), lambda: setattr(_Shadow, "s", 3.0)

    def global_rebound():
        def f(x):
            return x * _GLOBAL_SCALE

        def change():
            global _GLOBAL_SCALE
            _GLOBAL_SCALE = 3.0
        return f, change

    def list_in_place():
        values = [2.0]
        return (lambda x: x * values[0]), lambda: values.__setitem__(0, 3.0)

    def list_append():
        values = [2.0]
        return (lambda x: x * sum(values)), lambda: values.append(1.0)

    def keyword_attribute():
        o = _Shadow()
        setattr(o, "class", 2.0)
        return (lambda x: x * getattr(o, "class")), lambda: setattr(o, "class", 3.0)

    def defaults():
        def f(x, s=2.0):
            return x * s
        return f, lambda: setattr(f, "__defaults__", (3.0,))

    def code():
        def f(x):
            return x * 2.0
        return f, lambda: setattr(f, "__code__", (lambda x: x * 3.0).__code__)

    return {f.__name__: f for f in (prop, slots, deleted_attribute, class_attribute,
                                    global_rebound, list_in_place, list_append,
                                    keyword_attribute, defaults, code)}


@pytest.mark.parametrize("case", list(_watch_cases()))
def test_compiled_watch_sees_the_change(case):
    global _GLOBAL_SCALE
    saved = (_Shadow.s, _GLOBAL_SCALE)
    try:
        fn, change = _watch_cases()[case]()
        jitted = scg.jit(fn)
        x = np.array([1.0, 2.0])
        for _ in range(4):
            assert same(jitted(x), fn(x))
        assert jitted.stats["replays"] >= 1
        change()
        assert same(jitted(x), fn(x))
    finally:
        _Shadow.s, _GLOBAL_SCALE = saved


def test_a_walk_that_gave_up_is_not_walked_again_until_what_it_read_changes(monkeypatch):
    """A function reaching an object the walk cannot read runs afresh (explain() names
    it); the reads made before the walk stopped are checked on later calls instead of
    walking again every time, and a change among them makes the walk run again."""
    walks = []
    walk_top = F._walk_top

    def counting(*args):
        walks.append(1)
        return walk_top(*args)
    monkeypatch.setattr(F, "_walk_top", counting)

    class Unreadable:  # (names its attributes for the walk, but has no __dict__)
        __slots__ = ("scale",)
        __fingerprint_attrs__ = ("scale",)

    odd = Unreadable()
    odd.scale = 2.0
    gain = [1.0]

    def f(x):
        return x * gain[0] * odd.scale

    jitted = scg.jit(f)
    x = np.arange(3.0)
    for _ in range(5):
        assert same(jitted(x), f(x))
    assert len(walks) == 1, len(walks)
    assert "could not read" in jitted.explain()
    gain[0] = 3.0  # (read before the walk stopped: walked again)
    assert same(jitted(x), f(x))
    assert len(walks) == 2
