"""`python -m scg compare FILE.py`: the study a file defines, its table and plot, in a
subprocess and in this process; estimators that do not apply get a row saying why; usage
errors exit with status 2, a message and no traceback; --scheduler runs the chunks on a Dask
cluster with the same numbers."""

import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

import scg
from scg.__main__ import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "study_worked_example.py"
LABELS = ["pathwise", "pathwise, antithetic", "score", "score, leave-one-out",
          "score, loo, antithetic", "measure-valued"]
SMALL = ["--n", "4000", "--chunk", "1000"]
USAGE = "usage: python -m scg compare [-h] [--n N] [--chunk C] [--seed S]"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("SCG_PROGRESS", "0")


def run(*args, cwd=None):
    """`python -m scg *args` in a subprocess: (exit status, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "scg", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


def in_process(args, capsys):
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def rows(out):
    """The table's rows: label -> list of cells."""
    table = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("| estimator |"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            table[cells[0].removesuffix(" (per pair)")] = cells[1:]
    return table


def study_file(tmp_path, *parts, name="study.py"):
    """A study file made of `parts` (each dedented on its own)."""
    path = tmp_path / name
    path.write_text("\n".join(textwrap.dedent(part) for part in parts))
    return path


WORKED = """
    import numpy as np
    import scg

    def model(theta):
        return scg.sample("x", scg.Normal(theta[0], theta[1])) ** 2

    params = np.array([2.0, 1.0])
"""


# ---------------------------------------------------------------- the example study
def test_example_from_the_shell_prints_the_table_and_writes_the_plot(tmp_path):
    status, out, err = run("compare", EXAMPLE, *SMALL, cwd=tmp_path)
    assert status == 0, err
    assert "Traceback" not in err
    assert out.startswith(f"{EXAMPLE}: 4,000 draws per estimator in 4 chunk(s) of 1,000, "
                          "seed 0")
    assert "| estimator | mean | stderr | bias | z | variance per draw |" in out
    table = rows(out)
    assert list(table) == LABELS
    for label in LABELS:
        z = [float(v) for v in table[label][3].split(", ")]
        assert max(abs(v) for v in z) < 4, (label, z)     # unbiased: the reference (4, 2)
    if pytest.importorskip("matplotlib"):
        assert (tmp_path / "study_worked_example.png").stat().st_size > 10_000  # default path
        assert "plot: wrote study_worked_example.png" in out


def test_the_example_runs_as_a_script(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLE), "--n", "2000", "--plot",
                           tmp_path / "s.png"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert list(rows(done.stdout)) == LABELS


def test_in_process_the_table_is_that_of_scg_compare(tmp_path, capsys):
    plot = tmp_path / "study.png"
    status, out, err = in_process(["compare", EXAMPLE, *SMALL, "--seed", "3", "--plot", plot],
                                  capsys)
    assert status == 0 and err == ""
    study = {}
    exec(EXAMPLE.read_text(), study)
    cmp = scg.compare(study["model"], study["params"], estimators=study["estimators"],
                      n=4000, chunk=1000, seed=3, reference=study["reference"])
    expected = rows(cmp.table())
    got = rows(out)
    assert list(got) == LABELS
    for label in LABELS:  # everything but the timings: µs per draw and efficiency
        assert got[label][:-2] == expected[label][:-2]
    assert cmp["pathwise"].n == 4000
    if pytest.importorskip("matplotlib"):
        assert plot.stat().st_size > 10_000 and f"plot: wrote {plot}" in out


def test_the_files_n_seed_and_chunk_and_the_options_that_override_them(tmp_path, capsys):
    path = study_file(tmp_path, WORKED, "n = 3000\nchunk = 1500\nseed = 7\n"
                                         "estimators = {'pathwise': 'pathwise'}\n")
    status, out, _ = in_process(["compare", path, "--plot", tmp_path / "a.png"], capsys)
    assert status == 0
    assert out.startswith(f"{path}: 3,000 draws per estimator in 2 chunk(s) of 1,500, seed 7")
    assert "| bias |" not in out                          # no reference, no bias and z
    status, out, _ = in_process(["compare", path, "--n", "2001", "--chunk", "1000", "--seed",
                                 "1", "--plot", tmp_path / "a.png"], capsys)
    assert status == 0
    assert out.startswith(f"{path}: 2,001 draws per estimator in 2 chunk(s) of 1,000 "
                          "(the last 1,001), seed 1")


def test_further_arguments_of_the_model_come_from_args(tmp_path, capsys):
    path = study_file(tmp_path, """
        import scg

        def model(mu, scale, power):
            return (scale * scg.sample("x", scg.Normal(mu, 1.0))) ** power

        params = 2.0
        args = (3.0, 2)
        reference = 36.0          # d/dmu E[(3x)^2] = 9 * 2 mu
        estimators = {"pathwise": "pathwise"}
    """)
    status, out, _ = in_process(["compare", path, "--n", "20000", "--plot", tmp_path / "a.png"],
                                capsys)
    assert status == 0
    mean, stderr = (float(v) for v in rows(out)["pathwise"][:2])
    assert abs(mean - 36.0) < 4 * stderr


# ---------------------------------------------------------------- estimators that do not apply
MIXED = """
    import numpy as np
    import scg

    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0))
        b = scg.sample("b", scg.Bernoulli(logits=theta[1]))
        return (x + b) ** 2

    params = np.array([0.5, 0.0])
    reference = np.array([2.0, 0.5])    # (2 (mu + p), (2 mu + 1) p (1 - p)), p = 1/2
"""


def test_an_estimator_that_does_not_apply_gets_a_row_saying_why(tmp_path, capsys):
    path = study_file(tmp_path, MIXED, """
    estimators = {"auto": "auto", "pathwise everywhere": {"x": "pathwise", "b": "pathwise"},
                  "score": "score", "measure-valued": scg.MeasureValued()}
    """)
    status, out, err = in_process(["compare", path, "--n", "6000", "--plot",
                                   tmp_path / "m.png"], capsys)
    assert status == 0 and err == ""
    table = rows(out)
    assert list(table) == ["auto", "score", "measure-valued", "pathwise everywhere"]
    why = table["pathwise everywhere"]
    assert why[0].startswith("not applicable: EstimatorError: site 'b': estimator='pathwise' "
                             "but Bernoulli has no reparameterization path")
    assert len(why) == 8 and all(c == "" for c in why[1:])   # as many cells as the header
    for label in ("auto", "score", "measure-valued"):
        z = [float(v) for v in table[label][3].split(", ")]
        assert max(abs(v) for v in z) < 4


def test_the_default_estimators_and_a_cost_without_a_path(tmp_path, capsys):
    path = study_file(tmp_path, """
        import numpy as np
        import scg

        def model(mu):
            return np.floor(scg.sample("x", scg.Normal(mu, 1.0)))

        params = 0.2
    """)
    status, out, err = in_process(["compare", path, "--n", "4000", "--plot",
                                   tmp_path / "f.png"], capsys)
    assert status == 0 and err == ""
    table = rows(out)
    assert list(table) == ["auto", "score", "score, leave-one-out", "measure-valued",
                           "pathwise"]
    assert table["pathwise"][0].startswith("not applicable: NoGradientPathError: no cost of "
                                           "the model depends on argument 0")


def test_an_odd_chunk_with_antithetic_pairs(tmp_path, capsys):
    status, out, _ = in_process(["compare", EXAMPLE, "--n", "2001", "--chunk", "1000",
                                 "--plot", tmp_path / "o.png"], capsys)
    assert status == 0
    table = rows(out)
    assert list(table)[-2:] == ["pathwise, antithetic", "score, loo, antithetic"]
    assert "n must be even" in table["pathwise, antithetic"][0]
    assert "got n = 1001" in table["pathwise, antithetic"][0]   # the chunk's, not the probe's


def test_a_biased_estimator_runs_and_its_warning_is_listed(tmp_path, capsys):
    path = study_file(tmp_path, """
        import scg

        def model(theta):
            return scg.sample("x", scg.Uniform(0.0, theta))

        params = 2.0
        reference = 0.5
        estimators = {"auto": "auto", "score": "score"}
    """)
    status, out, err = in_process(["compare", path, "--n", "4000", "--plot",
                                   tmp_path / "u.png"], capsys)
    assert status == 0 and err == ""
    assert list(rows(out)) == ["auto", "score"]
    assert "- score: BiasWarning: " in out


def test_no_estimator_applies_exit_1(tmp_path, capsys):
    path = study_file(tmp_path, MIXED, "estimators = {'pathwise': {'b': 'pathwise'}}\n")
    status, out, err = in_process(["compare", path, "--plot", tmp_path / "n.png"], capsys)
    assert status == 1
    assert "pathwise: not applicable: EstimatorError" in out
    assert "error: no estimator of" in err and "applies to its model" in err
    assert not (tmp_path / "n.png").exists()


def test_without_matplotlib_the_table_is_still_printed(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status, out, err = in_process(["compare", EXAMPLE, *SMALL, "--plot", tmp_path / "p.png"],
                                  capsys)
    assert status == 0 and err == ""
    assert list(rows(out)) == LABELS
    assert 'matplotlib is not installed (pip install "scg[plot]")' in out
    assert not (tmp_path / "p.png").exists()


# ---------------------------------------------------------------- help
@pytest.mark.parametrize("args", [["compare", "--help"], ["compare", "-h"],
                                  ["help", "compare"]])
def test_compare_help_describes_each_option(args, capsys):
    status, out, err = in_process(args, capsys)
    assert status == 0 and err == ""
    assert out.startswith(USAGE)
    for option in ("FILE.py", "--n N", "--chunk C", "--seed S", "--scheduler ADDRESS",
                   "--plot PATH"):
        assert option in out
    for name in ("model", "params", "args", "estimators", "reference"):
        assert f"  {name}" in out


def test_the_commands_list_names_compare(capsys):
    status, out, _ = in_process(["--help"], capsys)
    assert status == 0 and "compare" in out and "run the study of estimators" in out


# ---------------------------------------------------------------- usage errors: status 2
def usage_cases(tmp_path):
    def f(*parts, name):
        return study_file(tmp_path, *parts, name=name)
    return [
        (["compare"], "the following arguments are required: FILE.py"),
        (["compare", tmp_path / "missing.py"], f"{tmp_path / 'missing.py'}: no such file"),
        (["compare", tmp_path], "not a file"),
        (["compare", f("x = 1\n", name="a.py")],
         "defines no `model`: a study file defines `model`"),
        (["compare", f("def model(t):\n    return t\n", name="b.py")], "defines no `params`"),
        (["compare", f("model = 3\nparams = 1.0\n", name="c.py")],
         "`model` must be a function"),
        (["compare", f(WORKED, "args = 3\n", name="d.py")], "`args` must be a tuple"),
        (["compare", f(WORKED, "estimators = ['score']\n", name="e.py")],
         "`estimators` must be a non-empty dict"),
        (["compare", f(WORKED, "estimators = {'x': 'fast'}\n", name="g.py")],
         "estimators['x']: "),
        (["compare", f(WORKED, "n = 1\n", name="h.py")], "n = 1: N, the number of draws"),
        (["compare", f(WORKED, "n = 2.5\n", name="i.py")], "n = 2.5: N, the number of draws"),
        (["compare", f(WORKED, "seed = -1\n", name="j.py")], "seed = -1: S, the seed"),
        (["compare", f(WORKED, "chunk = 1\n", name="k.py")],
         "chunk = 1: C, the number of draws"),
        (["compare", f(WORKED, "reference = [4.0, 2.0, 1.0]\n", name="l.py")],
         "`reference` has 3 coordinates, the gradient 2"),
        (["compare", EXAMPLE, "--n", "1"], "argument --n: got 1; N, the number of draws per "
                                           "estimator, must be an integer >= 2"),
        (["compare", EXAMPLE, "--n", "many"], "argument --n: 'many' is not an integer"),
        (["compare", EXAMPLE, "--chunk", "1"], "argument --chunk: got 1; C, the number of "
                                               "draws per chunk, must be an integer >= 2"),
        (["compare", EXAMPLE, "--seed", "-2"], "argument --seed: got -2"),
        (["compare", EXAMPLE, "--plot", tmp_path / "no" / "p.png"],
         f"the folder {str(tmp_path / 'no')!r} does not exist"),
        (["compare", EXAMPLE, "extra"], "unrecognized argument(s): extra"),
    ]


def test_usage_errors_exit_2_with_a_message(tmp_path, capsys):
    for args, named in usage_cases(tmp_path):
        status, out, err = in_process(args, capsys)
        assert status == 2 and out == "", (args, out)
        assert USAGE in err and named in err, (args, err)


@pytest.mark.parametrize("case", [0, 1, 3, 9, 14])
def test_usage_errors_from_the_shell_have_no_traceback(tmp_path, case):
    args, named = usage_cases(tmp_path)[case]
    status, out, err = run(*args)
    assert status == 2 and out == ""
    assert USAGE in err and named in err
    assert "Traceback" not in err


def test_scheduler_without_dask(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    status, out, err = in_process(["compare", EXAMPLE, *SMALL, "--scheduler",
                                   "tcp://127.0.0.1:8786"], capsys)
    assert status == 2 and out == ""
    assert '--scheduler needs dask.distributed, which is not installed: pip install ' \
           '"scg[dask]"' in err


def test_a_scheduler_that_cannot_be_reached_exit_1(capsys):
    pytest.importorskip("distributed")
    import dask
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        status, out, err = in_process(["compare", EXAMPLE, *SMALL, "--scheduler",
                                       "tcp://127.0.0.1:9"], capsys)
    assert status == 1 and out == ""
    assert "error: cannot connect to the Dask scheduler at tcp://127.0.0.1:9" in err


# ---------------------------------------------------------------- on a Dask cluster
def test_scheduler_runs_the_chunks_on_the_cluster_with_the_same_numbers(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    args = ["compare", EXAMPLE, "--n", "8000", "--chunk", "2000", "--seed", "5"]
    status, out, _ = in_process([*args, "--plot", tmp_path / "here.png"], capsys)
    assert status == 0
    here = rows(out)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        address = cluster.scheduler_address
        status, out, err = in_process([*args, "--scheduler", address,
                                       "--plot", tmp_path / "there.png"], capsys)
        assert status == 0, err
        assert f"seed 5, on the Dask cluster at {address} (2 workers)" in out
        there = rows(out)
        assert list(there) == LABELS
        for label in LABELS:                   # the same numbers but for the timings
            assert there[label][:-2] == here[label][:-2]
        with distributed.Client(cluster) as client:   # the command closed its client
            assert len(client.scheduler_info()["workers"]) == 2
    if pytest.importorskip("matplotlib"):
        assert (tmp_path / "there.png").exists()


def test_the_file_is_not_run_as_main(tmp_path, capsys):
    path = study_file(tmp_path, WORKED, """
    estimators = {"pathwise": "pathwise"}
    if __name__ == "__main__":
        raise SystemExit("run as __main__")
    """)
    status, out, _ = in_process(["compare", path, "--n", "100", "--plot", tmp_path / "x.png"],
                                capsys)
    assert status == 0 and list(rows(out)) == ["pathwise"]
