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
    """Write `fig` as out_dir/name (examples/out/ by default), close it, return the path.
    Every panel with data must have both axes labelled (a panel showing an image, such
    as a digit, has no axes to label)."""
    # (a label of the whole figure, fig.supxlabel / supylabel, serves every panel)
    sup_x, sup_y = (getattr(fig, f"_sup{a}label", None) for a in "xy")
    sup_x, sup_y = (t is not None and bool(t.get_text()) for t in (sup_x, sup_y))
    unlabelled = [ax.get_title().splitlines()[0] if ax.get_title() else f"panel {k + 1}"
                  for k, ax in enumerate(fig.axes) if ax.has_data() and not ax.images and
                  not ((sup_x or ax.get_xlabel()) and (sup_y or ax.get_ylabel()))]
    if unlabelled:  # (a picture without axis labels says nothing)
        raise ValueError(f"{name}: label both axes of {', '.join(map(repr, unlabelled))}")
    out = pathlib.Path(out_dir) if out_dir is not None else OUT
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    fig.savefig(path, dpi=110, bbox_inches="tight")
    fig.clf()
    import matplotlib.pyplot as plt
    plt.close(fig)
    print(f"wrote {path}")
    return path


def run(main):
    """Run an example's main() from the command line: `--out DIR` is where its pictures go
    (examples/out/ by default, which git ignores)."""
    import argparse
    import sys
    doc = sys.modules[main.__module__].__doc__ or ""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0] if doc else None)
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="folder for the pictures (default examples/out/)")
    main(out_dir=parser.parse_args().out)
