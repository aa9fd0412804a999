"""Exact marginal likelihoods by enumeration: scg.Marginalize against Pyro's TraceEnum_ELBO
and against the forward algorithm written by hand in numpy (issue 38, section 2).

Two models, their parameters plain arrays (no guide latents: Pyro's guide is empty, so its
ELBO is exactly log p(x)):

* a Gaussian mixture, K components, N points: z_i ~ Categorical(softmax(theta[:K])),
  x_i ~ Normal(theta[K:][z_i], 1), each z_i summed out in a plate;
* an HMM, K states, T steps, Gaussian emissions of unit scale:
  z_0 ~ Categorical(softmax(pi)), z_t ~ Categorical(softmax(A, rows)[z_{t-1}]),
  x_t ~ Normal(locs[z_t], 1), the chain summed out by the forward algorithm
  (scg.markov / pyro.markov).

The cost is -log p(x) in all three systems. The script checks that value and gradient
agree to 1e-10 (relative to 1 + |reference|, the reference being numpy by hand), then
times one value and gradient per system: scg under scg.jit (after its recording calls),
scg eager, Pyro (TraceEnum_ELBO.differentiable_loss + torch.autograd.grad) and numpy by
hand (log-space forward pass, gradient from the backward messages), interleaved, the
median of --repeats. It also times the first two calls of a fresh scg.jit (scg.jit
records on the first `validate` = 2 calls and replays from the third).

Run: python benchmarks/marginal_pyro.py [--repeats 7] [--threads 1]
                                        [--mixture-n 1000] [--hmm-t 200 1000] [--validation]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

# (the root normalized: scg.jit's watch compares file names with scg's directory as
# os.path.abspath spells it, and a ".." in the path makes it take scg for user code)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import timing  # noqa: E402


# ------------------------------------------------------------------ problems

def mixture_problem(N, K, seed=0):
    rng = np.random.default_rng(seed)
    true_locs = np.linspace(-3.0, 3.0, K)
    data = true_locs[rng.integers(K, size=N)] + rng.normal(size=N)
    theta = np.concatenate([rng.normal(0.0, 0.5, size=K), rng.normal(0.0, 2.0, size=K)])
    return data, theta


def hmm_problem(T, K, seed=0):
    rng = np.random.default_rng(seed)
    true_locs = np.linspace(-2.0, 2.0, K)
    stay = 0.9
    P = np.full((K, K), (1 - stay) / (K - 1)) + np.eye(K) * (stay - (1 - stay) / (K - 1))
    z = np.empty(T, dtype=int)
    z[0] = rng.integers(K)
    for t in range(1, T):
        z[t] = rng.choice(K, p=P[z[t - 1]])
    data = true_locs[z] + rng.normal(size=T)
    params = {"A": rng.normal(0.0, 0.5, size=(K, K)), "pi": rng.normal(0.0, 0.5, size=K),
              "locs": rng.normal(0.0, 1.0, size=K)}
    return data, params


# ------------------------------------------------------------------ scg

def scg_mixture(data, K):
    import scg
    N = data.shape[0]

    def model(theta):
        weights, locs = scg.softmax(theta[:K]), theta[K:]
        with scg.plate("data", N):
            z = scg.sample("z", scg.Categorical(weights), estimator=scg.Marginalize())
            scg.sample("x", scg.Normal(locs[z], 1.0), obs=data)

    return scg.expectation(model, n=1)


def scg_hmm(data, K):
    import scg
    T = data.shape[0]

    def model(params):
        trans, init = scg.softmax(params["A"], axis=-1), scg.softmax(params["pi"])
        locs = params["locs"]
        z = None
        for t in scg.markov(range(T)):
            probs = init if t == 0 else trans[z]
            z = scg.sample(f"z{t}", scg.Categorical(probs), estimator=scg.Marginalize())
            scg.sample(f"x{t}", scg.Normal(locs[z], 1.0), obs=data[t])

    return scg.expectation(model, n=1)


# ------------------------------------------------------------------ numpy by hand

LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def _log_softmax(a, axis=-1):
    m = np.max(a, axis=axis, keepdims=True)
    s = a - m
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def numpy_mixture(data, K):
    """-log p(x) of the mixture and its gradient in theta, by hand."""
    def value_and_grad(theta):
        logw = _log_softmax(theta[:K])
        locs = theta[K:]
        diff = data[:, None] - locs[None, :]                     # (N, K)
        joint = logw[None, :] - 0.5 * diff * diff - LOG_SQRT_2PI  # log w_k + log N(x_i|mu_k)
        m = np.max(joint, axis=1, keepdims=True)
        e = np.exp(joint - m)
        s = np.sum(e, axis=1, keepdims=True)
        logp = np.log(s[:, 0]) + m[:, 0]
        r = e / s                                                 # responsibilities
        rsum = np.sum(r, axis=0)
        g_logits = -(rsum - data.shape[0] * np.exp(logw))
        g_locs = -np.sum(r * diff, axis=0)
        return -np.sum(logp), np.concatenate([g_logits, g_locs])
    return value_and_grad


def numpy_hmm(data, K):
    """-log p(x) of the HMM and its gradient, by hand: the forward pass in log space (each
    step one matrix product of the exponentiated messages, shifted by their maximum),
    the backward messages likewise, and the gradient from the posterior marginals."""
    T = data.shape[0]

    def value_and_grad(params):
        logP = _log_softmax(params["A"], axis=-1)
        logpi = _log_softmax(params["pi"])
        locs = params["locs"]
        P = np.exp(logP)
        diff = data[:, None] - locs[None, :]                     # (T, K)
        loge = -0.5 * diff * diff - LOG_SQRT_2PI                 # log N(x_t | locs_k)
        # forward: alpha[t, j] = log p(x_0..x_t, z_t = j)
        alpha = np.empty((T, K))
        alpha[0] = logpi + loge[0]
        for t in range(1, T):
            a = alpha[t - 1]
            m = np.max(a)
            alpha[t] = np.log(np.exp(a - m) @ P) + m + loge[t]
        last = alpha[T - 1]
        m = np.max(last)
        logZ = np.log(np.sum(np.exp(last - m))) + m
        # backward: beta[t, i] = log p(x_{t+1}..x_{T-1} | z_t = i)
        beta = np.empty((T, K))
        beta[T - 1] = 0.0
        for t in range(T - 2, -1, -1):
            b = beta[t + 1] + loge[t + 1]
            m = np.max(b)
            beta[t] = np.log(P @ np.exp(b - m)) + m
        gamma = np.exp(alpha + beta - logZ)                      # p(z_t | x), (T, K)
        # expected transition counts: sum_t p(z_{t-1} = i, z_t = j | x)
        # (each step's factors shifted by their maxima, the shifts put back in one weight)
        a, b = alpha[:-1], beta[1:] + loge[1:]                   # (T-1, K) each
        ma, mb = np.max(a, axis=1, keepdims=True), np.max(b, axis=1, keepdims=True)
        left = np.exp(a - ma) * np.exp(ma + mb - logZ)
        counts = P * (left.T @ np.exp(b - mb))                   # (K, K)
        # d log Z / d A through the rows' softmax; d / d pi likewise; d / d locs
        g_A = counts - P * np.sum(counts, axis=1, keepdims=True)
        g_pi = gamma[0] - np.exp(logpi)
        g_locs = np.sum(gamma * diff, axis=0)
        return -logZ, {"A": -g_A, "pi": -g_pi, "locs": -g_locs}
    return value_and_grad


# ------------------------------------------------------------------ Pyro

def pyro_mixture(data, K):
    import pyro
    import pyro.distributions as dist
    import torch
    from pyro.infer import TraceEnum_ELBO
    x = torch.tensor(data)
    N = len(data)

    def model(theta):
        weights, locs = torch.softmax(theta[:K], -1), theta[K:]
        with pyro.plate("data", N):
            z = pyro.sample("z", dist.Categorical(weights), infer={"enumerate": "parallel"})
            pyro.sample("x", dist.Normal(locs[z], 1.0), obs=x)

    def guide(theta):
        pass

    elbo = TraceEnum_ELBO(max_plate_nesting=1)

    def value_and_grad(theta_np):
        theta = torch.tensor(theta_np, requires_grad=True)
        loss = elbo.differentiable_loss(model, guide, theta)
        (g,) = torch.autograd.grad(loss, [theta])
        return loss.item(), g.numpy()
    return value_and_grad


def pyro_hmm(data, K):
    import pyro
    import pyro.distributions as dist
    import torch
    from pyro.infer import TraceEnum_ELBO
    x = torch.tensor(data)
    T = len(data)

    def model(A, pi, locs):
        trans, init = torch.softmax(A, -1), torch.softmax(pi, -1)
        z = None
        for t in pyro.markov(range(T)):
            probs = init if t == 0 else trans[z]
            z = pyro.sample(f"z{t}", dist.Categorical(probs), infer={"enumerate": "parallel"})
            pyro.sample(f"x{t}", dist.Normal(locs[z], 1.0), obs=x[t])

    def guide(A, pi, locs):
        pass

    elbo = TraceEnum_ELBO(max_plate_nesting=0)
    names = ("A", "pi", "locs")

    def value_and_grad(params):
        leaves = [torch.tensor(params[k], requires_grad=True) for k in names]
        loss = elbo.differentiable_loss(model, guide, *leaves)
        grads = torch.autograd.grad(loss, leaves)
        return loss.item(), {k: g.numpy() for k, g in zip(names, grads)}
    return value_and_grad


# ------------------------------------------------------------------ checks and timing

def _flat(g):
    if isinstance(g, dict):
        return np.concatenate([np.ravel(g[k]) for k in sorted(g)])
    return np.ravel(np.asarray(g))


def agreement(ref, other):
    """max |difference| / (1 + |reference|) over the value and the gradient's coordinates,
    and max |difference|."""
    (v0, g0), (v1, g1) = ref, other
    a, b = np.append(_flat(g0), v0), np.append(_flat(g1), v1)
    d = np.abs(a - b)
    return float(np.max(d / (1.0 + np.abs(a)))), float(np.max(d))


def run_case(name, make_problem, makers, repeats, first_calls):
    import scg
    data, params = make_problem()
    E = makers["scg"](data)
    eager = scg.value_and_grad(E)
    systems = {"scg.jit": None, "scg eager": eager, "pyro": makers["pyro"](data),
               "numpy": makers["numpy"](data)}
    # the first calls of fresh scg.jit functions (the first two record)
    first, second = [], []
    for _ in range(first_calls):
        fresh = scg.jit(scg.value_and_grad(makers["scg"](data)))
        t0 = time.perf_counter()
        fresh(params)
        t1 = time.perf_counter()
        fresh(params)
        t2 = time.perf_counter()
        first.append(t1 - t0)
        second.append(t2 - t1)
    jitted = scg.jit(scg.value_and_grad(E))
    for _ in range(4):
        jitted(params)
    if not jitted.stats["replays"]:
        raise RuntimeError(f"scg.jit did not replay: {jitted.explain()}")
    systems["scg.jit"] = jitted
    ref = systems["numpy"](params)
    errors = {k: agreement(ref, f(params)) for k, f in systems.items() if k != "numpy"}
    times = timing.time_interleaved({k: (lambda f=f: f(params)) for k, f in systems.items()},
                                    repeats)
    print(f"\n## {name}   -log p(x) = {ref[0]:.12g}")
    print("agreement with numpy by hand, value and gradient, max |diff| / (1 + |ref|) "
          "(max |diff|): " + ", ".join(f"{k} {r:.1e} ({a:.1e})" for k, (r, a) in errors.items()))
    ok = all(r <= 1e-10 for r, a in errors.values())
    ok_abs = all(a <= 1e-10 for r, a in errors.values())
    print(f"all within 1e-10: relative {'yes' if ok else 'NO'}, absolute "
          f"{'yes' if ok_abs else 'NO'}")
    print("| system | median ms per value and gradient |")
    print("|---|---|")
    for k, v in times.items():
        print(f"| {k} | {v * 1e3:.3f} |")
    print(f"scg.jit / pyro {times['scg.jit'] / times['pyro']:.4f} (target <= 0.1), "
          f"scg.jit / numpy {times['scg.jit'] / times['numpy']:.2f} (target <= 5); "
          f"scg eager / pyro {times['scg eager'] / times['pyro']:.4f}, "
          f"scg eager / numpy {times['scg eager'] / times['numpy']:.2f}")
    print(f"fresh scg.jit functions: first call "
          + ", ".join(f"{t * 1e3:.1f}" for t in first) + " ms, second "
          + ", ".join(f"{t * 1e3:.1f}" for t in second) + " ms (both record; the first "
          f"function of the process also compiles scg's kernels); median first / pyro "
          f"{np.median(first) / times['pyro']:.2f}")
    return errors, times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch's threads")
    parser.add_argument("--mixture-n", type=int, default=1000)
    parser.add_argument("--mixture-k", type=int, default=4)
    parser.add_argument("--hmm-t", type=int, nargs="*", default=[200, 1000])
    parser.add_argument("--hmm-k", type=int, default=8)
    parser.add_argument("--first-calls", type=int, default=3,
                        help="fresh scg.jit functions whose first calls are timed")
    parser.add_argument("--validation", action="store_true",
                        help="keep the checks of the distributions' arguments on in both "
                             "(scg.distributions.set_validation, pyro.enable_validation); "
                             "off by default, each system's fastest setting")
    args = parser.parse_args(argv)
    import pyro
    import torch
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(args.threads)
    import scg
    pyro.enable_validation(args.validation)
    scg.distributions.set_validation(args.validation)
    print(timing.command_line())
    print(f"numpy {np.__version__}, torch {torch.__version__} ({args.threads} thread(s)), "
          f"pyro {pyro.__version__}, float64, argument checks "
          f"{'on' if args.validation else 'off'} in scg and Pyro")
    warnings.simplefilter("ignore", UserWarning)
    K = args.mixture_k
    run_case(f"Gaussian mixture, N = {args.mixture_n}, K = {K}",
             lambda: mixture_problem(args.mixture_n, K),
             {"scg": lambda d: scg_mixture(d, K), "pyro": lambda d: pyro_mixture(d, K),
              "numpy": lambda d: numpy_mixture(d, K)},
             args.repeats, args.first_calls)
    K = args.hmm_k
    for T in args.hmm_t:
        run_case(f"HMM, T = {T}, K = {K}, Gaussian emissions",
                 lambda: hmm_problem(T, K),
                 {"scg": lambda d: scg_hmm(d, K), "pyro": lambda d: pyro_hmm(d, K),
                  "numpy": lambda d: numpy_hmm(d, K)},
                 args.repeats, args.first_calls)


if __name__ == "__main__":
    main()
