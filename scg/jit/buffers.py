"""Buffers a replayed program keeps between calls for its large elementwise results.

A recorded step makes the same large temporaries on every call: an RL step's (4096, 64)
activations, their tanh, the cotangents of the backward pass. Each is fresh memory when the
allocator has given the previous call's back to the system (glibc trims its heap once the
free memory on top passes a few MB), and fresh memory costs a page fault per 4 KB as it is
first written: on a 2-core VM about 3 us a fault, more than the pass that writes it.

So `plan` gives each large result of a ufunc (`v7 = c3(v5, v6)` with c3 a ufunc) or of
a function that writes into an `out` it is given (scg/core/lowering.WRITES_OUT: matrix
products, log-softmax, the cotangents of those and of tanh) a buffer of its own layout,
written with `out=` on every replay, and hands a buffer to a later result once nothing
can read the earlier one: a value computed from a buffered one by anything other than a
ufunc or a function of lowering.FRESH (a reshape, an index) may be a view of it, so a
buffer is held until the last use of every value that may share it. A buffer that a
value returned by the program, an effect or a call of a reference (state, a source, a
user's object) may hold is never used: it would leave the program. The values are those
of the same ufunc without `out=`, so a replay stays bit for bit the eager run.

The memory order of a result follows its operands' (a Fortran-order input gives
Fortran-order intermediates), and what reads it later depends on that order (a sum adds
its terms in memory order; a kernel takes C-contiguous rows only). So a buffered line is
`v7 = into(c3, b0, STRIDES, v5, v6)`: the operands' strides of the recorded call, and the
buffer is written only when the operands of this call have the same strides (so the
result would have the recorded layout); otherwise the result is allocated as without
buffers.
"""

import re
import threading
import weakref

import numpy as np

# Results of at least MIN_BYTES (glibc's first threshold for mapping memory apart: smaller
# ones come from its bins and are not trimmed) and at most MAX_BYTES (larger ones it maps
# apart anyway); at most TOTAL_BYTES held by one program and PROCESS_BYTES by all the
# programs alive (a jitted function keeps a program per structure of its arguments).
MIN_BYTES = 1 << 17
MAX_BYTES = 1 << 25
TOTAL_BYTES = 1 << 28
PROCESS_BYTES = 1 << 29
_held = [0]  # bytes of the buffers of the programs alive
_held_lock = threading.Lock()

_CALL = re.compile(r"^v(\d+) = (c\d+)\((.*)\)$")
_VALUE = re.compile(r"\bv(\d+)\b")
_REF = re.compile(r"\br\d+\b")


def note_output(buffered, slot, ufunc, ans, operands=()):
    """Note, in `buffered`, the layout of `ans`, the result in `slot` of `ufunc` (None: of
    a function of scg/core/lowering.WRITES_OUT) on `operands` (its arguments, keyword
    values last), if a buffer may hold it: a contiguous ndarray (C-contiguous for a
    function) of a size between MIN_BYTES and MAX_BYTES. The layout is (shape, dtype,
    order, the operands' strides: see `strides_of`)."""
    if (ufunc is not None and ufunc.nout != 1) or type(ans) is not np.ndarray or \
            not MIN_BYTES <= ans.nbytes <= MAX_BYTES:
        return
    if ans.flags.c_contiguous:
        buffered[slot] = (ans.shape, ans.dtype, "C", strides_of(operands))
    elif ans.flags.f_contiguous and ufunc is not None:
        buffered[slot] = (ans.shape, ans.dtype, "F", strides_of(operands))


def strides_of(operands):
    """The strides of the arrays among `operands` (None for anything else), in order."""
    return tuple([a.strides if type(a) is np.ndarray else None for a in operands])


