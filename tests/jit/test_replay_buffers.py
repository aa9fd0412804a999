"""A replay's buffers for its large ufunc results (scg/jit/buffers.py).

The plan on hand-written programs: a buffer is not handed on while a view of its value is
alive, nor used for a value that leaves the program. Then replays of functions on large
arrays: every bit of the eager result on every call, results kept from earlier calls
left alone by later ones, the same with two threads replaying at once.
"""

import threading

import numpy as np

import scg
from scg.jit import buffers

from .compare import same_bits

BIG = (256, 128)  # 256 KB of float64: above buffers.MIN_BYTES
STRIDES = ((1024, 8), (1024, 8))  # (the recorded operands': two C-contiguous BIG arrays)
LAYOUT = (BIG, np.dtype(float), "C", STRIDES)


def _source(jitted):
    return next(e.source for e in jitted._entries.values() if e.source)


def test_plan_hands_a_buffer_on_once_its_value_is_dead():
    body = ["v2 = c0(v0, v1)",      # buffered
            "v3 = c0(v2, v1)",      # buffered; v2 dead after this line
            "v4 = c0(v3, v3)",      # may take v2's buffer
            "v5 = c1(v4, axis=0)"]  # a reduction (fresh): returned
    planned, held = buffers.plan(body, ["v5"], {2: LAYOUT, 3: LAYOUT, 4: LAYOUT}, {2, 3, 4, 5})
    assert planned[:3] == [f"v2 = into(c0, b0, {STRIDES}, v0, v1)",
                           f"v3 = into(c0, b1, {STRIDES}, v2, v1)",
                           f"v4 = into(c0, b0, {STRIDES}, v3, v3)"]
    assert sorted(held) == ["b0", "b1"] and held["b0"].shape == BIG


def test_plan_keeps_a_buffer_while_a_view_of_its_value_lives():
    body = ["v2 = c0(v0, v1)",          # buffered
            "v3 = v2.reshape((32768,))",  # may be a view of v2's buffer
            "v4 = c0(v0, v0)",          # v2 is dead, but v3 is not: a new buffer
            "v5 = c2(v3, v4)",
            "v6 = c1(v5, axis=0)"]
    planned, held = buffers.plan(body, ["v6"], {2: LAYOUT, 4: LAYOUT}, {2, 4, 5, 6})
    assert planned[0].startswith("v2 = into(c0, b0,") and \
        planned[2].startswith("v4 = into(c0, b1,")


def test_plan_gives_no_buffer_to_what_leaves_the_program():
    body = ["v2 = c0(v0, v1)",          # returned through a view
            "v3 = v2.reshape((32768,))",
            "v4 = c0(v0, v0)",          # handed to a reference (state, a user's object)
            "v5 = r0(v4)",
            "v6 = c0(v1, v1)",          # read by an effect
            "r1.update(v6)"]
    planned, held = buffers.plan(body, ["v3", "v5"], {2: LAYOUT, 4: LAYOUT, 6: LAYOUT},
                                 {2, 4, 6})
    assert held == {} and planned == body


def test_plan_leaves_small_and_unnoted_results_alone():
    buffered = {}
    buffers.note_output(buffered, 1, np.add, np.ones(10))          # small
    buffers.note_output(buffered, 2, np.add, np.ones(BIG)[:, ::2])  # not contiguous
    buffers.note_output(buffered, 3, np.divmod, np.ones(BIG))      # two results
    x = np.ones(BIG).T
    buffers.note_output(buffered, 4, np.add, x + 1.0, (x, 1.0))   # Fortran order
    assert buffered == {4: (BIG[::-1], np.dtype(float), "F", ((8, 1024), None))}


def _mlp_loss(params, x, tokens):
    lp = scg.log_softmax(scg.nn.mlp(params, x, activation=np.tanh), axis=-1)
    logp = np.take_along_axis(lp, tokens[..., None], axis=-1)[..., 0]
    return -np.mean(np.exp(logp - 0.1) * logp)


def _mlp_problem(seed):
    rng = np.random.default_rng(seed)
    params = scg.nn.init_mlp(rng, [12, 64, 16], init="glorot")
    x = rng.normal(size=(128, 8, 12))
    tokens = rng.integers(0, 16, size=(128, 8))
    return params, x, tokens


