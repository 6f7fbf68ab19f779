"""Small 3-D and spatial-vector helpers for the numba kernels, and the dense factorisations they use.

Spatial vectors are Featherstone-ordered, angular part first: a twist is
[omega; v], a wrench is [moment; force], both in the coordinates of the frame
they belong to. See the manual, docs/model.md "Conventions".

Matrices live in flat arrays (hil.kernels.layout): a 3 x 3 matrix at offset o holds
element (i, j) at o + 3 i + j; an n x n block with row stride `stride` at o + i stride + j.
"""
import numpy as np

from .jit import kernel
from .layout import at


@kernel
def axis_rotation(x, y, z, c, s, w, o):
    """w[o:o + 9] = rotation of angle q about the unit axis (x, y, z), given c = cos q, s = sin q
    (Rodrigues)."""
    t = 1.0 - c
    w[at(o)] = t * x * x + c
    w[at(o + 1)] = t * x * y - s * z
    w[at(o + 2)] = t * x * z + s * y
    w[at(o + 3)] = t * x * y + s * z
    w[at(o + 4)] = t * y * y + c
    w[at(o + 5)] = t * y * z - s * x
    w[at(o + 6)] = t * x * z - s * y
    w[at(o + 7)] = t * y * z + s * x
    w[at(o + 8)] = t * z * z + c


@kernel
def xyz_rotation(a, b, c, w, oR, oE, obias, ad, bd, cd):
    """Cross-section rotation w[oR:oR + 9] = Rx(a) Ry(b) Rz(c) of the small-rotation vector (a, b, c),
    w[oE:oE + 9] = E, which maps the rotation-vector rate to the angular velocity in the unrotated
    frame (omega = E th_dot), and w[obias:obias + 3] = dE/dt th_dot at the rates (ad, bd, cd). The
    sequence is exact (R is orthonormal) and equals I + skew(th) to first order."""
    ca, sa = np.cos(a), np.sin(a)
    cb, sb = np.cos(b), np.sin(b)
    cc, sc = np.cos(c), np.sin(c)
    w[at(oR)] = cb * cc
    w[at(oR + 1)] = -cb * sc
    w[at(oR + 2)] = sb
    w[at(oR + 3)] = ca * sc + sa * sb * cc
    w[at(oR + 4)] = ca * cc - sa * sb * sc
    w[at(oR + 5)] = -sa * cb
    w[at(oR + 6)] = sa * sc - ca * sb * cc
    w[at(oR + 7)] = sa * cc + ca * sb * sc
    w[at(oR + 8)] = ca * cb
    w[at(oE)] = 1.0
    w[at(oE + 1)] = 0.0
    w[at(oE + 2)] = sb
    w[at(oE + 3)] = 0.0
    w[at(oE + 4)] = ca
    w[at(oE + 5)] = -sa * cb
    w[at(oE + 6)] = 0.0
    w[at(oE + 7)] = sa
    w[at(oE + 8)] = ca * cb
    w[at(obias)] = cb * bd * cd
    w[at(obias + 1)] = -sa * ad * bd + (-ca * cb * ad + sa * sb * bd) * cd
    w[at(obias + 2)] = ca * ad * bd + (-sa * cb * ad - ca * sb * bd) * cd


@kernel
def cholesky_inplace(A, o, n, stride, inv, oinv):
    """Lower Cholesky factor of the n x n block at A[o] (row stride `stride`), in place, and the
    reciprocals of its diagonal in inv[oinv:oinv + n]. False if not positive definite."""
    for j in range(n):
        rj = o + j * stride
        s = A[at(rj + j)]
        for i in range(j):
            s -= A[at(rj + i)] * A[at(rj + i)]
        if s <= 0.0:
            return False
        d = np.sqrt(s)
        r = 1.0 / d
        A[at(rj + j)] = d
        inv[at(oinv + j)] = r
        for i in range(j + 1, n):
            ri = o + i * stride
            s = A[at(ri + j)]
            for c in range(j):
                s -= A[at(ri + c)] * A[at(rj + c)]
            A[at(ri + j)] = s * r
    return True