def into(fn, buffer, strides, *args, **kwargs):
    """fn(*args, **kwargs) written into `buffer` (`out=`) if the arrays among its operands
    have the `strides` of the recorded call: the result then has the layout it had there,
    that of the buffer. Otherwise (inputs of another memory order than the recorded
    call's) the result fn allocates, in the layout that follows from its operands."""
    if strides_of(args + tuple(kwargs.values())) == strides:
        return fn(*args, out=buffer, **kwargs)
    return fn(*args, **kwargs)


def plan(body, out_exprs, buffered, fresh):
    """The lines `body` with the ufunc calls that get a buffer written into it (`into`),
    and the buffers {"bK": array} (see the module docstring). `buffered`: the layouts of
    the ufunc results that may get one, by value (`note_output`); `fresh`: the values that share no memory
    with their arguments (ufunc results, and the functions of scg/core/lowering.FRESH)."""
    if not buffered:
        return body, {}
    candidates = {}  # line -> the value it defines, for the ufunc results noted
    for k, line in enumerate(body):
        m = _CALL.match(line)
        if m and int(m.group(1)) in buffered:
            candidates[k] = m.group(1)
    if not candidates:
        return body, {}
    shares = {}   # value -> the candidates whose memory it may share
    last = {}     # candidate -> the last line that reads a value sharing its memory
    leaves = set()  # candidates whose memory may leave the program
    for k, line in enumerate(body):
        assigns = "=" in line.split("(")[0] and not line.startswith("if ")
        targets, rhs = line.partition(" = ")[::2] if assigns else ("", line)
        reached = set()
        for v in _VALUE.findall(rhs):
            reached.update(shares.get(v, ()))
        for c in reached:
            last[c] = k
        if _REF.search(rhs) or not (assigns or line.startswith("if ")):
            leaves |= reached  # (state, sources, effects: they may keep what they get)
        if k in candidates:
            c = candidates[k]
            shares[c] = (c,)
            last[c] = k
        elif assigns and reached:
            for t in _VALUE.findall(targets):
                if int(t) in fresh:
                    continue
                shares[t] = tuple(reached)
    for e in out_exprs:
        for v in _VALUE.findall(e):
            leaves.update(shares.get(v, ()))
    release = {}
    for c, k in last.items():
        release.setdefault(k, []).append(c)
    body = list(body)
    free, owner, held, total = {}, {}, {}, 0
    with _held_lock:
        budget = min(TOTAL_BYTES, PROCESS_BYTES - _held[0])
    for k, line in enumerate(body):
        c = candidates.get(k)
        if c is not None and c not in leaves:
            shape, dtype, order, strides = buffered[int(c)]
            layout = (shape, dtype, order)
            name = free.get(layout, []).pop() if free.get(layout) else None
            if name is None:
                size = np.dtype(dtype).itemsize * int(np.prod(shape))
                if total + size <= budget:
                    name = f"b{len(held)}"
                    held[name] = np.empty(shape, dtype, order=order)
                    total += size
            if name is not None:
                target, call = line.split(" = ", 1)
                fn, _, args = call.partition("(")
                body[k] = f"{target} = into({fn}, {name}, {strides!r}, {args}"
                owner[c] = (name, layout)
        for c in release.get(k, ()):
            if c in owner:
                name, layout = owner.pop(c)
                free.setdefault(layout, []).append(name)
    with _held_lock:
        _held[0] += total
    return body, held


def held_bytes():
    """Bytes of the buffers held by the programs alive."""
    return _held[0]


def _release(nbytes):
    with _held_lock:
        _held[0] -= nbytes


def one_at_a_time(program, plain, held):
    """`program` (which writes into the buffers `held`) for one call at a time; a call
    made while another runs it (another thread, or the program calling itself) runs
    `plain`. The buffers' bytes count against PROCESS_BYTES until the result is dropped."""
    lock = threading.Lock()

    def run(*inputs):
        if lock.acquire(blocking=False):
            try:
                return program(*inputs)
            finally:
                lock.release()
        return plain(*inputs)
    weakref.finalize(run, _release, sum(b.nbytes for b in held.values()))
    return run
