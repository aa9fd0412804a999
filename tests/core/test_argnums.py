"""argnums: anything other than an int or a tuple of distinct ints is refused with a clear error."""

import numpy as np
import pytest

import scg


def f(x, y):
    return x * y


def model(theta, scale):
    return scg.sample("x", scg.Normal(theta, scale)) ** 2


TRANSFORMS = {
    "grad": lambda fun, argnums: scg.grad(fun, argnums=argnums),
    "value_and_grad": lambda fun, argnums: scg.value_and_grad(fun, argnums=argnums),
    "jacobian": lambda fun, argnums: scg.jacobian(fun, argnums=argnums),
    "hessian": lambda fun, argnums: scg.hessian(fun, argnums=argnums),
}

BAD = [
    ("a", TypeError, r"argnums='a' is of type str"),
    (1.5, TypeError, r"argnums=1\.5 is of type float"),
    (True, TypeError, r"argnums=True is of type bool"),
    ((0, 0), ValueError, r"argnums=\(0, 0\) names argument 0 twice"),
    ((0, -2), ValueError, r"argnums=\(0, -2\) names argument 0 twice"),
    ([0, "x"], TypeError, r"argnums=\[0, 'x'\] holds 'x' of type str"),
    ((1, False), TypeError, r"holds False of type bool"),
    ((), ValueError, r"argnums=\(\) selects no argument"),
    (None, TypeError, r"argnums=None is of type NoneType"),
]


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("argnums, error, message", BAD)
def test_bad_argnums_are_refused_with_what_is_accepted(transform, argnums, error, message):
    fn = TRANSFORMS[transform](f, argnums)
    with pytest.raises(error, match=message) as info:
        fn(1.0, 2.0)
    assert "an int or a tuple of distinct ints" in str(info.value)


@pytest.mark.parametrize("argnums, error, message", BAD)
def test_bad_argnums_of_an_expectation(argnums, error, message):
    E = scg.expectation(model, n=4, seed=0)
    for fn in (scg.grad(E, argnums=argnums), scg.grad_samples(E, argnums=argnums)):
        with pytest.raises(error, match=message):
            fn(1.0, 2.0)


def test_argnums_out_of_range_names_the_number_of_arguments():
    with pytest.raises(TypeError, match=r"argnums=2 but the function got 2 positional "
                                        r"arguments: each argnum must be in range\(-2, 2\)"):
        scg.grad(f, argnums=2)(1.0, 2.0)
    with pytest.raises(TypeError, match=r"argnums=\(0, -3\) but the function got 2"):
        scg.grad(f, argnums=(0, -3))(1.0, 2.0)
    with pytest.raises(TypeError, match=r"got 0 positional arguments: pass the values"):
        scg.grad(lambda x=1.0: x)()


def test_good_argnums_still_work():
    assert scg.grad(f, argnums=1)(3.0, 2.0) == 3.0
    assert scg.grad(f, argnums=np.int64(1))(3.0, 2.0) == 3.0
    gx, gy = scg.grad(f, argnums=(0, 1))(3.0, 2.0)
    assert gx == 2.0 and gy == 3.0
    gy, gx = scg.grad(f, argnums=[1, -2])(3.0, 2.0)
    assert gx == 2.0 and gy == 3.0
