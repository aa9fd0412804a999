"""Studies on a Dask cluster: scg.compare and scg.grad_samples with client= give the
in-process numbers for the same seed and chunk, also when a worker process is killed in the
middle of a study; models, expectations, distributions and estimators pickle (cloudpickle),
also a model loaded from a file with runpy.run_path.

One LocalCluster with 2 worker processes serves the whole module."""

import inspect
import os
import runpy
import signal
import threading
import time

import numpy as np
import pytest

import scg
from tests.estimators.registry import ESTIMATORS

THETA = np.array([2.0, 1.0])  # the worked example: x ~ N(theta[0], theta[1]), f = x^2
W = np.array([1.0, -2.0, 0.5])
PHI = np.array([0.3, 0.2, -0.4, 0.9])  # the discrete model: x ~ N(phi[0], 1), b ~ Bern(phi[1:])


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    import dask

    # a task on a killed worker counts as a failure; allow more than one kill per task
    with dask.config.set({"distributed.scheduler.allowed-failures": 10}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster:
            with distributed.Client(cluster) as c:
                c.wait_for_workers(2, timeout=60)
                yield c


def worked_example():
    # a closure, so that it pickles by value (the workers cannot import this test module)
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], theta[1]))
        return x ** 2
    return model


def discrete_model():
    w = W.copy()

    def model(phi):
        x = scg.sample("x", scg.Normal(phi[0], 1.0))
        b = scg.sample("b", scg.Bernoulli(logits=phi[1:]).to_event(1))
        return (b @ w + x) ** 2
    return model


def discrete_exact_grad(phi, h=1e-6):
    """d/dphi E[(b @ w + x)^2], x ~ N(phi[0], 1), b_i ~ Bernoulli(sigmoid(phi[1 + i]))."""
    def value(phi):
        p = 1 / (1 + np.exp(-phi[1:]))
        mean_s = W @ p
        return mean_s ** 2 + W ** 2 @ (p * (1 - p)) + 2 * mean_s * phi[0] + phi[0] ** 2 + 1
    eye = np.eye(phi.size)
    return np.array([(value(phi + h * e) - value(phi - h * e)) / (2 * h) for e in eye])


def assert_rows_equal(a, b, rtol=1e-12):
    assert list(a) == list(b)
    for label in a:
        ra, rb = a[label], b[label]
        assert ra.n == rb.n, label
        assert ra.evals_per_draw == rb.evals_per_draw, label
        for name in ("mean", "var", "stderr", "bias", "z"):
            if getattr(rb, name) is None:  # (bias and z without a reference)
                assert getattr(ra, name) is None, (label, name)
                continue
            np.testing.assert_allclose(getattr(ra, name), getattr(rb, name), rtol=rtol,
                                       atol=0, err_msg=f"{label}: {name}")


# -- the cluster gives the in-process numbers -----------------------------------------------

def test_compare_on_the_cluster_equals_the_in_process_run(client):
    cases = [
        (worked_example(), THETA, np.array([4.0, 2.0]),
         {"pathwise": "pathwise", "loo": scg.Score("loo"), "score": "score",
          "mvd": scg.MeasureValued(), "pairs": scg.Pathwise(antithetic=True)}),
        (discrete_model(), PHI, discrete_exact_grad(PHI),
         {"enumerate": scg.Enumerate(), "disarm": {"b": scg.DisARM()},
          "loo": scg.Score("loo"), "rebar": {"b": scg.REBAR(learn=False)},
          "relax": {"b": scg.RELAX()}}),
    ]
    for model, theta, reference, estimators in cases:
        kwargs = dict(estimators=estimators, n=20_000, chunk=2_000, reference=reference)
        remote = scg.compare(model, theta, client=client, seed=7, **kwargs)
        local = scg.compare(model, theta, seed=7, **kwargs)
        assert_rows_equal(remote, local)
        for label in estimators:
            # (antithetic pairs: the statistics are those of the 10 000 pair means)
            assert remote[label].n == (10_000 if label == "pairs" else 20_000)
            assert np.all(np.isfinite(remote[label].mean))
            # unbiased estimators: the reference within sampling error
            assert np.all(np.abs(remote[label].z) < 5), (label, remote[label].z)
        # a shorter last chunk, and another seed, are still the same
        # (a SeedSequence is spawned from, which changes it: a fresh one for each run)
        kwargs.update(n=9_400, chunk=1_000)
        assert_rows_equal(
            scg.compare(model, theta, client=client, seed=np.random.SeedSequence(11), **kwargs),
            scg.compare(model, theta, seed=np.random.SeedSequence(11), **kwargs))


