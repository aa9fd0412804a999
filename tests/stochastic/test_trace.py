"""scg.trace: sites, per-draw costs, the graph with node kinds, and the explanation."""

import numpy as np

import scg


def model(theta):
    x = scg.sample("x", scg.Normal(theta["mu"], np.exp(theta["log_sigma"])))
    a = scg.sample("a", scg.Bernoulli(probs=scg.sigmoid(x)))
    scg.cost("penalty", 0.1 * x ** 2)
    return (a - 0.3) ** 2


THETA = {"mu": 0.5, "log_sigma": -1.0}


def test_sites_and_costs():
    t = scg.trace(model, THETA, n=6, seed=0)
    assert list(t.sites) == ["x", "a"]
    assert t.sites["x"].kind == "pathwise" and t.sites["a"].kind == "score"
    assert np.shape(t.sites["x"].value) == (6,)
    x = np.asarray(t.sites["x"].value)
    a = np.asarray(t.sites["a"].value)
    assert set(t.costs) == {"penalty", "return"}
    assert np.allclose(t.costs["penalty"], 0.1 * x ** 2)
    assert np.allclose(t.costs["return"], (a - 0.3) ** 2)
    assert isinstance(t.sites["a"].estimator, scg.Score)


def test_graph_has_kinds_and_the_right_edges():
    g = scg.trace(model, THETA, n=2, seed=0).graph
    kinds = {n: d["kind"] for n, d in g.nodes(data=True)}
    assert kinds["x"] == "pathwise" and kinds["a"] == "score"
    assert kinds["penalty"] == kinds["return"] == "cost"
    assert kinds["arg0['mu']"] == kinds["arg0['log_sigma']"] == "param"
    assert set(kinds.values()) == {"param", "deterministic", "pathwise", "score", "cost"}
    assert g.has_edge("arg0['mu']", "x") and g.has_edge("arg0['log_sigma']", "x")
    import networkx as nx
    assert nx.has_path(g, "x", "a") and nx.has_path(g, "a", "return")
    assert not nx.has_path(g, "a", "penalty")


def test_jumps_and_blackboxes_are_marked():
    box = scg.blackbox(lambda v: v * 2)

    def m(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return np.floor(x) + box(x)

    g = scg.trace(m, 0.0, n=2, seed=0).graph
    ops = {d["op"]: d for _, d in g.nodes(data=True) if d["kind"] == "deterministic"}
    assert ops["floor"]["jump"] and ops["<lambda>"]["blackbox"]


def test_explain_says_what_and_why():
    text = scg.trace(model, THETA, n=4, seed=0).explain()
    assert "x ~ Normal" in text and "pathwise" in text
    assert "a ~ Bernoulli" in text and "no reparameterization path" in text
    assert "leave-one-out" in text
    assert "grad log p(a) * (return - b)" in text          # downstream costs only
    assert "penalty: pathwise gradient through x" in text
    assert "passes pathwise gradients to x" in text
