"""Small 3-D and spatial-vector helpers for the numba kernels.

Spatial vectors are Featherstone-ordered, angular part first: a twist is
[omega; v], a wrench is [moment; force], both in the coordinates of the frame
they belong to. See README.md, section "Conventions".

Matrices live in flat arrays (hil.kernels.layout): a 3 x 3 matrix at offset o holds
element (i, j) at o + 3 i + j; an n x n block with row stride `stride` at o + i stride + j.
"""
import numpy as np
from numba import njit


@njit(cache=True)
def axis_rotation(x, y, z, c, s, w, o):
    """w[o:o + 9] = rotation of angle q about the unit axis (x, y, z), given c = cos q, s = sin q
    (Rodrigues)."""
    t = 1.0 - c
    w[o] = t * x * x + c
    w[o + 1] = t * x * y - s * z
    w[o + 2] = t * x * z + s * y
    w[o + 3] = t * x * y + s * z
    w[o + 4] = t * y * y + c
    w[o + 5] = t * y * z - s * x
    w[o + 6] = t * x * z - s * y
    w[o + 7] = t * y * z + s * x
    w[o + 8] = t * z * z + c


@njit(cache=True)
def xyz_rotation(a, b, c, w, oR, oE, obias, ad, bd, cd):
    """Cross-section rotation w[oR:oR + 9] = Rx(a) Ry(b) Rz(c) of the small-rotation vector (a, b, c),
    w[oE:oE + 9] = E, which maps the rotation-vector rate to the angular velocity in the unrotated
    frame (omega = E th_dot), and w[obias:obias + 3] = dE/dt th_dot at the rates (ad, bd, cd). The
    sequence is exact (R is orthonormal) and equals I + skew(th) to first order."""
    ca, sa = np.cos(a), np.sin(a)
    cb, sb = np.cos(b), np.sin(b)
    cc, sc = np.cos(c), np.sin(c)
    w[oR] = cb * cc
    w[oR + 1] = -cb * sc
    w[oR + 2] = sb
    w[oR + 3] = ca * sc + sa * sb * cc
    w[oR + 4] = ca * cc - sa * sb * sc
    w[oR + 5] = -sa * cb
    w[oR + 6] = sa * sc - ca * sb * cc
    w[oR + 7] = sa * cc + ca * sb * sc
    w[oR + 8] = ca * cb
    w[oE] = 1.0
    w[oE + 1] = 0.0
    w[oE + 2] = sb
    w[oE + 3] = 0.0
    w[oE + 4] = ca
    w[oE + 5] = -sa * cb
    w[oE + 6] = 0.0
    w[oE + 7] = sa
    w[oE + 8] = ca * cb
    w[obias] = cb * bd * cd
    w[obias + 1] = -sa * ad * bd + (-ca * cb * ad + sa * sb * bd) * cd
    w[obias + 2] = ca * ad * bd + (-sa * cb * ad - ca * sb * bd) * cd


@njit(cache=True)
def cholesky_inplace(A, o, n, stride):
    """Lower Cholesky factor of the n x n block at A[o] (row stride `stride`), in place. False if
    not positive definite."""
    for j in range(n):
        rj = o + j * stride
        s = A[rj + j]
        for i in range(j):
            s -= A[rj + i] * A[rj + i]
        if s <= 0.0:
            return False
        d = np.sqrt(s)
        A[rj + j] = d
        for i in range(j + 1, n):
            ri = o + i * stride
            s = A[ri + j]
            for c in range(j):
                s -= A[ri + c] * A[rj + c]
            A[ri + j] = s / d
    return True


@njit(cache=True)
def cholesky_solve(L, o, n, stride, b, ob, step):
    """Solve (L L^T) x = b in place for the n entries b[ob + i step], L the factor at L[o]."""
    for i in range(n):
        ri = o + i * stride
        s = b[ob + i * step]
        for c in range(i):
            s -= L[ri + c] * b[ob + c * step]
        b[ob + i * step] = s / L[ri + i]
    for i in range(n - 1, -1, -1):
        s = b[ob + i * step]
        for c in range(i + 1, n):
            s -= L[o + c * stride + i] * b[ob + c * step]
        b[ob + i * step] = s / L[o + i * stride + i]
