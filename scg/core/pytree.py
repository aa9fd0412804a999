"""Nested dict / list / tuple containers of arrays ("pytrees"): flatten and rebuild."""


def flatten(tree):
    """Return (leaves, treedef, paths): leaves in order, a structure to rebuild, leaf names."""
    leaves, paths = [], []

    def build(t, path):
        if isinstance(t, dict):
            return (dict, [(k, build(v, f"{path}[{k!r}]")) for k, v in t.items()])
        if isinstance(t, (list, tuple)):
            return (type(t), [build(v, f"{path}[{i}]") for i, v in enumerate(t)])
        leaves.append(t)
        paths.append(path)
        return None

    treedef = build(tree, "")
    return leaves, treedef, paths


def unflatten(treedef, leaves):
    """Rebuild a tree of `treedef`'s structure from leaves in flatten order."""
    it = iter(leaves)

    def build(d):
        if d is None:
            return next(it)
        kind, children = d
        if kind is dict:
            return {k: build(c) for k, c in children}
        return kind(build(c) for c in children)

    return build(treedef)


def tree_map(fn, tree, *rest):
    """Apply fn leaf by leaf to trees of the same structure."""
    leaves, treedef, _ = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])
