"""Special functions as primitives: lgamma, digamma, polygamma, and compositions.

Each is elementwise (batchable over draws) and computed by a numba kernel of
`special.py` beside this file; each VJP is the next function of the chain, so
derivatives of any order follow. scipy is not needed at run time.
"""

import numpy as np

from ..core.tape import Primitive, defvjp
from ..numpy import rules as R
from . import special as K

EW = "elementwise"


def _flat(kernel, x, *lead):
    x = np.asarray(x, dtype=float)
    out = np.empty(x.shape)
    kernel(*lead, out.reshape(-1), x.reshape(-1))  # reshape copies non-contiguous x
    return out if out.ndim else out[()]


lgamma = Primitive("lgamma", lambda x: _flat(K.lgamma_kernel, x),
                   doc="log|Gamma(x)|, elementwise.", batch=EW)
digamma = Primitive("digamma", lambda x: _flat(K.digamma_kernel, x),
                    doc="psi(x) = d/dx lgamma(x), elementwise.", batch=EW)
polygamma = Primitive("polygamma", lambda n, x: _flat(K.polygamma_kernel, x, int(n)),
                      doc="polygamma(n, x): the n-th derivative of digamma (static int n >= 0).",
                      batch=EW)

defvjp(lgamma, lambda g, ans, x: R.multiply(g, digamma(x)))
defvjp(digamma, lambda g, ans, x: R.multiply(g, polygamma(1, x)))
defvjp(polygamma, None, lambda g, ans, n, x: R.multiply(g, polygamma(int(n) + 1, x)))

erf = Primitive("erf", lambda x: _flat(K.erf_kernel, x), doc="The error function, elementwise.",
                batch=EW)
ndtri = Primitive("ndtri", lambda u: _flat(K.ndtri_kernel, u),
                  doc="The standard normal quantile (inverse CDF), elementwise.", batch=EW)

_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)
_SQRT_2PI = np.sqrt(2.0 * np.pi)
# d erf(x) = 2/sqrt(pi) exp(-x^2); d ndtri(u) = 1 / phi(ndtri(u)) = sqrt(2 pi) exp(x^2 / 2)
defvjp(erf, lambda g, ans, x: R.multiply(g, R.multiply(_TWO_OVER_SQRT_PI,
                                                      R.exp(R.negative(R.multiply(x, x))))))
defvjp(ndtri, lambda g, ans, u: R.multiply(g, R.multiply(_SQRT_2PI,
                                                        R.exp(R.multiply(0.5,
                                                                         R.multiply(ans, ans))))))
