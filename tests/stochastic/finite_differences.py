"""Central finite differences of exact expectations, for the statistical tests."""


def fd_grad(fun, theta, h=1e-5):
    """Central finite differences of a plain function of a dict of scalars."""
    out = {}
    for k in theta:
        up, down = dict(theta), dict(theta)
        up[k] += h
        down[k] -= h
        out[k] = (fun(up) - fun(down)) / (2 * h)
    return out