def test_grad_samples_on_the_cluster_equals_the_in_process_run(client):
    for model, theta, estimators in [(worked_example(), THETA, scg.Score("loo")),
                                     (discrete_model(), PHI, {"b": scg.DisARM()})]:
        E = scg.expectation(model, n=12_000, seed=3, estimators=estimators)
        E2 = scg.expectation(model, n=12_000, seed=3, estimators=estimators)
        remote_fn = scg.grad_samples(E, chunk=1_500, client=client)
        local_fn = scg.grad_samples(E2, chunk=1_500)
        for _ in range(2):  # fresh draws on each call, the same on both sides
            remote, local = remote_fn(theta), local_fn(theta)
            assert remote.samples is None and local.samples is None
            assert remote.n == local.n == 12_000
            for name in ("mean", "var", "stderr"):
                np.testing.assert_allclose(getattr(remote, name), getattr(local, name),
                                           rtol=1e-12, atol=0, err_msg=name)
        assert not np.array_equal(remote_fn(theta).mean, remote.mean)


def test_a_model_loaded_with_run_path_runs_on_the_cluster(client, tmp_path):
    path = tmp_path / "study.py"
    path.write_text(
        "import numpy as np\n"
        "import scg\n"
        "\n"
        "OFFSET = 0.5\n"
        "params = np.array([2.0, 1.0])\n"
        "estimators = {'pathwise': 'pathwise', 'loo': scg.Score(baseline='loo')}\n"
        "\n"
        "def f(x):\n"
        "    return x ** 2 + OFFSET\n"
        "\n"
        "def model(theta):\n"
        "    x = scg.sample('x', scg.Normal(theta[0], theta[1]))\n"
        "    return f(x)\n")
    ns = runpy.run_path(str(path))
    assert ns["model"].__module__ == "<run_path>"  # no module a worker could import
    kwargs = dict(estimators=ns["estimators"], n=8_000, chunk=1_000, seed=0,
                  reference=np.array([4.0, 2.0]))
    remote = scg.compare(ns["model"], ns["params"], client=client, **kwargs)
    assert_rows_equal(remote, scg.compare(ns["model"], ns["params"], **kwargs))
    assert np.all(np.abs(remote["pathwise"].z) < 5)


# -- a worker lost in the middle of a study ---------------------------------------------------

def slow_model(log):
    """The worked example; on a Dask worker, each call first writes "pid time" to `log`
    and sleeps 0.2 s (in this process it runs at full speed)."""
    def model(theta):
        import time as _time

        from distributed import get_worker
        try:
            get_worker()
        except ValueError:  # not on a worker
            pass
        else:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, f"{os.getpid()} {_time.time()!r}\n".encode())
            finally:
                os.close(fd)
            _time.sleep(0.2)
        x = scg.sample("x", scg.Normal(theta[0], theta[1]))
        return x ** 2
    return model


