"""Command line: `python -m scg demo` runs the embedded worked example; `python -m scg compare
FILE.py` runs the study of estimators that FILE.py defines.

`python -m scg --version` prints scg's version. `python -m scg --help` (or `-h`, or `help`)
lists the commands; `python -m scg demo --help`
and `python -m scg compare --help` list their options. Wrong commands, options or values,
and study files without what a study needs, exit with status 2 and a message that names
what was wrong, followed by the usage.

A study file is Python, run with `runpy.run_path` (not as `__main__`). It defines

    model        the model function (required)
    params       the argument the gradient is taken with respect to: the model's first
                 argument (required; an array, a number or a pytree)
    args         further positional arguments of the model, a tuple (optional; not
                 differentiated)
    estimators   {label: estimator spec} (optional; default: DEFAULT_ESTIMATORS)
    reference    the exact gradient, structured like `params` (optional: bias and z)
    n, seed, chunk   draws per estimator, seed, draws per chunk (optional; the command
                 line's --n, --seed, --chunk override them)

and the command prints `scg.compare(model, params, *args, estimators=..., n=n, seed=seed,
reference=reference, chunk=chunk).table()` with the estimators that apply to the model,
followed by one row per estimator that does not (its EstimatorError or
NoGradientPathError), then writes the comparison's plot.
"""

import argparse
import pathlib
import re
import runpy
import sys
import warnings

PROG = "python -m scg"
DEFAULT_N = 400_000
DEFAULT_SEED = 0
DEFAULT_STUDY_N = 100_000
COMMANDS = ("demo", "compare", "help")


def default_estimators():
    """The estimators of a study file without `estimators`: label -> spec."""
    from .estimators import MeasureValued, Score
    return {"auto": "auto", "pathwise": "pathwise", "score": "score",
            "score, leave-one-out": Score("loo"), "measure-valued": MeasureValued()}


N_RULE = ("N, the number of draws per estimator, must be an integer >= 2: a variance needs "
          "2 draws")
SEED_RULE = "S, the seed of the random numbers, must be an integer >= 0"
CHUNK_RULE = "C, the number of draws per chunk, must be an integer >= 2"


def _integer(minimum, rule):
    """An argparse type: an integer >= minimum, or an error that says the rule."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer; {rule}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"got {value}; {rule}")
        return value

    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        """Print the usage and the error to stderr, then exit with status 2."""
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n(see `{self.prog} --help`)\n")


def make_parser():
    """The argument parser of `python -m scg`: commands `demo`, `compare` and `help`."""
    parser = _Parser(prog=PROG, allow_abbrev=False,
                     description="scg: gradients of expectations on numpy.")
    from ._version import __version__
    parser.add_argument("--version", action="version", version=f"scg {__version__}",
                        help="print scg's version and exit")
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND",
                                     parser_class=_Parser)
    commands.required = True
    demo = commands.add_parser(
        "demo", allow_abbrev=False,
        help="run the worked example x ~ N(2, 1), f(x) = x^2: every estimator's mean and "
             "per-sample variance beside the exact values",
        description="The worked example x ~ N(mu, sigma) at mu = 2, sigma = 1, f(x) = x^2: "
                    "each estimator's mean, per-sample variance and the draws needed for a "
                    "standard error of 0.1, beside the exact values.")
    demo.add_argument("--n", type=_integer(2, N_RULE), default=DEFAULT_N, metavar="N",
                      help=f"draws per estimator, an integer >= 2 (default {DEFAULT_N:,})")
    demo.add_argument("--seed", type=_integer(0, SEED_RULE), default=DEFAULT_SEED, metavar="S",
                      help="seed of the random numbers, an integer >= 0 "
                           f"(default {DEFAULT_SEED})")
    compare = commands.add_parser(
        "compare", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="run the study of estimators a Python file defines (scg.compare): print the "
             "table, write the plot",
        description="Run the study of estimators that FILE.py defines with scg.compare: "
                    "print its Markdown table\n(one row per estimator; an estimator that "
                    "does not apply to the model gets a row saying why)\nand write its plot.",
        epilog="FILE.py defines:\n"
               "  model       the model function (required)\n"
               "  params      the argument the gradient is taken with respect to, the "
               "model's first (required)\n"
               "  args        a tuple of further arguments of the model (optional, not "
               "differentiated)\n"
               "  estimators  a dict {label: estimator spec} (optional; default: auto, "
               "pathwise, score,\n"
               "              score with leave-one-out, measure-valued); a spec is one "
               "estimator for\n"
               "              every site or a dict {site name: estimator}\n"
               "  reference   the exact gradient, like params (optional: bias and z "
               "columns)\n"
               "  n, seed, chunk  as the options (optional; the options override them)\n\n"
               f"Example: {PROG} compare examples/study_worked_example.py --n 100000")
    compare.add_argument("file", metavar="FILE.py",
                         help="the study: a Python file defining model and params")
    compare.add_argument("--n", type=_integer(2, N_RULE), metavar="N",
                         help="draws per estimator, an integer >= 2 (default: the file's n, "
                              f"else {DEFAULT_STUDY_N:,})")
    compare.add_argument("--chunk", type=_integer(2, CHUNK_RULE), metavar="C",
                         help="draws per chunk, an integer >= 2: memory is one chunk's "
                              "(default: the file's chunk, else min(N, 100,000))")
    compare.add_argument("--seed", type=_integer(0, SEED_RULE), metavar="S",
                         help="seed of the random numbers, an integer >= 0 (default: the "
                              f"file's seed, else {DEFAULT_SEED})")
    compare.add_argument("--scheduler", metavar="ADDRESS",
                         help="run the chunks on the Dask cluster whose scheduler is at "
                              "ADDRESS (tcp://HOST:8786); needs scg[dask]")
    compare.add_argument("--plot", metavar="PATH",
                         help="where to write the plot (default: FILE's stem .png in the "
                              "current directory)")
    helper = commands.add_parser("help", help="show this help, or a command's help "
                                              f"(`{PROG} help demo`)",
                                 description="Show the help of scg's command line, or of one "
                                             "command.")
    helper.add_argument("topic", nargs="?", choices=list(COMMANDS), metavar="COMMAND",
                        help="the command to describe (demo, compare or help)")
    return parser, {"demo": demo, "compare": compare, "help": helper}


def main(argv=None):
    """Run the command line with `argv` (default: sys.argv[1:]); return the exit status.

    0 on success and for help; 2, with a message and the usage on stderr, for an unknown
    command or option, an invalid value, or a study file without what a study needs; 1 when
    no estimator of a study applies or the Dask scheduler cannot be reached.

    Example:
        >>> main(["demo", "--n", "2000"])   # prints the table; returns 0
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, commands = make_parser()
    try:
        if not argv:
            parser.error("a command is needed: demo (the worked example), compare (a study "
                         "file) or help")
        if argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
            parser.error(f"unknown option {argv[0]!r}: the first argument is a command "
                         "(demo, compare or help)")
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported by the command that got them, with its usage
            commands[args.command].error(f"unrecognized argument(s): {' '.join(extra)}")
        if args.command == "compare":
            try:
                return _compare(args)
            except _Usage as problem:
                commands["compare"].error(str(problem))
    except SystemExit as stop:  # argparse exits for --help (0) and for errors (2)
        return stop.code if isinstance(stop.code, int) else 2
    if args.command == "help":
        (commands[args.topic] if args.topic else parser).print_help()
        return 0
    from .demo import main as demo
    demo(n=args.n, seed=args.seed)
    return 0


