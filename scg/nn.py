"""Functional neural-network layers: parameters are pytrees of plain numpy arrays.

A layer is a dict {"W": (n_in, n_out), "b": (n_out,)} and an MLP is a list of them, so
`scg.grad` returns gradients of the same structure and `scg.optim` updates them. The apply
functions are plain numpy (`x @ W + b`), so they work on arrays, on traced values, and on
per-draw values inside a model.

Example:
    >>> rng = np.random.default_rng(0)
    >>> params = scg.nn.init_mlp(rng, [1, 20, 30, 2])
    >>> scg.nn.mlp(params, np.ones((5, 1)), final=scg.softplus).shape
    (5, 2)
"""

import numpy as np

from .numpy.rules import relu

INITS = ("he", "glorot", "lecun", "zeros")


def init_linear(rng, n_in, n_out, init="he"):
    """Parameters of a dense layer: {"W": (n_in, n_out), "b": zeros (n_out,)}.

    Args:
        rng: a numpy Generator (or an int seed).
        n_in, n_out: input and output widths.
        init: "he" (normal, variance 2 / n_in: for relu), "glorot" (uniform with variance
            2 / (n_in + n_out): for tanh and sigmoid), "lecun" (normal, variance 1 / n_in)
            or "zeros".
    Returns:
        A dict of float64 arrays.
    """
    rng = np.random.default_rng(rng)
    if init == "he":
        W = rng.normal(0.0, np.sqrt(2.0 / n_in), size=(n_in, n_out))
    elif init == "glorot":
        limit = np.sqrt(6.0 / (n_in + n_out))
        W = rng.uniform(-limit, limit, size=(n_in, n_out))
    elif init == "lecun":
        W = rng.normal(0.0, np.sqrt(1.0 / n_in), size=(n_in, n_out))
    elif init == "zeros":
        W = np.zeros((n_in, n_out))
    else:
        raise ValueError(f"init_linear: unknown init {init!r}; use one of {INITS}")
    return {"W": W, "b": np.zeros(n_out)}


def linear(params, x):
    """x @ W + b for x of shape (..., n_in): shape (..., n_out)."""
    return x @ params["W"] + params["b"]


def init_mlp(rng, sizes, init="he"):
    """Parameters of an MLP with layer widths `sizes` (input first): a list of layer dicts.

    Example:
        >>> [p["W"].shape for p in scg.nn.init_mlp(0, [1, 20, 30, 2])]
        [(1, 20), (20, 30), (30, 2)]
    """
    if len(sizes) < 2:
        raise ValueError(f"init_mlp needs at least an input and an output width, got {sizes}")
    rng = np.random.default_rng(rng)
    return [init_linear(rng, a, b, init) for a, b in zip(sizes[:-1], sizes[1:])]


def mlp(params, x, activation=relu, final=None):
    """Apply an MLP: `activation` after every hidden layer, `final` (or nothing) after the last.

    Args:
        params: a list of layer dicts, as from `init_mlp`.
        x: input of shape (..., n_in); plain, traced or per-draw.
        activation: a function applied elementwise between layers (scg.relu, np.tanh, ...).
        final: None, or a function applied to the output (scg.softplus, scg.sigmoid, ...).
    """
    last = len(params) - 1
    for i, layer in enumerate(params):
        x = x @ layer["W"] + layer["b"]
        if i < last:
            x = activation(x)
    return x if final is None else final(x)
