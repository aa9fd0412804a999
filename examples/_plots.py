"""Shared by the examples: pyplot if matplotlib is installed, and where the PNGs go."""

import pathlib

OUT = pathlib.Path(__file__).resolve().parent / "out"
MISSING = "matplotlib is not installed: pip install -e '.[plot]' to get the plots"


def pyplot():
    """matplotlib.pyplot with a file-only backend, or None (after saying so) if missing."""
    try:
        import matplotlib
    except ImportError:
        print(MISSING)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, name, out_dir=None):
    """Write `fig` as out_dir/name (examples/out/ by default), close it, return the path."""
    out = pathlib.Path(out_dir) if out_dir is not None else OUT
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    fig.savefig(path, dpi=110, bbox_inches="tight")
    fig.clf()
    import matplotlib.pyplot as plt
    plt.close(fig)
    print(f"wrote {path}")
    return path
