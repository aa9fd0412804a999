"""scg.jit: a function recorded once as straight-line code and replayed on later calls.

`jitted.py` decides for each call whether a recorded program applies (the key of a call:
its arguments' structure; the program's guards); `recording.py` records a call as a
handler of the effect stack (scg/core/effects.py) and compiles it; `watch.py` sees what a
recorded call runs and `guards.py` guards what it read besides its arrays (the contract).
Nothing outside this package knows that replays exist: code above the primitives sends
effect messages, and functions may register their lowering in scg/core/lowering.py.
"""

from .jitted import Jitted, jit

__all__ = ["Jitted", "jit"]
