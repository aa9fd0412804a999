"""Every example runs with small settings, writes its plots, and shows what it says."""

import importlib
import pathlib
import sys

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("SCG_PROGRESS", "0")
    monkeypatch.syspath_prepend(str(EXAMPLES))


def load(name):
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(EXAMPLES))


def pngs(tmp_path):
    pytest.importorskip("matplotlib")
    return sorted(p.name for p in tmp_path.glob("*.png"))


def test_policy_gradient(tmp_path, capsys):
    out = load("policy_gradient").main(steps=300, variance_draws=500, out_dir=tmp_path)
    assert abs(out["mu"] - 3.0) < 0.5                     # learns to act near 3
    assert "stop_gradient" in out["detach_error"]         # the .detach() mistake, explained
    v = out["variance"]
    assert v["pathwise", "start"] < v["score, leave-one-out", "start"] < v["score, no baseline", "start"]
    assert "NoGradientPathError" in capsys.readouterr().out
    if pytest.importorskip("matplotlib"):
        assert pngs(tmp_path) == ["policy_gradient_training.png", "policy_gradient_variance.png"]


def test_worked_example(tmp_path):
    out = load("worked_example").main(n=20_000, hist_draws=500, out_dir=tmp_path)
    rows = {(r[0], r[1]): r for r in out["rows"]}
    assert abs(rows["pathwise", "mu"][4] - 4.0) < 0.5     # variance 4
    assert abs(rows["score", "mu"][4] - 87.0) < 20        # variance 87
    assert set(out["samples"]) == {"pathwise", "score", "score, b = 5", "score, b* = 7"}
    assert pngs(tmp_path) == ["worked_example_histograms.png"]


def test_discrete_vae(tmp_path):
    out = load("discrete_vae").main(steps=40, n_points=64, batch=16, variance_draws=100,
                                    out_dir=tmp_path)
    v = out["variance"]
    for where in ("start", "trained"):
        assert v["leave-one-out", where] < v["score", where]
    for c in out["curves"].values():
        assert c[-1, 1] < c[0, 1]                          # the negative ELBO goes down
    assert pngs(tmp_path) == ["discrete_vae_reconstructions.png", "discrete_vae_training.png"]


def test_blackbox_simulator(tmp_path):
    out = load("blackbox_simulator").main(steps=60, n=32, variance_draws=2000, out_dir=tmp_path)
    assert np.all(out["grad_pathwise"] == 0) and out["bias_warning"]
    assert out["error"] is not None
    assert np.all(np.sign(out["es_scg"]) == np.sign(out["es_antithetic"]))
    assert out["history"][-1, 0] < out["history"][0, 0]
    assert pngs(tmp_path) == ["blackbox_simulator.png"]


def test_pitfalls(tmp_path):
    results = load("pitfalls").main(n=20_000, groups=2000, out_dir=tmp_path)
    for r in results:
        assert r["warned"]
        assert abs(r["fixed"] - r["exact"]) < 5 * r["fixed_se"] + 1e-3
        assert abs(r["mistake"] - r["exact"]) > 0.2 * abs(r["exact"])
    assert pngs(tmp_path) == ["pitfalls.png"]


def test_estimator_zoo(tmp_path):
    out = load("estimator_zoo").main(n=4000, out_dir=tmp_path)
    coins, worked = out["discrete"], out["continuous"]
    assert coins["enumerate"]["variance"] == 0.0 and coins["enumerate"]["evals"] == 1024
    for label in ("score", "score, leave-one-out", "DisARM", "measure-valued"):
        assert coins[label]["z"] < 4.5, label                # unbiased
    assert coins["Gumbel-softmax T=0.5"]["z"] > 6              # a relaxation: biased
    assert coins["DisARM"]["variance"] < coins["score, leave-one-out"]["variance"]
    assert worked["pathwise, antithetic"]["evals"] == 2
    assert worked["pathwise"]["variance"] < worked["score"]["variance"]
    assert pngs(tmp_path) == ["estimator_zoo.png"]


def test_digits_vae(tmp_path):
    pytest.importorskip("sklearn")
    mod = load("digits_vae")
    out = mod.main(steps=60, variance_calls=40, out_dir=tmp_path)
    v = out["variance"]
    assert v["DisARM"] < v["leave-one-out"]               # the paper's ordering
    for c in out["curves"].values():
        assert c[-1, 2] > c[0, 2]                          # the ELBO goes up
    assert pngs(tmp_path) == ["digits_vae_training.png"]


def test_grpo_bandit(tmp_path):
    out = load("grpo_bandit").main(groups=600, out_dir=tmp_path)
    assert out["RLOO"]["max_z"] < 5                                # unbiased
    assert abs(out["RLOO"]["size"] - 1.0) < 0.1
    assert abs(out["Dr. GRPO (no std)"]["size"] - 7 / 8) < 0.1     # (G - 1) / G
    assert out["Dr. GRPO (no std)"]["cosine"] > 0.99               # the right direction
    assert out["GRPO (group std)"]["cosine"] < 0.9                 # the group std turns it
    assert out["GRPO (group std)"]["max_z"] > 10                   # biased, measurably
    assert pngs(tmp_path) == ["grpo_bandit.png"]


