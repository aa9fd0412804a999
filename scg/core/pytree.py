"""Nested dict / list / tuple containers of arrays ("pytrees"): flatten and rebuild."""


def flatten(tree):
    """Return (leaves, treedef, paths): leaves in order, a structure to rebuild, leaf names."""
    leaves, paths = [], []
    treedef = _flatten(tree, "", leaves, paths)
    return leaves, treedef, paths


def _flatten(t, path, leaves, paths):
    # Module-level recursion (not a closure that refers to itself): no reference cycle, so
    # flattening on every gradient call leaves nothing for the garbage collector.
    if isinstance(t, dict):
        return (dict, [(k, _flatten(v, f"{path}[{k!r}]", leaves, paths)) for k, v in t.items()])
    if isinstance(t, (list, tuple)):
        return (type(t), [_flatten(v, f"{path}[{i}]", leaves, paths) for i, v in enumerate(t)])
    leaves.append(t)
    paths.append(path)
    return None


def unflatten(treedef, leaves):
    """Rebuild a tree of `treedef`'s structure from leaves in flatten order."""
    if treedef is None:
        return leaves[0]
    return _unflatten(treedef, iter(leaves))


def _unflatten(d, it):
    if d is None:
        return next(it)
    kind, children = d
    if kind is dict:
        return {k: _unflatten(c, it) for k, c in children}
    return kind([_unflatten(c, it) for c in children])


def tree_map(fn, tree, *rest):
    """Apply fn leaf by leaf to trees of the same structure."""
    leaves, treedef, _ = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])