@kernel
def cholesky_solve(L, o, n, stride, b, ob, step):
    """Solve (L L^T) x = b in place for the n entries b[ob + i step], L the factor at L[o]."""
    for i in range(n):
        ri = o + i * stride
        s = b[at(ob + i * step)]
        for c in range(i):
            s -= L[at(ri + c)] * b[at(ob + c * step)]
        b[at(ob + i * step)] = s / L[at(ri + i)]
    for i in range(n - 1, -1, -1):
        s = b[at(ob + i * step)]
        for c in range(i + 1, n):
            s -= L[at(o + c * stride + i)] * b[at(ob + c * step)]
        b[at(ob + i * step)] = s / L[at(o + i * stride + i)]


@kernel
def lu_factor(A, k, n, piv):
    """LU factorisation with partial pivoting of the leading n x n block of A[k], in place.
    False if a pivot is below 1e-14 of the block's largest entry (singular to rounding)."""
    scale = 0.0
    for i in range(n):
        for j in range(n):
            scale = max(scale, abs(A[k, i, j]))
    for c in range(n):
        p = c
        best = abs(A[k, c, c])
        for i in range(c + 1, n):
            v = abs(A[k, i, c])
            if v > best:
                best = v
                p = i
        if not best > 1e-14 * scale:
            return False
        piv[k, c] = p
        if p != c:
            for j in range(n):
                t = A[k, c, j]
                A[k, c, j] = A[k, p, j]
                A[k, p, j] = t
        d = A[k, c, c]
        for i in range(c + 1, n):
            f = A[k, i, c] / d
            A[k, i, c] = f
            if f != 0.0:
                for j in range(c + 1, n):
                    A[k, i, j] -= f * A[k, c, j]
    return True


@kernel
def lu_solve(A, k, n, piv, b, kb):
    """Solve A[k] x = b[kb, :n] in place with the factors of lu_factor."""
    for c in range(n):
        p = int(piv[k, c])
        if p != c:
            t = b[kb, c]
            b[kb, c] = b[kb, p]
            b[kb, p] = t
    for i in range(n):
        s = b[kb, i]
        for j in range(i):
            s -= A[k, i, j] * b[kb, j]
        b[kb, i] = s
    for i in range(n - 1, -1, -1):
        s = b[kb, i]
        for j in range(i + 1, n):
            s -= A[k, i, j] * b[kb, j]
        b[kb, i] = s / A[k, i, i]


@kernel
def rotate_symmetric(r, a):
    """R A R^T for a symmetric A (its upper triangle a = (a00, a01, a02, a11, a12, a22)), R row-major
    (r a 9-tuple), as its upper triangle (x00, x01, x02, x11, x12, x22)."""
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = r
    a00, a01, a02, a11, a12, a22 = a
    t00 = a00 * r00 + a01 * r01 + a02 * r02
    t01 = a00 * r10 + a01 * r11 + a02 * r12
    t02 = a00 * r20 + a01 * r21 + a02 * r22
    t10 = a01 * r00 + a11 * r01 + a12 * r02
    t11 = a01 * r10 + a11 * r11 + a12 * r12
    t12 = a01 * r20 + a11 * r21 + a12 * r22
    t20 = a02 * r00 + a12 * r01 + a22 * r02
    t21 = a02 * r10 + a12 * r11 + a22 * r12
    t22 = a02 * r20 + a12 * r21 + a22 * r22
    return (r00 * t00 + r01 * t10 + r02 * t20, r00 * t01 + r01 * t11 + r02 * t21, r00 * t02 + r01 * t12 + r02 * t22,
            r10 * t01 + r11 * t11 + r12 * t21, r10 * t02 + r11 * t12 + r12 * t22, r20 * t02 + r21 * t12 + r22 * t22)


