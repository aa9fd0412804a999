"""Command line: `python -m scg demo` runs the embedded worked example."""

import sys

USAGE = "usage: python -m scg demo [--n N] [--seed S]"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "demo":
        print(USAGE)
        return 2
    options = {"--n": 400_000, "--seed": 0}
    rest = argv[1:]
    while rest:
        key = rest.pop(0)
        if key not in options or not rest:
            print(USAGE)
            return 2
        options[key] = int(rest.pop(0))
    from .demo import main as demo
    demo(n=options["--n"], seed=options["--seed"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