def test_a_killed_worker_s_chunks_run_again_and_count_once(client, tmp_path):
    log = str(tmp_path / "calls.log")
    model = slow_model(log)
    pids = client.run(os.getpid)
    assert len(pids) == 2
    chunks, chunk = 40, 500
    killed, errors = {}, []

    def calls():
        try:
            with open(log) as f:
                return [(int(p), float(t)) for p, t in (line.split() for line in f)]
        except FileNotFoundError:
            return []

    def kill_a_busy_worker():
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                seen = calls()
                # after a few chunks, a call that started less than 0.1 s ago: its worker
                # is in the middle of its 0.2 s sleep, with a chunk in flight
                if len(seen) >= 8 and seen[-1][0] in pids.values() and \
                        time.time() - seen[-1][1] < 0.1:
                    pid = seen[-1][0]
                    os.kill(pid, signal.SIGKILL)
                    killed.update(pid=pid, calls_before=len(seen), at=time.time())
                    return
                time.sleep(0.005)
            errors.append("no worker was killed")
        except Exception as e:  # (reported by the test's thread)
            errors.append(repr(e))

    killer = threading.Thread(target=kill_a_busy_worker, daemon=True)
    killer.start()
    kwargs = dict(estimators={"pathwise": "pathwise", "loo": scg.Score("loo")},
                  n=chunks * chunk // 2, chunk=chunk, seed=5, reference=np.array([4.0, 2.0]))
    remote = scg.compare(model, THETA, client=client, **kwargs)
    finished = time.time()
    killer.join(timeout=60)
    assert not errors, errors
    assert killed and killed["at"] < finished, killed  # killed while the study ran
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it
    after = client.run(os.getpid)
    assert killed["pid"] not in after.values() and len(after) == 2

    ran = calls()
    assert sum(pid == killed["pid"] for pid, _ in ran) >= 1
    # the chunk in flight on the killed worker ran again (with the chunks whose results
    # were lost with it): more calls than chunks ...
    assert len(ran) > chunks
    local = scg.compare(model, THETA, **kwargs)
    # ... and each chunk counted once: exactly the in-process numbers
    assert_rows_equal(remote, local)
    for label in ("pathwise", "loo"):
        assert remote[label].n == chunks * chunk // 2


# -- pickling --------------------------------------------------------------------------------

def distribution_examples():
    """Every family of scg.distributions.__all__, with simple parameters."""
    tril = np.array([[1.0, 0.0], [0.3, 0.8]])
    return {
        "Normal": scg.Normal(0.5, 1.5),
        "MultivariateNormal": scg.MultivariateNormal(np.array([0.1, -0.2]), tril),
        "LogNormal": scg.LogNormal(0.1, 0.7),
        "Uniform": scg.Uniform(-1.0, 2.0),
        "Exponential": scg.Exponential(1.5),
        "Laplace": scg.Laplace(0.2, 1.1),
        "Gumbel": scg.Gumbel(0.2, 1.1),
        "RelaxedBernoulli": scg.RelaxedBernoulli(0.5, logits=np.array([0.3, -1.0])),
        "RelaxedOneHotCategorical": scg.RelaxedOneHotCategorical(0.7, np.array([0.2, -0.1, 0.4])),
        "Gamma": scg.Gamma(2.5, 1.5),
        "Beta": scg.Beta(2.0, 3.0),
        "Dirichlet": scg.Dirichlet(np.array([1.0, 2.0, 3.0])),
        "Bernoulli": scg.Bernoulli(probs=0.3),
        "Categorical": scg.Categorical(logits=np.array([0.1, -0.5, 0.7])),
        "Poisson": scg.Poisson(3.0),
        "Binomial": scg.Binomial(5, 0.4),
        "Geometric": scg.Geometric(0.3),
        "OneHotCategorical": scg.OneHotCategorical(probs=np.array([0.2, 0.3, 0.5])),
        "Independent": scg.Normal(np.zeros(3), np.ones(3)).to_event(1),
        "StudentT": scg.StudentT(4.0, 0.5, 1.5),
        "Cauchy": scg.Cauchy(0.5, 1.5),
        "HalfNormal": scg.HalfNormal(1.5),
        "HalfCauchy": scg.HalfCauchy(1.5),
        "NegativeBinomial": scg.NegativeBinomial(3.0, logits=0.2),
        "Multinomial": scg.Multinomial(4, probs=np.array([0.2, 0.3, 0.5])),
        "MixtureSameFamily": scg.MixtureSameFamily(
            scg.Categorical(probs=np.array([0.4, 0.6])),
            scg.Normal(np.array([-1.0, 1.0]), np.array([0.5, 2.0]))),
        "TransformedDistribution": scg.TransformedDistribution(
            scg.Normal(0.2, 0.7), [scg.transforms.AffineTransform(1.0, 2.0),
                                   scg.transforms.ExpTransform()]),
    }


def test_every_distribution_family_round_trips_through_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    examples = distribution_examples()
    families = {name for name in scg.distributions.__all__
                if inspect.isclass(getattr(scg.distributions, name))
                and issubclass(getattr(scg.distributions, name), scg.Distribution)
                and name != "Distribution"}
    assert families <= set(examples), families - set(examples)
    for name, d in examples.items():
        again = cloudpickle.loads(cloudpickle.dumps(d))
        assert type(again) is type(d) and repr(again) == repr(d), name
        assert again.batch_shape == d.batch_shape and again.event_shape == d.event_shape
        values = d.sample(np.random.default_rng(0), (5,))
        np.testing.assert_array_equal(again.sample(np.random.default_rng(0), (5,)), values,
                                      err_msg=name)
        np.testing.assert_allclose(again.log_prob(values), d.log_prob(values), rtol=1e-14,
                                   err_msg=name)


def test_every_estimator_round_trips_through_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    for est in [case.make() for case in ESTIMATORS]:
        again = cloudpickle.loads(cloudpickle.dumps(est))
        assert type(again) is type(est) and repr(again) == repr(est)
        assert vars(again).keys() == vars(est).keys()


def test_a_closure_model_and_an_expectation_round_trip_through_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    scale = np.array([1.0, 2.0])

    def helper(x):
        return x @ scale

    def model(theta):
        x = scg.sample("x", scg.Normal(theta[:2], theta[2]).to_event(1))
        b = scg.sample("b", scg.Bernoulli(logits=theta[0]))
        return helper(x) ** 2 + b

    theta = np.array([0.5, -0.3, 1.2])
    model2 = cloudpickle.loads(cloudpickle.dumps(model))
    g = scg.grad(scg.expectation(model, n=500, seed=1))(theta)
    np.testing.assert_array_equal(scg.grad(scg.expectation(model2, n=500, seed=1))(theta), g)

    # an expectation after calls (its generator and a moving-average baseline's state
    # moved on): the copy continues exactly where the original is
    E = scg.expectation(model, n=500, seed=2,
                        estimators={"b": scg.Score(scg.baselines.MovingAverage(0.7))})
    for _ in range(3):
        scg.grad(E)(theta)
    assert E.last_trace is not None
    E2 = cloudpickle.loads(cloudpickle.dumps(E))
    assert E2.last_trace is None
    for _ in range(2):
        np.testing.assert_array_equal(scg.grad(E2)(theta), scg.grad(E)(theta))
    np.testing.assert_array_equal(E2(theta), E(theta))
    gs, gs2 = scg.grad_samples(E)(theta), scg.grad_samples(E2)(theta)
    np.testing.assert_array_equal(gs2.samples, gs.samples)


def _blackbox_model():
    simulate = scg.blackbox(lambda x: np.round(x) ** 2)

    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return np.sum(simulate(x))
    return model


def test_a_jitted_step_and_a_blackbox_model_round_trip_through_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    for model, theta in ((_blackbox_model(), np.array([0.3, -0.4])),
                         (worked_example(), THETA)):
        E = scg.expectation(model, n=400, seed=3)
        step = scg.jit(scg.grad(E))
        for _ in range(4):
            step(theta)
        step2 = cloudpickle.loads(cloudpickle.dumps(step))
        # (the copy records again: recordings belong to the process that made them)
        assert step2.stats["calls"] == 0 and step2.validate == step.validate
        for _ in range(4):
            np.testing.assert_array_equal(step2(theta), step(theta))
        replays = step.stats["replays"] > 0
        assert (step2.stats["replays"] > 0) == replays  # (the pickled one replays too)
    assert replays, step.explain()  # (the worked example replays)


@pytest.mark.parametrize("jitted", [False, True], ids=["model", "jitted_model"])
def test_compare_of_a_blackbox_model_on_the_cluster(client, jitted):
    """A blackbox model, and the same model under scg.jit after it replayed (a jitted
    function holds locks and recordings: it pickles as its function and settings)."""
    theta = np.array([0.3, -0.4])
    kwargs = dict(estimators={"score": "score", "loo": scg.Score("loo")}, n=4_000,
                  chunk=1_000, seed=5)
    model = _blackbox_model()
    if jitted:
        model = scg.jit(model)
        step = scg.jit(scg.grad(scg.expectation(worked_example(), n=50, seed=0)))
        for _ in range(4):
            step(THETA)
        assert step.stats["replays"] > 0
        kwargs["estimators"]["loo_again"] = scg.Score("loo")
        model.step = step  # (a replayed jitted function reached by the model)
    remote = scg.compare(model, theta, client=client, **kwargs)
    assert_rows_equal(remote, scg.compare(model, theta, **kwargs))


def _multi_sample_models():
    """Closures (pickled by value): an IWAE bound of coins with VIMCO, one of a Gaussian
    with DReG, and a token bandit with GRPO and the unordered set estimator, each with its
    estimators."""
    table = np.array([[-1.2, 0.4], [-0.3, -2.0]])
    rewards = np.array([[1.0, 0.0, 2.5], [0.3, 0.9, 0.1]])

    def coins(phi):
        with scg.plate("particles", 3):
            q = scg.Bernoulli(logits=np.broadcast_to(phi, (3, 2))).to_event(1)
            z = scg.sample("z", q)
            a, b = z[..., 0], z[..., 1]
            log_w = table[0, 0] * (1 - a) * (1 - b) + table[0, 1] * (1 - a) * b + \
                table[1, 0] * a * (1 - b) + table[1, 1] * a * b - q.log_prob(z)
        return -scg.logmeanexp(log_w, plate="particles")

    def gaussian(theta):
        with scg.plate("particles", 4):
            q = scg.Normal(theta[0] * np.ones(4), np.exp(theta[1]) * np.ones(4))
            z = scg.sample("z", q)
            log_w = scg.Normal(0.0, 1.0).log_prob(z) + scg.Normal(z, 1.0).log_prob(1.3) - \
                q.log_prob(z)
        return -scg.logmeanexp(log_w, plate="particles")

    def bandit(logits):
        with scg.plate("prompts", 2):
            token = scg.sample("token", scg.Categorical(logits=logits))
            return -np.sum(rewards * (token[..., None] == np.arange(3)), axis=-1)

    return [
        (coins, np.array([0.4, -0.7]), {"vimco": scg.VIMCO(), "loo": scg.Score("loo")}),
        (gaussian, np.array([0.4, -0.2]), {"dreg": scg.Pathwise(dreg=True),
                                           "pathwise": scg.Pathwise()}),
        (bandit, np.zeros((2, 3)), {"grpo": scg.Score(scg.baselines.GRPO("batch")),
                                    "dr grpo": scg.Score(scg.baselines.GRPO(None)),
                                    "unordered set": scg.UnorderedSet(2)}),
    ]


def test_multi_sample_and_group_estimators_on_the_cluster_equal_the_in_process_run(client):
    import warnings
    for model, theta, estimators in _multi_sample_models():
        kwargs = dict(estimators=estimators, n=4_000, chunk=8, seed=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scg.BiasWarning)
            remote = scg.compare(model, theta, client=client, **kwargs)
            local = scg.compare(model, theta, **kwargs)
        assert_rows_equal(remote, local)
        for label in estimators:
            assert np.all(np.isfinite(remote[label].mean)), label