@kernel
def rotate(r, b):
    """R B R^T for a general B; R, B and the result row-major 9-tuples."""
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = r
    b00, b01, b02, b10, b11, b12, b20, b21, b22 = b
    t00 = b00 * r00 + b01 * r01 + b02 * r02
    t01 = b00 * r10 + b01 * r11 + b02 * r12
    t02 = b00 * r20 + b01 * r21 + b02 * r22
    t10 = b10 * r00 + b11 * r01 + b12 * r02
    t11 = b10 * r10 + b11 * r11 + b12 * r12
    t12 = b10 * r20 + b11 * r21 + b12 * r22
    t20 = b20 * r00 + b21 * r01 + b22 * r02
    t21 = b20 * r10 + b21 * r11 + b22 * r12
    t22 = b20 * r20 + b21 * r21 + b22 * r22
    return (r00 * t00 + r01 * t10 + r02 * t20, r00 * t01 + r01 * t11 + r02 * t21, r00 * t02 + r01 * t12 + r02 * t22,
            r10 * t00 + r11 * t10 + r12 * t20, r10 * t01 + r11 * t11 + r12 * t21, r10 * t02 + r11 * t12 + r12 * t22,
            r20 * t00 + r21 * t10 + r22 * t20, r20 * t01 + r21 * t11 + r22 * t21, r20 * t02 + r21 * t12 + r22 * t22)


@kernel
def load3(a, o):
    """(a[o], a[o + 1], a[o + 2]): a 3-vector of a flat array."""
    return a[at(o)], a[at(o + 1)], a[at(o + 2)]


@kernel
def load9(a, o):
    """The row-major 3 x 3 matrix at a[o] as a 9-tuple."""
    return (a[at(o)], a[at(o + 1)], a[at(o + 2)], a[at(o + 3)], a[at(o + 4)], a[at(o + 5)], a[at(o + 6)],
            a[at(o + 7)], a[at(o + 8)])


@kernel
def store3(a, o, x):
    """a[o:o + 3] = the 3-tuple x."""
    a[at(o)] = x[0]
    a[at(o + 1)] = x[1]
    a[at(o + 2)] = x[2]


@kernel
def store9(a, o, m):
    """a[o:o + 9] = the 3 x 3 matrix m (9-tuple, row-major)."""
    for i in range(9):
        a[at(o + i)] = m[i]


@kernel
def mul3(m, x):
    """M x for the 3 x 3 matrix m (9-tuple, row-major) and the 3-tuple x."""
    return (m[0] * x[0] + m[1] * x[1] + m[2] * x[2], m[3] * x[0] + m[4] * x[1] + m[5] * x[2],
            m[6] * x[0] + m[7] * x[1] + m[8] * x[2])


@kernel
def mul3t(m, x):
    """M^T x: x's components in the axes that M's columns hold."""
    return (m[0] * x[0] + m[3] * x[1] + m[6] * x[2], m[1] * x[0] + m[4] * x[1] + m[7] * x[2],
            m[2] * x[0] + m[5] * x[1] + m[8] * x[2])


@kernel
def matmul3(a, b):
    """A B for 3 x 3 matrices as row-major 9-tuples."""
    return (a[0] * b[0] + a[1] * b[3] + a[2] * b[6], a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
            a[0] * b[2] + a[1] * b[5] + a[2] * b[8], a[3] * b[0] + a[4] * b[3] + a[5] * b[6],
            a[3] * b[1] + a[4] * b[4] + a[5] * b[7], a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[3] + a[8] * b[6], a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
            a[6] * b[2] + a[7] * b[5] + a[8] * b[8])


@kernel
def force_to_parent(w, R, p, f, step, o, ostep):
    """w[o + i ostep] += (X^T f)_i for the force f = w[f + i step] in child axes at the child origin:
    [R n + p x (R f); R f] in the parent's axes about its origin (R = Rpc, p = ppc)."""
    n0 = w[at(f)]
    n1 = w[at(f + step)]
    n2 = w[at(f + 2 * step)]
    f0 = w[at(f + 3 * step)]
    f1 = w[at(f + 4 * step)]
    f2 = w[at(f + 5 * step)]
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = (w[at(R)], w[at(R + 1)], w[at(R + 2)], w[at(R + 3)], w[at(R + 4)],
                                                   w[at(R + 5)], w[at(R + 6)], w[at(R + 7)], w[at(R + 8)])
    g0 = r00 * f0 + r01 * f1 + r02 * f2
    g1 = r10 * f0 + r11 * f1 + r12 * f2
    g2 = r20 * f0 + r21 * f1 + r22 * f2
    p0, p1, p2 = w[at(p)], w[at(p + 1)], w[at(p + 2)]
    w[at(o)] += r00 * n0 + r01 * n1 + r02 * n2 + p1 * g2 - p2 * g1
    w[at(o + ostep)] += r10 * n0 + r11 * n1 + r12 * n2 + p2 * g0 - p0 * g2
    w[at(o + 2 * ostep)] += r20 * n0 + r21 * n1 + r22 * n2 + p0 * g1 - p1 * g0
    w[at(o + 3 * ostep)] += g0
    w[at(o + 4 * ostep)] += g1
    w[at(o + 5 * ostep)] += g2


