"""A discrete VAE's gradient through a plate equals the estimator written out by hand.

The hand-written surrogate uses the same draws: per data point b and draw i, the negative
ELBO f[i, b], and the score term log q(z[i, b]) * (f[i, b] - mean of f[j, b] over j != i).
The log q(z) inside f has its parameters' derivative left out (mean zero), as Pyro's
TraceGraph_ELBO leaves it out and scg does.
"""

import numpy as np
import pytest

import scg

B, PIXELS, LATENTS, DRAWS = 6, 12, 5, 4


def logpdf(x, logits):
    return x * logits - scg.softplus(logits)


def model(params, data):
    with scg.plate("data", B):
        q = scg.Bernoulli(logits=data @ params["enc_W"] + params["enc_b"]).to_event(1)
        z = scg.sample("z", q, estimator=scg.Score("loo"))
        logits = z @ params["dec_W"] + params["dec_b"]
        log_lik = np.sum(logpdf(data, logits), axis=-1)
        scg.cost("neg_elbo", -(log_lik + LATENTS * np.log(0.5) - q.log_prob(z)))


def by_hand(params, data, z):
    logits_q = data @ params["enc_W"] + params["enc_b"]                 # (B, L)
    log_q = np.sum(logpdf(z, logits_q), axis=-1)                          # (draws, B)
    logits = z @ params["dec_W"] + params["dec_b"]                        # (draws, B, P)
    f = -(np.sum(logpdf(data, logits), axis=-1) + LATENTS * np.log(0.5)
          - scg.stop_gradient(log_q))
    f_plain = scg.stop_gradient(f)
    baseline = (np.sum(f_plain, axis=0) - f_plain) / (DRAWS - 1)
    score = log_q * (f_plain - baseline)
    return np.sum(np.mean(f + score - scg.stop_gradient(score), axis=0))


@pytest.mark.parametrize("seed", [0, 1])
def test_vae_gradient_matches_the_hand_written_estimator(seed):
    rng = np.random.default_rng(seed)
    data = (rng.random((B, PIXELS)) < 0.4).astype(float)
    params = {"enc_W": rng.normal(0, 0.5, (PIXELS, LATENTS)), "enc_b": rng.normal(0, 0.1, LATENTS),
              "dec_W": rng.normal(0, 0.5, (LATENTS, PIXELS)), "dec_b": np.zeros(PIXELS)}
    E = scg.expectation(model, n=DRAWS, seed=seed)
    value, g = scg.value_and_grad(E)(params, data)
    z = E.last_trace.sites["z"].value
    assert z.shape == (DRAWS, B, LATENTS)
    expected_value, expected = scg.value_and_grad(by_hand)(params, data, z)
    assert value == pytest.approx(expected_value, rel=1e-12)
    for k in params:
        assert np.allclose(g[k], expected[k], rtol=1e-10, atol=1e-12), k
