"""Where a numpy Generator is in its stream: saved and restored cheaply.

A model run again with the same randomness (while its estimators are settled), a replay
that stops and leaves its generators where they were, and a fused kernel that draws
noise again later all need a generator's position. For PCG64 (numpy's default) it is
read and written through the C state, about a microsecond against tens for `.state`.
"""

import ctypes
import random

import numpy as np


def _pcg64_access():
    """(save, restore) of a PCG64 generator's position through its C state (about a
    microsecond, against tens for `.state`), or None if the layout is not the expected
    one: numpy's pcg64_state is {pcg64_random_t *pcg_state; int has_uint32; uint32_t
    uinteger}, and pcg64_random_t holds the 128-bit state and increment."""

    def save(bg):
        address = bg.ctypes.state_address
        inner = ctypes.c_void_p.from_address(address).value
        return ctypes.string_at(inner, 32) + ctypes.string_at(address + 8, 8)

    def restore(bg, saved):
        address = bg.ctypes.state_address
        inner = ctypes.c_void_p.from_address(address).value
        ctypes.memmove(inner, saved[:32], 32)
        ctypes.memmove(address + 8, saved[32:], 8)

    try:
        g = np.random.Generator(np.random.PCG64(12345))
        g.random(3)
        g.integers(0, 10, 3, dtype=np.uint32)  # (leaves a spare 32-bit word)
        saved, expected = save(g.bit_generator), g.bit_generator.state
        first = g.standard_normal(5)
        restore(g.bit_generator, saved)
        if g.bit_generator.state == expected and np.array_equal(g.standard_normal(5), first):
            return save, restore
    except Exception:  # pragma: no cover - another numpy's layout
        pass
    return None  # pragma: no cover


_PCG64 = _pcg64_access()


def save_position(rng):
    """Where a numpy Generator (or a random.Random) is in its stream (see
    restore_position; Python's global generator's position compares, it does not
    restore)."""
    if rng is PYTHON_RANDOM:
        return _python_reader()
    if isinstance(rng, random.Random):
        return rng.getstate()
    bg = rng.bit_generator
    if _PCG64 is not None and type(bg) is np.random.PCG64:
        return _PCG64[0](bg)
    return bg.state


def restore_position(rng, saved):
    if isinstance(rng, random.Random):
        rng.setstate(saved)  # (not Python's global one: its position is for comparing)
        return
    bg = rng.bit_generator
    if type(saved) is bytes:
        _PCG64[1](bg, saved)
    else:
        bg.state = saved


def position_keeper(rng):
    """(save, restore) of a Generator's position, bound to it once: `save()` gives what
    `save_position(rng)` gives, a tenth of a microsecond for PCG64 (numpy views of the C
    state read by `_pcg64_access`: the cost a replay pays on every call), and
    `restore(position)` goes back to it."""
    bg = rng.bit_generator
    if _PCG64 is not None and type(bg) is np.random.PCG64:
        address = bg.ctypes.state_address
        inner = ctypes.c_void_p.from_address(address).value
        # (the state lives inside the bit generator, which the caller keeps)
        pcg = np.ctypeslib.as_array((ctypes.c_uint8 * 32).from_address(inner))
        spare = np.ctypeslib.as_array((ctypes.c_uint8 * 8).from_address(address + 8))

        def save():
            return pcg.tobytes() + spare.tobytes()
    else:
        def save():
            return bg.state
    return save, lambda position: restore_position(rng, position)


PYTHON_RANDOM = getattr(random, "_inst")  # the generator behind random.random and the like


def python_random_position():
    """Where Python's own global generator (random.random and the like) is in its stream."""
    return _python_reader()


def _python_random_reader():
    """A function giving the global random.Random's position: its Mersenne Twister index,
    its first two state words and the Gaussian it keeps, read through its C object (a
    fraction of a microsecond, against 7 for `random.getstate()`), checked against
    getstate(); else getstate itself."""
    generator = PYTHON_RANDOM
    try:
        address = id(generator) + 2 * ctypes.sizeof(ctypes.c_void_p)  # (after PyObject_HEAD)
        index = ctypes.c_int.from_address(address)
        words = (ctypes.c_uint32 * 2).from_address(address + ctypes.sizeof(ctypes.c_int))

        def fast():
            # (the index and the first two words: a seed sets the first word to 2^31 and
            # the index to 624, the second to what the seed gives; gauss keeps a number)
            return index.value, words[0], words[1], generator.gauss_next

        state = generator.getstate()[1]
        if fast() == (state[-1], state[0], state[1], generator.gauss_next):
            before = fast()
            saved = generator.getstate()
            generator.random()
            moved = fast() != before
            generator.setstate(saved)
            if moved and fast() == before:
                return fast
    except Exception:  # pragma: no cover - another layout of the object
        pass
    return random.getstate  # pragma: no cover


_python_reader = _python_random_reader()


def global_random_position():
    """Where numpy's global generator (np.random.normal and the like) is in its stream."""
    global _reader
    if _GLOBAL_RANDOM._bit_generator is not _reader[0]:  # (np.random.set_bit_generator)
        _reader = _global_stream_reader()
    return _reader[1]()


_GLOBAL_RANDOM = np.random.mtrand._rand  # the RandomState behind np.random.normal and the like


def _global_stream_reader():
    """(bit generator, a function giving its MT19937 position and first key word). They are
    read through the generator's C state (a fraction of a microsecond, against 25 for
    `.state`); if that layout is not the one expected, through `.state`."""
    generator = _GLOBAL_RANDOM._bit_generator

    def slow():
        state = generator.state["state"]
        return state["pos"], int(state["key"][0])

    try:
        address = generator.ctypes.state_address
        key0 = ctypes.c_uint32.from_address(address)
        pos = ctypes.c_int.from_address(address + 624 * 4)  # mt19937_state: key[624], pos

        def fast():
            return pos.value, key0.value

        if fast() == slow():
            return generator, fast
    except Exception:  # pragma: no cover - another numpy's layout or bit generator
        pass
    return generator, slow  # pragma: no cover


_reader = _global_stream_reader()
