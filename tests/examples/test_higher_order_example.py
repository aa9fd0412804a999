"""examples/higher_order.py runs and its Newton steps reach the exact minimum's value."""

import importlib.util
import pathlib

import numpy as np

PATH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "higher_order.py"


def test_newton_with_estimated_hessians(capsys):
    spec = importlib.util.spec_from_file_location("higher_order", PATH)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    theta, best = example.main(n=20_000, steps=3, seed=1)
    assert example.exact_objective(theta) - example.exact_objective(best) < 2e-3
    assert np.all(np.isfinite(theta))
    assert "exact minimum" in capsys.readouterr().out


def test_its_command_line_takes_the_draws_steps_and_seed():
    import subprocess
    import sys
    done = subprocess.run([sys.executable, str(PATH), "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "--steps" in done.stdout and "--n" in done.stdout
    done = subprocess.run([sys.executable, str(PATH), "--steps", "two"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "invalid int value" in done.stderr
