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
