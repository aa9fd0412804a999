"""Nested containers of arrays ("pytrees"): flatten and rebuild.

A pytree is an array, a number or a traced value (a leaf), or a container of pytrees:
dict (and its subclasses such as `collections.OrderedDict`, rebuilt as their own type in the
same key order), list, tuple, namedtuple, dataclass instance, or `types.SimpleNamespace`.

In the record types (namedtuple, dataclass, SimpleNamespace), a field that holds a number
(not a bool), a numpy array, a traced value or a container is a leaf or a subtree; any other
field (a string, None, a bool flag, a function, ...) is carried along unchanged, so a
dataclass of parameters may also hold its configuration.
"""

import dataclasses
import numbers
import types
from collections import OrderedDict, defaultdict

import numpy as np

from .tape import Tracer


def flatten(tree):
    """Return (leaves, treedef, paths): leaves in order, a structure to rebuild, leaf names."""
    leaves, treedef = flatten_leaves(tree)
    return leaves, treedef, leaf_paths(treedef)


def flatten_leaves(tree):
    """Return (leaves, treedef) without the leaf names (flatten on every gradient call)."""
    leaves = []
    return leaves, _flatten(tree, leaves)


# A treedef is None (a leaf) or (kind, children): kind is dict (children: (key, child)
# pairs), list, tuple or another list / tuple subclass (children: the children), or a _Node
# (children: (key or field name, child) pairs) for the other containers.

def _flatten(t, leaves):
    # Module-level recursion (not a closure that refers to itself): no reference cycle, so
    # flattening on every gradient call leaves nothing for the garbage collector.
    cls = type(t)
    if cls is np.ndarray:  # the usual leaf, first: flattening runs on every step
        leaves.append(t)
        return None
    if cls is dict:
        children = []
        for k, v in t.items():
            if type(v) is np.ndarray:  # (a leaf without a call)
                leaves.append(v)
                children.append((k, None))
            else:
                children.append((k, _flatten(v, leaves)))
        return (dict, children)
    if cls is list or cls is tuple:
        return (cls, [_flatten(v, leaves) for v in t])
    if isinstance(t, (np.generic, Tracer, float, int, complex)):  # (the other usual leaves)
        leaves.append(t)
        return None
    node = _node(t)
    if node is None:
        if isinstance(t, (list, tuple)):  # a subclass, built from a list of its items
            return (cls, [_flatten(v, leaves) for v in t])
        leaves.append(t)
        return None
    node, items = node
    return (node, [(k, _flatten(v, leaves)) for k, v in items])


def _node(t):
    """(node, children's (key, value) pairs) of a container other than dict, list and
    tuple; None for a leaf."""
    if isinstance(t, dict):
        return _DictNode(t), t.items()
    if isinstance(t, tuple) and isinstance(getattr(type(t), "_fields", None), tuple):
        return _RecordNode.of(type(t), t._fields, t, "namedtuple")
    if dataclasses.is_dataclass(t) and not isinstance(t, type):
        return _RecordNode.of(type(t), [f.name for f in dataclasses.fields(t) if f.init], t,
                              "dataclass")
    if type(t) is types.SimpleNamespace:
        return _RecordNode.of(types.SimpleNamespace, list(vars(t)), t, "namespace")
    return None


class _DictNode:
    """A dict subclass (OrderedDict, defaultdict, ...): rebuilt as its own type."""

    __slots__ = ("cls", "factory")

    def __init__(self, t):
        self.cls = type(t)
        self.factory = getattr(t, "default_factory", None)

    def path(self, k):
        return f"[{k!r}]"

    def build(self, pairs):
        if self.cls is OrderedDict:
            return OrderedDict(pairs)
        if issubclass(self.cls, defaultdict):
            return self.cls(self.factory, pairs)
        return self.cls(pairs)


def _is_data(v):
    """Whether a record field is differentiable data (a leaf or a subtree)."""
    if isinstance(v, (bool, np.bool_)):
        return False
    return isinstance(v, (np.ndarray, np.generic, numbers.Number, Tracer, dict, list, tuple,
                          types.SimpleNamespace)) or \
        (dataclasses.is_dataclass(v) and not isinstance(v, type))


