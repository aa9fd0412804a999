"""Positions of generators in their streams: Python's global random.Random read through
its C object moves exactly when the generator does (a draw, a seed, a restored state, a
Gaussian kept from the last call), and stays when nothing draws."""

import random

from scg.core import random_state as R


def test_python_random_position_moves_with_every_kind_of_draw():
    saved = random.getstate()
    try:
        position = R.python_random_position
        changes = {
            "random": random.random,
            "getrandbits": lambda: random.getrandbits(32),
            "shuffle": lambda: random.shuffle([1, 2, 3, 4]),
            "seed after another seed": lambda: random.seed(2),
            "setstate": lambda: random.setstate(other),
            "gauss from its kept number": lambda: random.gauss(0.0, 1.0),
        }
        random.seed(5)
        other = random.getstate()
        for name, change in changes.items():
            random.seed(1)
            if name == "gauss from its kept number":
                random.gauss(0.0, 1.0)  # (leaves the pair's second number kept)
            before = position()
            change()
            assert position() != before, name
        random.seed(1)
        before = position()
        assert position() == before  # (nothing drew)
        assert R.save_position(R.PYTHON_RANDOM) == before
    finally:
        random.setstate(saved)
