"""Nested dict / list / tuple containers of arrays ("pytrees"): flatten and rebuild."""

import numpy as np


def flatten(tree):
    """Return (leaves, treedef, paths): leaves in order, a structure to rebuild, leaf names."""
    leaves, treedef = flatten_leaves(tree)
    return leaves, treedef, leaf_paths(treedef)


def flatten_leaves(tree):
    """Return (leaves, treedef) without the leaf names (flatten on every gradient call)."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(t, leaves):
    # Module-level recursion (not a closure that refers to itself): no reference cycle, so
    # flattening on every gradient call leaves nothing for the garbage collector.
    if type(t) is np.ndarray:  # the usual leaf, first: flattening runs on every step
        leaves.append(t)
        return None
    if isinstance(t, dict):
        children = []
        for k, v in t.items():
            if type(v) is np.ndarray:  # (a leaf without a call)
                leaves.append(v)
                children.append((k, None))
            else:
                children.append((k, _flatten(v, leaves)))
        return (dict, children)
    if isinstance(t, (list, tuple)):
        return (type(t), [_flatten(v, leaves) for v in t])
    leaves.append(t)
    return None


def leaf_paths(treedef, prefix=""):
    """The leaves' names in flatten order, such as "['W0']" or "[1][0]" (a tuple)."""
    if treedef is None:
        return (prefix,)
    kind, children = treedef
    if kind is dict:
        return tuple(p for k, c in children for p in leaf_paths(c, f"{prefix}[{k!r}]"))
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
    return kind([next(it) if c is None else _unflatten(c, it) for c in children])


def tree_map(fn, tree, *rest):
    """Apply fn leaf by leaf to trees of the same structure."""
    leaves, treedef = flatten_leaves(tree)
    others = [flatten_leaves(r)[0] for r in rest]
    return unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])