def test_dreg_snr(tmp_path):
    out = load("dreg_snr").main(Ks=(2, 8, 32), n=2000, out_dir=tmp_path)
    plain, dreg = np.array(out["pathwise"]), np.array(out["DReG"])
    assert plain[-1, 0] < 0.5 * plain[0, 0]           # the proposal's SNR falls with K
    assert dreg[-1, 0] > 2.0 * dreg[0, 0]             # and rises under DReG
    np.testing.assert_allclose(dreg[:, 2], plain[:, 2])  # the model's: the same
    assert pngs(tmp_path) == ["dreg_snr.png"]


def test_iwae_estimators(tmp_path):
    out = load("iwae_estimators").main(n=6000, out_dir=tmp_path)
    for label, row in out.items():
        assert row["z"] < 5, label                                   # all unbiased
    assert out["sites: enumerate"]["variance"] < 1e-20              # exact
    assert out["plate: VIMCO"]["variance"] < out["plate: leave-one-out"]["variance"]
    assert out["plate: VIMCO"]["evals"] == 1 and out["sites: enumerate"]["evals"] == 64
    assert pngs(tmp_path) == ["iwae_estimators.png"]


def test_relaxed_control_variates(tmp_path):
    out = load("relaxed_control_variates").main(steps=400, n=32, out_dir=tmp_path)
    table = out["table"]
    relax, rebar = table["RELAX (tuned)"], table["REBAR (tuned)"]
    reinforce = table["REINFORCE (no baseline)"]
    assert relax["log10_var"] < rebar["log10_var"] - 1          # RELAX's learned control
    assert relax["log10_var"] < reinforce["log10_var"] - 1
    assert rebar["log10_var"] < reinforce["log10_var"] - 0.3      # the papers' ordering
    assert relax["temperature"] != 0.5 and rebar["temperature"] != 0.5   # tuned
    for label, row in table.items():
        assert row["theta"] < 0, label             # every one trains towards b = 0
    assert pngs(tmp_path) == ["relaxed_control_variates.png"]


def test_unordered_set_study(tmp_path):
    out = load("unordered_set_study").main(ks=(2, 4), scales=(0.5, 4.0), estimates=4000,
                                           out_dir=tmp_path)
    for entropy, rows in out.items():
        for k, unordered, loo in rows:
            assert unordered < loo, (entropy, k)     # below leave-one-out at equal k
    assert pngs(tmp_path) == ["unordered_set_study.png"]


def test_cartpole(tmp_path, capsys):
    cartpole = load("cartpole")
    out = cartpole.main(updates=15, seed=0, out_dir=tmp_path)
    assert out["gradient_difference"] < 1e-10      # scg's gradient is REINFORCE by hand
    h = out["history"]
    assert len(h) == 15 and h[-5:].mean() > 1.5 * h[:5].mean()   # the episodes get longer
    assert "max |difference|" in capsys.readouterr().out
    assert pngs(tmp_path) == ["cartpole.png"]


def test_cartpole_gradient_is_reinforce_by_hand_on_the_same_episodes():
    """On episodes of every length up to the cut at 200 steps (a trained-ish policy gives
    long ones): scg's gradient against numpy's, and each episode's length."""
    import scg
    cartpole = load("cartpole")
    for seed, scale in ((1, 0.0), (2, 2.0), (3, 20.0)):
        params = scg.nn.init_mlp(seed, cartpole.SIZES)
        # plus a controller that pushes towards the side the pole leans and turns to
        # (relu(z) - relu(-z) = z of z = theta + theta_dot): longer episodes as it weighs more
        params[0]["W"][:, :2] = np.array([[0, 0, 1, 1], [0, 0, -1, -1]]).T
        params[0]["b"][:2] = 0.0
        params[1]["W"][:2, 0] = params[1]["W"][:2, 0] + scale * np.array([1.0, -1.0])
        E = scg.expectation(cartpole.cartpole, n=cartpole.EPISODES, seed=seed)
        cost, g = scg.value_and_grad(E)(params)
        starts, actions = cartpole.episodes(E)
        by_hand, lengths = cartpole.reinforce_by_hand(params, starts, actions)
        assert cartpole.max_difference(g, by_hand) < 1e-10
        assert -cost == lengths.mean() and lengths.max() == actions.shape[1]


def test_one_script_makes_every_picture_in_the_docs(tmp_path):
    """docs/make_images.py --quick makes each picture of docs/images, no other and none
    missing (each with both axes of every panel labelled: examples/_plots.py checks)."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("sklearn")
    root = EXAMPLES.parent
    sys.path.insert(0, str(root / "docs"))
    try:
        make_images = importlib.import_module("make_images")
    finally:
        sys.path.remove(str(root / "docs"))
    made = make_images.main(["--quick", "--out", str(tmp_path)])
    assert sorted(p.name for p in made) == pngs(tmp_path)
    assert pngs(tmp_path) == sorted(p.name for p in (root / "docs" / "images").glob("*.png"))


def test_rl_losses(tmp_path):
    curves = load("rl_losses").main(steps=30, prompts=8, group=4, out_dir=tmp_path)
    assert list(curves) == ["GRPO", "DAPO", "Dr. GRPO", "RLOO"]
    for recipe, c in curves.items():
        assert c.shape == (30, 2) and np.all(np.isfinite(c))
        assert c[-6:, 0].mean() > c[:6, 0].mean() + 0.2, recipe   # the reward goes up
    assert pngs(tmp_path) == ["rl_losses.png"]