def test_replayed_gradient_of_large_arrays_is_the_eager_one_on_every_call():
    step = scg.jit(scg.grad(_mlp_loss))
    kept = []
    for seed in range(6):
        args = _mlp_problem(seed)
        got = step(*args)
        assert same_bits(got, scg.grad(_mlp_loss)(*args)), seed
        kept.append((args, got))
    assert step.stats["replays"] >= 3
    assert "into(" in _source(step)
    for args, got in kept:  # (no later call wrote into an earlier result)
        assert same_bits(got, scg.grad(_mlp_loss)(*args))


def test_results_that_are_views_of_ufunc_results_are_not_overwritten():
    def f(x):
        y = np.tanh(x) * 2.0
        return y.reshape(-1)[::3], np.exp(y) + 1.0, np.sum(y * y)

    jf = scg.jit(f)
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=BIG) for _ in range(5)]
    outs = [jf(x) for x in xs]
    assert jf.stats["replays"] >= 2
    for x, out in zip(xs, outs):
        assert same_bits(out, f(x))


def test_two_threads_replaying_one_program_with_buffers():
    step = scg.jit(scg.grad(_mlp_loss))
    problems = [_mlp_problem(seed) for seed in range(4)]
    for args in problems[:3]:
        step(*args)
    assert step.stats["replays"] >= 1 and "into(" in _source(step)
    want = [scg.grad(_mlp_loss)(*args) for args in problems]
    start = threading.Barrier(2)
    results, errors = [[], []], []

    def job(k):
        try:
            start.wait(timeout=30)
            for _ in range(10):
                for j in (k, k + 2):
                    results[k].append((j, step(*problems[j])))
        except BaseException as e:  # (reported in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=job, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert all(same_bits(got, want[j]) for k in range(2) for j, got in results[k])


def test_buffers_count_against_the_process_budget_until_their_program_goes(monkeypatch):
    import gc
    gc.collect()
    before = buffers.held_bytes()
    step = scg.jit(scg.grad(_mlp_loss))
    for seed in range(3):
        step(*_mlp_problem(seed))
    assert buffers.held_bytes() > before
    del step
    gc.collect()
    assert buffers.held_bytes() == before

    monkeypatch.setattr(buffers, "PROCESS_BYTES", buffers.held_bytes())  # (no room left)
    step = scg.jit(scg.grad(_mlp_loss))
    for seed in range(4):
        args = _mlp_problem(seed)
        assert same_bits(step(*args), scg.grad(_mlp_loss)(*args))
    assert step.stats["replays"] >= 1 and "into(" not in _source(step)


def test_a_buffered_line_allocates_when_its_operands_are_of_another_layout():
    x = np.ones(BIG)
    buffer = np.empty(BIG)
    assert buffers.into(np.add, buffer, STRIDES, x, x) is buffer
    y = np.asfortranarray(x)
    got = buffers.into(np.add, buffer, STRIDES, y, y)
    assert got is not buffer and got.flags.f_contiguous and same_bits(got, y + y)


def _layer_sums(w, x):
    h = np.tanh(x * w) * 2.0
    return np.sum(h * h) + np.sum(np.sum(h, axis=0) ** 2)


def test_a_replay_on_inputs_of_another_memory_order_is_the_eager_call():
    # (the order of a sum's terms follows the memory order of what it sums: written into
    # a buffer of the recorded order, an intermediate would be summed in another order)
    rng = np.random.default_rng(1)
    w = rng.normal(size=BIG[1])
    c_order = [rng.normal(size=BIG) for _ in range(3)]
    f_order = [np.asfortranarray(rng.normal(size=BIG)) for _ in range(3)]
    for first, then in ((c_order, f_order), (f_order, c_order)):
        step = scg.jit(scg.value_and_grad(_layer_sums, argnums=1))
        for x in first + then + first:
            assert same_bits(step(w, x), scg.value_and_grad(_layer_sums, argnums=1)(w, x))
        assert step.stats["replays"] >= 5 and "into(" in _source(step)
