import numpy as np

import scg


def test_third_derivative_of_sin():
    assert np.isclose(scg.grad(scg.grad(scg.grad(np.sin)))(0.3), -np.cos(0.3))
