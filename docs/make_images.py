"""Make every picture in docs/images again, from the examples, at the settings the docs quote.

    python docs/make_images.py                  # all of them (about 15 minutes here)
    python docs/make_images.py --only dreg_snr  # the pictures of some examples
    python docs/make_images.py --quick --out /tmp/images   # small settings: a check

Each picture comes from one example's main() (examples/*.py), or for the study of the
worked example from `python -m scg compare`. Needs the examples' extras:
pip install -e ".[examples]".
"""

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"

# example: (the pictures it makes, its main()'s arguments for the docs, small ones)
RECIPES = {
    "worked_example": (["worked_example_histograms.png"], {}, dict(n=20_000, hist_draws=500)),
    "estimator_zoo": (["estimator_zoo.png"], {}, dict(n=4000)),
    "grpo_bandit": (["grpo_bandit.png"], {}, dict(groups=600)),
    "iwae_estimators": (["iwae_estimators.png"], {}, dict(n=6000)),
    "dreg_snr": (["dreg_snr.png"], {}, dict(Ks=(2, 8, 32), n=2000)),
    "relaxed_control_variates": (["relaxed_control_variates.png"], {}, dict(steps=200, n=32)),
    "unordered_set_study": (["unordered_set_study.png"], {},
                            dict(ks=(2, 4), scales=(0.5, 4.0), estimates=2000)),
    "digits_vae": (["digits_vae_training.png"], {}, dict(steps=20, variance_calls=10)),
    "study_worked_example": (["study_worked_example.png"], {}, dict(n=20_000, chunk=10_000)),
}


def make(name, out_dir, quick=False):
    """Run one recipe; return the paths of the pictures it wrote into out_dir."""
    pictures, full, small = RECIPES[name]
    kwargs = small if quick else full
    out_dir = pathlib.Path(out_dir)
    if name == "study_worked_example":  # (a study file for the command line)
        from scg.__main__ import main as cli
        args = ["compare", str(ROOT / "examples" / f"{name}.py"),
                "--plot", str(out_dir / pictures[0])]
        for key, value in kwargs.items():
            args += [f"--{key}", str(value)]
        if cli(args) != 0:
            raise RuntimeError(f"python -m scg {' '.join(args)} failed")
    else:
        sys.path.insert(0, str(ROOT / "examples"))
        try:
            module = __import__(name)
        finally:
            sys.path.remove(str(ROOT / "examples"))
        module.main(out_dir=out_dir, **kwargs)
    return [out_dir / p for p in pictures]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(IMAGES), help="folder (default docs/images)")
    parser.add_argument("--only", nargs="+", choices=list(RECIPES), metavar="EXAMPLE",
                        help=f"some of: {', '.join(RECIPES)}")
    parser.add_argument("--quick", action="store_true", help="small settings, to check")
    args = parser.parse_args(argv)
    pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
    made = []
    for name in args.only or RECIPES:
        made += make(name, args.out, quick=args.quick)
    print(f"{len(made)} pictures in {args.out}")
    return made


if __name__ == "__main__":
    main()
