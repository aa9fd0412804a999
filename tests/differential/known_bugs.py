"""Bugs of scg that the differential tester found and that are not fixed yet.

Each entry narrows the grammar: generated models for which `applies` is true are not
drawn for the checks the entry names (first order, second order, jit), so that the default
run stays green while the bug is open. Each also has a plain
test of a minimal model in tests/test_differential_known_bugs.py, marked
xfail(strict=True): when the bug is fixed that test passes (and fails as an unexpected
pass), and the entry here is to be removed.
"""

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class KnownBug:
    name: str
    description: str
    applies: Callable        # Model -> bool
    test: str                # the xfail test that holds a minimal model
    checks: tuple = ("first_order", "second_order", "jit")  # the checks it would fail


KNOWN_BUGS = []  # (none open)


def known_bugs(model, check=None):
    """The known bugs a generated model would run into (in one check, or in any)."""
    return [b for b in KNOWN_BUGS if (check is None or check in b.checks)
            and b.applies(model)]


def free_of_known_bugs(check):
    """A filter of generated models for one check."""
    return lambda model: not known_bugs(model, check)
