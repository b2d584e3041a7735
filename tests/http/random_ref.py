"""The reference of crunchd's generated operands ({"random": {"shape", "dist", "seed"}}), in numpy:
the same bits as the daemon's kernels/random.h on every backend. docs/api.md prints this file's
`random_operand`; tests/http/test_random.py checks the daemon against it, element for element.

splitmix64 over (seed, index): w(j) = mix(mix(seed) + (j + 1) * GAMMA). Uniform on [-1, 1): the
top p bits of w(i) as k, k * 2**(1 - p) - 1 (p: 53 float64, 24 float32, 11 float16, 8 bfloat16);
uint8: the top byte. Normal: Box-Muller in float64 on u1 = 1 - (w(2i) >> 11) * 2**-53 and
u2 = (w(2i+1) >> 11) * 2**-53, with ln and cos as the polynomials below (IEEE operations only, so
the C, the CUDA and this agree to the bit), rounded to float32, then to the dtype."""

import numpy as np

GAMMA = np.uint64(0x9E3779B97F4A7C15)
PRECISION = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}

LOG_C = [float.fromhex(h) for h in (
    "0x1.0000000000000p+0", "0x1.5555555555555p-2", "0x1.999999999999ap-3", "0x1.2492492492492p-3",
    "0x1.c71c71c71c71cp-4", "0x1.745d1745d1746p-4", "0x1.3b13b13b13b14p-4", "0x1.1111111111111p-4",
    "0x1.e1e1e1e1e1e1ep-5", "0x1.af286bca1af28p-5", "0x1.8618618618618p-5", "0x1.642c8590b2164p-5")]
COS_C = [float.fromhex(h) for h in (
    "0x1.0000000000000p+0", "-0x1.0000000000000p-1", "0x1.5555555555555p-5", "-0x1.6c16c16c16c17p-10",
    "0x1.a01a01a01a01ap-16", "-0x1.27e4fb7789f5cp-22", "0x1.1eed8eff8d898p-29", "-0x1.93974a8c07c9dp-37",
    "0x1.ae7f3e733b81fp-45", "-0x1.6827863b97d97p-53", "0x1.e542ba4020225p-62", "-0x1.0ce396db7f853p-70")]
SIN_C = [float.fromhex(h) for h in (
    "0x1.0000000000000p+0", "-0x1.5555555555555p-3", "0x1.1111111111111p-7", "-0x1.a01a01a01a01ap-13",
    "0x1.71de3a556c734p-19", "-0x1.ae64567f544e4p-26", "0x1.6124613a86d09p-33", "-0x1.ae7f3e733b81fp-41",
    "0x1.952c77030ad4ap-49", "-0x1.2f49b46814157p-57", "0x1.71b8ef6dcf572p-66", "-0x1.761b41316381ap-75")]


def mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def words(seed, j):
    """w(j) for an array j of indices (uint64 arithmetic wraps, as in C)."""
    with np.errstate(over="ignore"):
        key = mix(np.array([seed], np.uint64))[0]
        return mix(key + (j.astype(np.uint64) + np.uint64(1)) * GAMMA)


def horner(coefs, x):
    p = np.full_like(x, coefs[-1])
    for c in reversed(coefs[:-1]):
        p = p * x + c          # two roundings: numpy never fuses them
    return p


def log01(x):
    """ln x on (0, 1]: x = m 2^e, m in [sqrt(1/2), sqrt(2)), 2 atanh((m - 1)/(m + 1))."""
    bits = x.view(np.uint64)
    e = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64) - 1023
    m = ((bits & np.uint64(0x000FFFFFFFFFFFFF)) | np.uint64(0x3FF0000000000000)).view(np.float64)
    big = m > float.fromhex("0x1.6a09e667f3bcdp+0")
    m = np.where(big, m * 0.5, m)
    e = e + big
    s = (m - 1.0) / (m + 1.0)
    return e.astype(np.float64) * float.fromhex("0x1.62e42fefa39efp-1") + (2.0 * s) * horner(LOG_C, s * s)


def cos_turns(t):
    """cos(2 pi t) on [0, 1): quadrant n of 4t, the polynomial of x = (4t - n) pi/2."""
    t4 = t * 4.0
    n = t4.astype(np.int64)
    x = (t4 - n.astype(np.float64)) * float.fromhex("0x1.921fb54442d18p+0")
    x2 = x * x
    p = np.where(n & 1, horner(SIN_C, x2) * x, horner(COS_C, x2))
    return np.where((n == 1) | (n == 2), -p, p)


def to_bfloat16_bits(f32):
    u = f32.view(np.uint32).astype(np.uint64)
    return ((u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype(np.uint16)


def random_operand(shape, dtype="float32", dist="uniform", seed=0):
    """The operand {"random": {"shape": shape, "dist": dist, "seed": seed}} of a request of dtype,
    as the daemon makes it (bfloat16: its bits, as uint16)."""
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.uint64)
    if dtype == "uint8":
        assert dist == "uniform", "uint8 data is uniform only"
        return (words(seed, i) >> np.uint64(56)).astype(np.uint8).reshape(shape)
    if dist == "uniform":
        p = PRECISION[dtype]
        v = (words(seed, i) >> np.uint64(64 - p)).astype(np.float64) * 2.0 ** (1 - p) - 1.0
    else:
        u1 = 1.0 - (words(seed, 2 * i) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        u2 = (words(seed, 2 * i + 1) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        v = np.sqrt(-2.0 * log01(u1)) * cos_turns(u2)
    if dtype == "float64":
        return v.reshape(shape)
    f = v.astype(np.float32)
    if dtype == "float32":
        return f.reshape(shape)
    if dtype == "float16":
        return f.astype(np.float16).reshape(shape)
    return to_bfloat16_bits(f).reshape(shape)
