"""Small 3-D and spatial-vector helpers for the numba kernels.

Spatial vectors are Featherstone-ordered, angular part first: a twist is
[omega; v], a wrench is [moment; force], both in the coordinates of the frame
they belong to. See README.md, section "Conventions".
"""
import numpy as np
from numba import njit


@njit(cache=True)
def axis_rotation(x, y, z, q, out):
    """Rotation matrix of angle q about the unit axis (x, y, z) (Rodrigues)."""
    c = np.cos(q)
    s = np.sin(q)
    t = 1.0 - c
    out[0, 0] = t * x * x + c
    out[0, 1] = t * x * y - s * z
    out[0, 2] = t * x * z + s * y
    out[1, 0] = t * x * y + s * z
    out[1, 1] = t * y * y + c
    out[1, 2] = t * y * z - s * x
    out[2, 0] = t * x * z - s * y
    out[2, 1] = t * y * z + s * x
    out[2, 2] = t * z * z + c


@njit(cache=True)
def xyz_rotation(th, R, E):
    """Cross-section rotation R = Rx(a) Ry(b) Rz(c) of the small-rotation vector th = (a, b, c).

    E maps th_dot to the angular velocity in the unrotated frame:
    omega = E(th) th_dot. The sequence is exact (R is orthonormal) and equals
    I + skew(th) to first order.
    """
    ca, sa = np.cos(th[0]), np.sin(th[0])
    cb, sb = np.cos(th[1]), np.sin(th[1])
    cc, sc = np.cos(th[2]), np.sin(th[2])
    R[0, 0] = cb * cc
    R[0, 1] = -cb * sc
    R[0, 2] = sb
    R[1, 0] = ca * sc + sa * sb * cc
    R[1, 1] = ca * cc - sa * sb * sc
    R[1, 2] = -sa * cb
    R[2, 0] = sa * sc - ca * sb * cc
    R[2, 1] = sa * cc + ca * sb * sc
    R[2, 2] = ca * cb
    E[0, 0] = 1.0
    E[0, 1] = 0.0
    E[0, 2] = sb
    E[1, 0] = 0.0
    E[1, 1] = ca
    E[1, 2] = -sa * cb
    E[2, 0] = 0.0
    E[2, 1] = sa
    E[2, 2] = ca * cb


@njit(cache=True)
def xyz_rate_bias(th, thd):
    """dE/dt * thd for the Rx Ry Rz sequence (angular-acceleration bias), as a 3-tuple."""
    ca, sa = np.cos(th[0]), np.sin(th[0])
    cb, sb = np.cos(th[1]), np.sin(th[1])
    ad, bd, cd = thd[0], thd[1], thd[2]
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