class _RecordNode:
    """A namedtuple, dataclass instance or SimpleNamespace: fields by name.

    Data fields (see `_is_data`) are the children; the others are kept here and put back
    unchanged when the record is rebuilt.
    """

    __slots__ = ("cls", "kind", "names", "fixed")

    def __init__(self, cls, kind, names, fixed):
        self.cls, self.kind, self.names, self.fixed = cls, kind, names, fixed

    @classmethod
    def of(cls, record_type, names, t, kind):
        """(node, the data fields' (name, value) pairs) of record `t`."""
        names = tuple(names)
        items, fixed = [], {}
        for name in names:
            v = getattr(t, name)
            if _is_data(v):
                items.append((name, v))
            else:
                fixed[name] = v
        return cls(record_type, kind, names, fixed), items

    def path(self, k):
        return f".{k}"

    def build(self, pairs):
        values = dict(self.fixed)
        values.update(pairs)
        if self.kind == "namedtuple":
            return self.cls._make(values[name] for name in self.names)
        if self.kind == "namespace":
            return types.SimpleNamespace(**{name: values[name] for name in self.names})
        # A dataclass: the fields are set directly, not through the constructor, whose
        # __post_init__ may transform what it is given (normalize weights): run on a
        # gradient it would change the gradient. Only a dataclass with derived fields
        # (init=False) goes through its constructor, so that they are computed from the
        # traced fields; a constructor that refuses the values is bypassed too.
        if any(not f.init for f in dataclasses.fields(self.cls)):
            try:
                return self.cls(**{k: v for k, v in values.items() if k in self.init_names})
            except Exception:
                pass
        obj = object.__new__(self.cls)
        for name, v in values.items():
            object.__setattr__(obj, name, v)
        return obj

    @property
    def init_names(self):
        return {f.name for f in dataclasses.fields(self.cls) if f.init}


def leaf_paths(treedef, prefix=""):
    """The leaves' names in flatten order: "['W0']" (a dict key), "[1][0]" (list / tuple
    items), ".mu" (a namedtuple, dataclass or namespace field)."""
    if treedef is None:
        return (prefix,)
    kind, children = treedef
    if kind is dict:
        return tuple(p for k, c in children for p in leaf_paths(c, f"{prefix}[{k!r}]"))
    if isinstance(kind, (_DictNode, _RecordNode)):
        return tuple(p for k, c in children for p in leaf_paths(c, prefix + kind.path(k)))
    return tuple(p for i, c in enumerate(children) for p in leaf_paths(c, f"{prefix}[{i}]"))


def unflatten(treedef, leaves):
    """Rebuild a tree of `treedef`'s structure from leaves in flatten order."""
    if treedef is None:
        return leaves[0]
    return _unflatten(treedef, iter(leaves))


def _unflatten(d, it):
    if d is None:
        return next(it)
    kind, children = d
    if kind is dict:  # (leaves taken here: one call fewer per leaf)
        return {k: next(it) if c is None else _unflatten(c, it) for k, c in children}
    if isinstance(kind, type):  # list, tuple or a subclass
        return kind([next(it) if c is None else _unflatten(c, it) for c in children])
    return kind.build([(k, next(it) if c is None else _unflatten(c, it)) for k, c in children])


def build_source(treedef, exprs):
    """A Python expression building the tree of `treedef` from the leaf expressions
    `exprs` (in flatten order), for trees of dicts with string or int keys, lists and
    tuples; None for other nodes."""
    it = iter(exprs)

    def build(d):
        if d is None:
            return next(it)
        kind, children = d
        if kind is dict:
            if not all(type(k) in (str, int) for k, _ in children):
                raise _NotBuildable
            return "{" + "".join(f"{k!r}: {build(c)}, " for k, c in children) + "}"
        if kind is list or kind is tuple:
            inner = "".join(f"{build(c)}, " for c in children)
            return f"[{inner}]" if kind is list else f"({inner})"
        raise _NotBuildable

    try:
        return build(treedef)
    except _NotBuildable:
        return None


class _NotBuildable(Exception):
    pass


def tree_map(fn, tree, *rest):
    """Apply fn leaf by leaf to trees of the same structure."""
    leaves, treedef = flatten_leaves(tree)
    others = [flatten_leaves(r)[0] for r in rest]
    return unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])
