"""Small 3-D and spatial-vector helpers for the numba kernels.

Spatial vectors are Featherstone-ordered, angular part first: a twist is
[omega; v], a wrench is [moment; force], both in the coordinates of the frame
they belong to. See README.md, section "Conventions".
"""
import numpy as np
from numba import njit


@njit(cache=True)
def axis_rotation(x, y, z, q, M, i):
    """M[i] = rotation matrix of angle q about the unit axis (x, y, z) (Rodrigues)."""
    c = np.cos(q)
    s = np.sin(q)
    t = 1.0 - c
    M[i, 0, 0] = t * x * x + c
    M[i, 0, 1] = t * x * y - s * z
    M[i, 0, 2] = t * x * z + s * y
    M[i, 1, 0] = t * x * y + s * z
    M[i, 1, 1] = t * y * y + c
    M[i, 1, 2] = t * y * z - s * x
    M[i, 2, 0] = t * x * z - s * y
    M[i, 2, 1] = t * y * z + s * x
    M[i, 2, 2] = t * z * z + c


@njit(cache=True)
def xyz_rotation(a, b, c, M, iR, iE):
    """Cross-section rotation M[iR] = Rx(a) Ry(b) Rz(c) of the small-rotation vector (a, b, c).

    M[iE] = E maps the rotation-vector rate to the angular velocity in the unrotated
    frame: omega = E th_dot. The sequence is exact (R is orthonormal) and equals
    I + skew(th) to first order.
    """
    ca, sa = np.cos(a), np.sin(a)
    cb, sb = np.cos(b), np.sin(b)
    cc, sc = np.cos(c), np.sin(c)
    M[iR, 0, 0] = cb * cc
    M[iR, 0, 1] = -cb * sc
    M[iR, 0, 2] = sb
    M[iR, 1, 0] = ca * sc + sa * sb * cc
    M[iR, 1, 1] = ca * cc - sa * sb * sc
    M[iR, 1, 2] = -sa * cb
    M[iR, 2, 0] = sa * sc - ca * sb * cc
    M[iR, 2, 1] = sa * cc + ca * sb * sc
    M[iR, 2, 2] = ca * cb
    M[iE, 0, 0] = 1.0
    M[iE, 0, 1] = 0.0
    M[iE, 0, 2] = sb
    M[iE, 1, 0] = 0.0
    M[iE, 1, 1] = ca
    M[iE, 1, 2] = -sa * cb
    M[iE, 2, 0] = 0.0
    M[iE, 2, 1] = sa
    M[iE, 2, 2] = ca * cb


@njit(cache=True)
def xyz_rate_bias(a, b, ad, bd, cd):
    """dE/dt * th_dot for the Rx Ry Rz sequence at angles (a, b, .) and rates (ad, bd, cd)."""
    ca, sa = np.cos(a), np.sin(a)
    cb, sb = np.cos(b), np.sin(b)
    return (cb * bd * cd, -sa * ad * bd + (-ca * cb * ad + sa * sb * bd) * cd,
            ca * ad * bd + (-sa * cb * ad - ca * sb * bd) * cd)


@njit(cache=True)
def cholesky_inplace(A, k, n):
    """Lower Cholesky factor of the leading n x n block of A[k], in place. False if not SPD."""
    for j in range(n):
        s = A[k, j, j]
        for i in range(j):
            s -= A[k, j, i] * A[k, j, i]
        if s <= 0.0:
            return False
        d = np.sqrt(s)
        A[k, j, j] = d
        for i in range(j + 1, n):
            s = A[k, i, j]
            for c in range(j):
                s -= A[k, i, c] * A[k, j, c]
            A[k, i, j] = s / d
    return True


@njit(cache=True)
def cholesky_solve(L, k, n, b):
    """Solve (L[k] L[k]^T) x = b for the leading n entries of b, in place."""
    for i in range(n):
        s = b[i]
        for c in range(i):
            s -= L[k, i, c] * b[c]
        b[i] = s / L[k, i, i]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for c in range(i + 1, n):
            s -= L[k, c, i] * b[c]
        b[i] = s / L[k, i, i]