# ---------------------------------------------------------------- python -m scg compare
class _Usage(Exception):
    """A usage error found after parsing (the study file, a value): exit status 2."""


def load_study(path):
    """The names a study file defines, checked: a dict with model, params, args (a tuple),
    estimators (a dict or None), reference, n, seed and chunk (None when absent).

    Raises _Usage for a missing file or a file without what a study needs. Errors raised by
    the file's own code propagate with their traceback."""
    file = pathlib.Path(path)
    if not file.exists():
        raise _Usage(f"{path}: no such file")
    if not file.is_file():
        raise _Usage(f"{path}: not a file (a study is a Python file defining model and params)")
    folder = str(file.resolve().parent)
    sys.path.insert(0, folder)  # (its own modules import, as with `python FILE.py`)
    try:
        names = runpy.run_path(str(file), run_name="__scg_study__")
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    need = ("a study file defines `model` (the model function) and `params` (the argument "
            "the gradient is taken with respect to)")
    for name in ("model", "params"):
        if name not in names:
            raise _Usage(f"{path} defines no `{name}`: {need}")
    if not callable(names["model"]):
        raise _Usage(f"{path}: `model` must be a function, got "
                     f"{type(names['model']).__name__}")
    study = {"model": names["model"], "params": names["params"]}
    args = names.get("args", ())
    if isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple):
        raise _Usage(f"{path}: `args` must be a tuple of the model's further arguments, got "
                     f"{type(args).__name__} (for one argument: args = (value,))")
    study["args"] = args
    estimators = names.get("estimators")
    if estimators is not None:
        if not isinstance(estimators, dict) or not estimators:
            raise _Usage(f"{path}: `estimators` must be a non-empty dict {{label: estimator "
                         f"spec}}, got {estimators!r}")
        from .estimators import as_estimator
        for label, spec in estimators.items():
            for s in (spec.values() if isinstance(spec, dict) else [spec]):
                try:
                    as_estimator(s)
                except (TypeError, ValueError) as e:
                    raise _Usage(f"{path}: estimators[{label!r}]: {e}") from None
    study["estimators"] = estimators
    study["reference"] = names.get("reference")
    for name, minimum, rule in (("n", 2, N_RULE), ("seed", 0, SEED_RULE),
                                ("chunk", 2, CHUNK_RULE)):
        value = names.get(name)
        if value is not None and (isinstance(value, bool) or not _is_int(value)
                                  or value < minimum):
            raise _Usage(f"{path}: {name} = {value!r}: {rule}")
        study[name] = None if value is None else int(value)
    return study


def _is_int(value):
    import numpy as np
    return isinstance(value, (int, np.integer))


