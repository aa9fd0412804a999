"""The command line: help, usage errors with exit status 2 and no traceback, the demo."""

import subprocess
import sys

import pytest

import scg.demo
from scg.__main__ import main


def run(*args):
    """`python -m scg *args` in a subprocess: (exit status, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "scg", *args], capture_output=True,
                          text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def in_process(args, capsys):
    """`scg.__main__.main(args)`: (exit status, stdout, stderr)."""
    status = main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# ---------------------------------------------------------------- help
@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"]])
def test_help_lists_each_command_with_a_description(args, capsys):
    status, out, err = in_process(args, capsys)
    assert status == 0 and err == ""
    assert out.startswith("usage: python -m scg")
    assert "demo" in out and "worked example" in out       # each command, one line each
    assert "help" in out and "a command's help" in out


@pytest.mark.parametrize("args", [["demo", "--help"], ["demo", "-h"], ["help", "demo"]])
def test_demo_help_describes_each_option(args, capsys):
    status, out, err = in_process(args, capsys)
    assert status == 0 and err == ""
    assert out.startswith("usage: python -m scg demo [-h] [--n N] [--seed S]")
    assert "--n N" in out and "draws per estimator, an integer >= 2 (default 400,000)" in out
    assert "--seed S" in out and "seed of the random numbers, an integer >= 0" in out


def test_help_from_the_shell():
    status, out, err = run("--help")
    assert status == 0 and err == "" and out.startswith("usage: python -m scg")


# ---------------------------------------------------------------- usage errors: status 2
USAGE_ERRORS = [
    ([], "a command is needed"),
    (["foo"], "invalid choice: 'foo'"),
    (["--bogus"], "unknown option '--bogus'"),
    (["demo", "--x", "3"], "unrecognized argument(s): --x 3"),
    (["demo", "extra"], "unrecognized argument(s): extra"),
    (["demo", "--n"], "argument --n: expected one argument"),
    (["help", "foo"], "invalid choice: 'foo'"),
]
BAD_VALUES = [
    (["--n", "1"], "argument --n: got 1; N, the number of draws per estimator, must be an "
                   "integer >= 2: a variance needs 2 draws"),
    (["--n", "0"], "argument --n: got 0"),
    (["--n", "abc"], "argument --n: 'abc' is not an integer"),
    (["--n", "2.5"], "argument --n: '2.5' is not an integer"),
    (["--seed", "x"], "argument --seed: 'x' is not an integer"),
    (["--seed", "1.5"], "argument --seed: '1.5' is not an integer"),
    (["--seed", "-1"], "argument --seed: got -1; S, the seed of the random numbers, must be an "
                       "integer >= 0"),
]


@pytest.mark.parametrize("args, named", USAGE_ERRORS)
def test_unknown_commands_and_options_exit_2_with_the_usage(args, named, capsys):
    status, out, err = in_process(args, capsys)
    assert status == 2 and out == ""
    assert "usage: python -m scg" in err
    assert named in err


@pytest.mark.parametrize("args, named", BAD_VALUES)
def test_invalid_demo_values_exit_2(args, named, capsys):
    status, out, err = in_process(["demo", *args], capsys)
    assert status == 2 and out == ""
    assert "usage: python -m scg demo [-h] [--n N] [--seed S]" in err
    assert named in err


@pytest.mark.parametrize("args, named", [
    (["foo"], "invalid choice: 'foo'"),
    (["demo", "--n", "1"], "a variance needs 2 draws"),   # (this ended in a traceback)
])
def test_usage_errors_from_the_shell_have_no_traceback(args, named):
    status, out, err = run(*args)
    assert status == 2 and out == ""
    assert "usage: python -m scg" in err and named in err
    assert "Traceback" not in err


# ---------------------------------------------------------------- the demo itself
def test_demo_runs_with_small_n():
    status, out, err = run("demo", "--n", "2000", "--seed", "3")
    assert status == 0, err
    assert "n = 2,000 draws per estimator" in out
    for label in ("pathwise", "score, b = 5", "leave-one-out"):
        assert label in out


def test_smallest_valid_n_runs(capsys):
    assert main(["demo", "--n", "2"]) == 0
    assert "n = 2 draws per estimator" in capsys.readouterr().out


def test_demo_output_is_the_same_as_calling_the_demo(capsys):
    assert main(["demo", "--n", "2000", "--seed", "5"]) == 0
    from_cli = capsys.readouterr().out
    scg.demo.main(n=2000, seed=5)
    assert capsys.readouterr().out == from_cli


@pytest.mark.parametrize("n", [1, 0, 2.5, "100", True])
def test_demo_function_refuses_a_bad_n(n):
    with pytest.raises(ValueError, match="integer >= 2"):
        scg.demo.main(n=n)


# ---------------------------------------------------------------- version
def test_version_flag_prints_the_package_version(capsys):
    import scg
    status, out, err = in_process(["--version"], capsys)
    assert status == 0 and err == ""
    assert out.strip() == f"scg {scg.__version__}"
    assert scg.__version__ != "unknown" and scg.__version__[0].isdigit()


def test_version_in_a_subprocess():
    import scg
    status, out, err = run("--version")
    assert status == 0 and out.strip() == f"scg {scg.__version__}", err


def test_version_falls_back_to_pyproject(monkeypatch):
    import importlib.metadata

    from scg import _version

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    text = (__import__("pathlib").Path(_version.__file__).resolve().parents[1]
            / "pyproject.toml").read_text()
    assert f'version = "{_version._version()}"' in text
