"""Options shared by the test suite.

`--thorough` (or the environment variable SCG_THOROUGH=1) runs the differential tester
(tests/test_differential*.py) with thousands of generated models instead of the fixed
budget of the default run.
"""

import os


def pytest_addoption(parser):
    parser.addoption("--thorough", action="store_true", default=False,
                     help="run the differential tester's thorough profile (thousands of "
                          "generated models; also SCG_THOROUGH=1)")


def pytest_configure(config):
    if config.getoption("--thorough"):
        os.environ["SCG_THOROUGH"] = "1"