def _probe(model, params, args, spec, ns):
    """Whether `spec` applies to the model: one gradient with each n in `ns` draws.
    Returns (why not: (the n that failed, the error), or None; the warnings scg emitted,
    as text; the gradient)."""
    import scg
    from .errors import EstimatorError, NoGradientPathError
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grad = None
        for n in ns:
            try:
                grad = scg.grad(scg.expectation(model, n=n, seed=0, estimators=spec))(
                    params, *args)
            except (EstimatorError, NoGradientPathError) as e:
                return (n, f"{type(e).__name__}: {e}"), [], None
    notes = []
    for w in caught:
        if issubclass(w.category, (scg.BiasWarning, scg.RandomnessWarning)):
            text = f"{w.category.__name__}: {w.message}"
            if text not in notes:
                notes.append(text)
    return None, notes, grad


def _size(tree):
    import numpy as np
    from .core import pytree
    return sum(int(np.size(leaf)) for leaf in pytree.flatten_leaves(tree)[0])


def _cell(text):
    return " ".join(str(text).split()).replace("|", "\\|")


def _compare(args):
    """`python -m scg compare`: load, check, probe each estimator, run, print, plot."""
    path = args.file
    plot = pathlib.Path(args.plot if args.plot is not None
                        else pathlib.Path(path).stem + ".png")
    if plot.parent != pathlib.Path("") and not plot.parent.is_dir():
        raise _Usage(f"--plot {args.plot}: the folder {str(plot.parent)!r} does not exist")
    study = load_study(path)
    n, seed, chunk = (option if option is not None else study[name]
                      for option, name in ((args.n, "n"), (args.seed, "seed"),
                                           (args.chunk, "chunk")))
    n = DEFAULT_STUDY_N if n is None else n
    seed = DEFAULT_SEED if seed is None else seed
    chunk = min(n, 100_000) if chunk is None else chunk
    estimators = study["estimators"] or default_estimators()
    model, params, extra = study["model"], study["params"], study["args"]

    from .studies.chunks import chunk_sizes
    sizes = chunk_sizes(n, chunk)
    # a few draws for each chunk size: as many up to 8, else 8 or 9 (the same parity)
    probes = {}
    for size in sizes:
        probes.setdefault(size if size <= 8 else 8 + size % 2, size)
    applies, not_applicable, notes, grad = {}, {}, [], None
    for label, spec in estimators.items():
        why, found, g = _probe(model, params, extra, spec, sorted(probes))
        if why is None:
            applies[label], grad = spec, g
            notes += [f"{label}: {text}" for text in found]
        else:
            probe, why = why  # (the chunk's n in the message, not the probe's)
            not_applicable[label] = re.sub(rf"\bn = {probe}\b", f"n = {probes[probe]}", why)
    reference = study["reference"]
    if reference is not None and grad is not None and _size(reference) != _size(grad):
        raise _Usage(f"{path}: `reference` has {_size(reference)} coordinates, the gradient "
                     f"{_size(grad)}: give the exact gradient, structured like params")
    if not applies:
        for label, why in not_applicable.items():
            print(f"{label}: not applicable: {why}")
        print(f"{PROG} compare: error: no estimator of {path} applies to its model",
              file=sys.stderr)
        return 1

    where = ""
    client = None
    if args.scheduler is not None:
        try:
            from dask.distributed import Client
        except ImportError:
            raise _Usage("--scheduler needs dask.distributed, which is not installed: "
                         'pip install "scg[dask]"') from None
        try:
            client = Client(args.scheduler)
        except Exception as e:  # (an address dask cannot parse or reach)
            print(f"{PROG} compare: error: cannot connect to the Dask scheduler at "
                  f"{args.scheduler}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        workers = len(client.scheduler_info().get("workers", {}))
        where = f", on the Dask cluster at {args.scheduler} ({workers} workers)"
        if not workers:
            print(f"{PROG} compare: the scheduler at {args.scheduler} has no workers yet: "
                  "the study waits for one", file=sys.stderr)
    last = f" (the last {sizes[-1]:,})" if sizes[-1] != sizes[0] else ""
    print(f"{path}: {n:,} draws per estimator in {len(sizes):,} chunk(s) of {sizes[0]:,}"
          f"{last}, seed {seed}{where}\n", flush=True)
    import scg
    try:
        with warnings.catch_warnings():  # (reported under the table, once each)
            warnings.simplefilter("ignore", scg.BiasWarning)
            warnings.simplefilter("ignore", scg.RandomnessWarning)
            cmp = scg.compare(model, params, *extra, estimators=applies, n=n, seed=seed,
                              reference=reference, chunk=chunk, client=client)
    finally:
        if client is not None:
            client.close()

    table = cmp.table()
    columns = table.splitlines()[0].count("|") - 1
    rows = [f"| {_cell(label)} | not applicable: {_cell(why)} |" + " |" * (columns - 2)
            for label, why in not_applicable.items()]
    print("\n".join([table] + rows))
    if notes:
        print()
        for note in notes:
            print(f"- {note}")
    print()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print('plot: not written, matplotlib is not installed (pip install "scg[plot]")')
    else:
        cmp.plot(str(plot))
        print(f"plot: wrote {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