@kernel
def inertia_to_parent(w, R, p, Ia, P, NX):
    """P[0:6, 0:6] (row stride NX) += X^T Ia X for Ia = [[A, B], [B^T, C]] (6 x 6 at w[Ia]) in child
    axes at the child origin, X = [[R^T, 0], [-R^T skew(p), R^T]]: each 3 x 3 block turned into the
    parent's axes, A' = R A R^T, B' = R B R^T, C' = R C R^T, then moved to the parent's origin:
    B'' = B' + skew(p) C', A'' = A' + skew(p) B'^T - B'' skew(p), C'' = C' (about 200 multiplications
    where the dense product takes 340)."""
    r = load9(w, R)
    a00, a01, a02, a11, a12, a22 = rotate_symmetric(r, (w[at(Ia)], w[at(Ia + 1)], w[at(Ia + 2)], w[at(Ia + 7)],
                                                        w[at(Ia + 8)], w[at(Ia + 14)]))
    c00, c01, c02, c11, c12, c22 = rotate_symmetric(r, (w[at(Ia + 21)], w[at(Ia + 22)], w[at(Ia + 23)],
                                                        w[at(Ia + 28)], w[at(Ia + 29)], w[at(Ia + 35)]))
    b00, b01, b02, b10, b11, b12, b20, b21, b22 = rotate(r, (w[at(Ia + 3)], w[at(Ia + 4)], w[at(Ia + 5)],
                                                             w[at(Ia + 9)], w[at(Ia + 10)], w[at(Ia + 11)],
                                                             w[at(Ia + 15)], w[at(Ia + 16)], w[at(Ia + 17)]))
    p0, p1, p2 = w[at(p)], w[at(p + 1)], w[at(p + 2)]
    # A' += skew(p) B'^T: column j of the sum is p x (row j of B')
    a00 += p1 * b02 - p2 * b01
    a01 += p1 * b12 - p2 * b11
    a02 += p1 * b22 - p2 * b21
    a11 += p2 * b10 - p0 * b12
    a12 += p2 * b20 - p0 * b22
    a22 += p0 * b21 - p1 * b20
    # B'' = B' + skew(p) C': column j gains p x (column j of C')
    b00 += p1 * c02 - p2 * c01
    b10 += p2 * c00 - p0 * c02
    b20 += p0 * c01 - p1 * c00
    b01 += p1 * c12 - p2 * c11
    b11 += p2 * c01 - p0 * c12
    b21 += p0 * c11 - p1 * c01
    b02 += p1 * c22 - p2 * c12
    b12 += p2 * c02 - p0 * c22
    b22 += p0 * c12 - p1 * c02
    # A'' = A' - B'' skew(p): row i gains p x (row i of B'')
    a00 += p1 * b02 - p2 * b01
    a01 += p2 * b00 - p0 * b02
    a02 += p0 * b01 - p1 * b00
    a11 += p2 * b10 - p0 * b12
    a12 += p0 * b11 - p1 * b10
    a22 += p0 * b21 - p1 * b20
    upper = (a00, a01, a02, b00, b01, b02, a11, a12, b10, b11, b12, a22, b20, b21, b22,
             c00, c01, c02, c11, c12, c22)
    n = 0
    for i in range(6):
        for j in range(i, 6):
            x = upper[n]
            n += 1
            w[at(P + i * NX + j)] += x
            if j != i:
                w[at(P + j * NX + i)] += x
