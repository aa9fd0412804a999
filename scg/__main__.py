"""Command line: `python -m scg demo` runs the embedded worked example.

`python -m scg --help` (or `-h`, or `help`) lists the commands; `python -m scg demo --help`
lists the demo's options. Wrong commands, options or values exit with status 2 and a
message that names what was wrong, followed by the usage.
"""

import argparse
import sys

PROG = "python -m scg"
DEFAULT_N = 400_000
DEFAULT_SEED = 0


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
    """The argument parser of `python -m scg`: commands `demo` and `help`."""
    parser = _Parser(prog=PROG, allow_abbrev=False,
                     description="scg: gradients of expectations on numpy.")
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
    demo.add_argument("--n", type=_integer(2, "N, the number of draws per estimator, must be "
                                              "an integer >= 2: a variance needs 2 draws"),
                      default=DEFAULT_N, metavar="N",
                      help=f"draws per estimator, an integer >= 2 (default {DEFAULT_N:,})")
    demo.add_argument("--seed", type=_integer(0, "S, the seed of the random numbers, must be "
                                                 "an integer >= 0"),
                      default=DEFAULT_SEED, metavar="S",
                      help="seed of the random numbers, an integer >= 0 "
                           f"(default {DEFAULT_SEED})")
    helper = commands.add_parser("help", help="show this help, or a command's help "
                                              f"(`{PROG} help demo`)",
                                 description="Show the help of scg's command line, or of one "
                                             "command.")
    helper.add_argument("topic", nargs="?", choices=["demo", "help"], metavar="COMMAND",
                        help="the command to describe (demo or help)")
    return parser, {"demo": demo, "help": helper}


def main(argv=None):
    """Run the command line with `argv` (default: sys.argv[1:]); return the exit status.

    0 on success and for help; 2, with a message and the usage on stderr, for an unknown
    command or option or an invalid value.

    Example:
        >>> main(["demo", "--n", "2000"])   # prints the table; returns 0
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, commands = make_parser()
    try:
        if not argv:
            parser.error("a command is needed: demo (the worked example) or help")
        if argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
            parser.error(f"unknown option {argv[0]!r}: the first argument is a command "
                         "(demo or help)")
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported by the command that got them, with its usage
            commands[args.command].error(f"unrecognized argument(s): {' '.join(extra)}")
    except SystemExit as stop:  # argparse exits for --help (0) and for errors (2)
        return stop.code if isinstance(stop.code, int) else 2
    if args.command == "help":
        (commands[args.topic] if args.topic else parser).print_help()
        return 0
    from .demo import main as demo
    demo(n=args.n, seed=args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
