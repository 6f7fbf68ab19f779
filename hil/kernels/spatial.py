"""Small 3-D and spatial-vector helpers for the numba kernels.

Spatial vectors are Featherstone-ordered, angular part first: a twist is
[omega; v], a wrench is [moment; force], both in the coordinates of the frame
they belong to. See README.md, section "Conventions".
"""
import numpy as np
from numba import njit


@njit(cache=True)
def cross3(a, b, out):
    x = a[1] * b[2] - a[2] * b[1]
    y = a[2] * b[0] - a[0] * b[2]
    z = a[0] * b[1] - a[1] * b[0]
    out[0] = x
    out[1] = y
    out[2] = z


@njit(cache=True)
def axis_rotation(a, q, out):
    """Rotation matrix of angle q about the unit axis a (Rodrigues)."""
    c = np.cos(q)
    s = np.sin(q)
    t = 1.0 - c
    x, y, z = a[0], a[1], a[2]
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
def xyz_rate_bias(th, thd, out):
    """dE/dt * thd for the Rx Ry Rz sequence (angular-acceleration bias)."""
    ca, sa = np.cos(th[0]), np.sin(th[0])
    cb, sb = np.cos(th[1]), np.sin(th[1])
    ad, bd, cd = thd[0], thd[1], thd[2]
    out[0] = cb * bd * cd
    out[1] = -sa * ad * bd + (-ca * cb * ad + sa * sb * bd) * cd
    out[2] = ca * ad * bd + (-sa * cb * ad - ca * sb * bd) * cd


@njit(cache=True)
def motion_transform(R, p, X):
    """X (6x6) taking twists from frame A to frame B, B at p with axes R (columns) in A."""
    for i in range(3):
        for j in range(3):
            X[i, j] = R[j, i]
            X[i + 3, j + 3] = R[j, i]
            X[i, j + 3] = 0.0
    # lower-left block: -R^T skew(p)
    for i in range(3):
        r0, r1, r2 = R[0, i], R[1, i], R[2, i]
        X[i + 3, 0] = -(r1 * p[2] - r2 * p[1])
        X[i + 3, 1] = -(r2 * p[0] - r0 * p[2])
        X[i + 3, 2] = -(r0 * p[1] - r1 * p[0])


@njit(cache=True)
def cross_motion(v, m, out):
    """Spatial motion cross product v x m (out may not alias the inputs)."""
    w0, w1, w2 = v[0], v[1], v[2]
    u0, u1, u2 = v[3], v[4], v[5]
    out[0] = w1 * m[2] - w2 * m[1]
    out[1] = w2 * m[0] - w0 * m[2]
    out[2] = w0 * m[1] - w1 * m[0]
    out[3] = w1 * m[5] - w2 * m[4] + u1 * m[2] - u2 * m[1]
    out[4] = w2 * m[3] - w0 * m[5] + u2 * m[0] - u0 * m[2]
    out[5] = w0 * m[4] - w1 * m[3] + u0 * m[1] - u1 * m[0]


@njit(cache=True)
def cholesky_inplace(A, n):
    """Lower Cholesky factor of the leading n x n block of A, in place. Returns False if not SPD."""
    for j in range(n):
        s = A[j, j]
        for k in range(j):
            s -= A[j, k] * A[j, k]
        if s <= 0.0:
            return False
        d = np.sqrt(s)
        A[j, j] = d
        for i in range(j + 1, n):
            s = A[i, j]
            for k in range(j):
                s -= A[i, k] * A[j, k]
            A[i, j] = s / d
    return True


@njit(cache=True)
def cholesky_solve(L, n, b):
    """Solve (L L^T) x = b for the leading n entries of b, in place."""
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * b[k]
        b[i] = s / L[i, i]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, n):
            s -= L[k, i] * b[k]
        b[i] = s / L[i, i]
