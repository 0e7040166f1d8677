"""Statistics over traces, in one pass and flat memory: Welch's t-test (TVLA) and CPA.

TVLA (Goodwill, Jun, Jaffe, Rohatgi 2011; ISO/IEC 17825) compares a group of traces
taken with fixed inputs and a group with random ones, sample by sample, with Welch's
t-statistic; |t| > 4.5 at any sample is taken as evidence of a leak (at first order:
the means differ). At second order the traces are first centred on their group's mean
and squared, so the test compares the groups' variances (Schneider, Moradi, CHES
2015); bivariately, the centred product of two samples (PairMoments), for the shares of
a masked value that leak at different cycles. All come from the groups' running central moments, kept per sample and merged
batch by batch with the pairwise update of Chan et al. and Pebay (Sandia report
SAND2008-6212): a batch of traces is reduced to its count, mean and central sums, and
merged; nothing per trace is kept, so memory does not grow with the number of traces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pkasim.base import limits

THRESHOLD = 4.5  # TVLA's |t| threshold (Goodwill et al.; ISO/IEC 17825)


@dataclass
class Moments:
    """Count, mean and central sums M2..M4 (per sample) of one group of traces."""

    n: int
    mean: np.ndarray
    m2: np.ndarray
    m3: np.ndarray | None = None
    m4: np.ndarray | None = None

    @classmethod
    def empty(cls, size: int, order: int) -> Moments:
        zeros = np.zeros(size)
        return cls(0, zeros.copy(), zeros.copy(), zeros.copy() if order > 1 else None,
                   zeros.copy() if order > 1 else None)

    @classmethod
    def of(cls, traces: np.ndarray, order: int) -> Moments:
        """The moments of a batch of traces (rows)."""
        x = np.asarray(traces, dtype=np.float64)
        n = len(x)
        if n == 0:
            return cls.empty(x.shape[1], order)
        mean = x.mean(axis=0)
        c = x - mean
        c2 = c * c
        m2 = c2.sum(axis=0)
        if order < 2:
            return cls(n, mean, m2)
        return cls(n, mean, m2, (c2 * c).sum(axis=0), (c2 * c2).sum(axis=0))

    def merge(self, other: Moments) -> None:
        """Add another group's traces (Pebay's pairwise update, in place)."""
        if other.n == 0:
            return
        if self.n == 0:
            self.n, self.mean, self.m2, self.m3, self.m4 = (other.n, other.mean.copy(), other.m2.copy(),
                                                            None if other.m3 is None else other.m3.copy(),
                                                            None if other.m4 is None else other.m4.copy())
            return
        na, nb = float(self.n), float(other.n)
        n = na + nb
        delta = other.mean - self.mean
        d_n = delta / n
        if self.m3 is not None and other.m3 is not None:
            d2 = delta * delta
            self.m4 = (self.m4 + other.m4 + d2 * d2 * na * nb * (na * na - na * nb + nb * nb) / (n ** 3)
                       + 6.0 * d2 * (na * na * other.m2 + nb * nb * self.m2) / (n * n)
                       + 4.0 * delta * (na * other.m3 - nb * self.m3) / n)
            self.m3 = (self.m3 + other.m3 + d2 * delta * na * nb * (na - nb) / (n * n)
                       + 3.0 * delta * (na * other.m2 - nb * self.m2) / n)
        self.m2 = self.m2 + other.m2 + delta * d_n * na * nb
        self.mean = self.mean + d_n * nb
        self.n = int(n)

    def centred_square(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of (x - mean)^2: the second-order test's samples."""
        n = float(self.n)
        mean = self.m2 / n
        var = self.m4 / n - mean * mean
        return mean, var * n / (n - 1)


def welch_t(a: Moments, b: Moments, order: int = 1) -> np.ndarray:
    """Welch's t per sample between two groups, at first or second order. Where both
    groups are exactly constant (no noise) t is 0 if they agree and +-inf if not."""
    if a.n < 2 or b.n < 2:
        raise ValueError("Welch's t needs at least 2 traces per group")
    if order == 1:
        ma, mb = a.mean, b.mean
        va, vb = a.m2 / (a.n - 1), b.m2 / (b.n - 1)
    else:
        ma, va = a.centred_square()
        mb, vb = b.centred_square()
    return _t(ma - mb, np.sqrt(np.maximum(va, 0.0) / a.n + np.maximum(vb, 0.0) / b.n))


# ---------------------------------------------------------------------- bivariate

MAX_PAIRS = limits.POWER_PAIRS_MAX  # pairs of samples a bivariate test keeps (4 x 8 MiB of co-moments per group)


@dataclass(frozen=True)
class Pairs:
    """The pairs of samples a bivariate second-order test combines: every (i, j) of a
    window of ``samples`` with 0 < j - i <= ``distance``, ordered by distance, then i.

    A first-order masking splits a value into shares that a program may handle at
    different cycles: no single sample depends on the value, but the product of the two
    samples where its shares leak does (Chari et al., CRYPTO 1999). The univariate
    test only sees shares that leak at the same cycle."""

    samples: int
    distance: int

    @property
    def count(self) -> int:
        d = self.distance
        return d * self.samples - d * (d + 1) // 2

    def offsets(self) -> list[tuple[int, int]]:
        """(distance, offset of its first pair) for each distance from 1 up."""
        out, at = [], 0
        for d in range(1, self.distance + 1):
            out.append((d, at))
            at += self.samples - d
        return out

    def pair(self, index: int) -> tuple[int, int]:
        """Samples (i, j) of the pair at flat ``index``."""
        for d, at in self.offsets():
            if index < at + self.samples - d:
                i = index - at
                return i, i + d
        raise IndexError(index)

    def index(self) -> tuple[np.ndarray, np.ndarray]:
        """The first and second sample of every pair, in flat order."""
        i = np.concatenate([np.arange(self.samples - d) for d in range(1, self.distance + 1)])
        j = np.concatenate([np.arange(d, self.samples) for d in range(1, self.distance + 1)])
        return i, j


@dataclass
class PairMoments:
    """One group's moments for a bivariate test: count, per-sample mean and M2, and per
    pair (i, j) the central co-moments M11, M21, M12, M22 (sums of
    (x_i - mean_i)^p (x_j - mean_j)^q), merged batch by batch as the univariate ones.

    The centred product (x_i - mean_i)(x_j - mean_j) has mean M11/n and variance
    M22/n - (M11/n)^2: what the t-test compares, with each group's own final means, in
    one pass (the one-pass form of Schneider and Moradi's centred product)."""

    pairs: Pairs
    n: int
    mean: np.ndarray
    m2: np.ndarray
    c11: np.ndarray
    c21: np.ndarray
    c12: np.ndarray
    c22: np.ndarray

    @classmethod
    def empty(cls, pairs: Pairs) -> PairMoments:
        z, zp = np.zeros(pairs.samples), np.zeros(pairs.count)
        return cls(pairs, 0, z.copy(), z.copy(), zp.copy(), zp.copy(), zp.copy(), zp.copy())

    @classmethod
    def of(cls, traces: np.ndarray, pairs: Pairs) -> PairMoments:
        """The moments of a batch of traces (rows)."""
        x = np.asarray(traces, dtype=np.float64)
        out = cls.empty(pairs)
        if len(x) == 0:
            return out
        out.n = len(x)
        out.mean = x.mean(axis=0)
        c = x - out.mean
        c2 = c * c
        out.m2 = c2.sum(axis=0)
        s = pairs.samples
        for d, at in pairs.offsets():
            seg = slice(at, at + s - d)
            a, b, a2, b2 = c[:, :s - d], c[:, d:], c2[:, :s - d], c2[:, d:]
            out.c11[seg] = np.einsum("ij,ij->j", a, b)
            out.c21[seg] = np.einsum("ij,ij->j", a2, b)
            out.c12[seg] = np.einsum("ij,ij->j", a, b2)
            out.c22[seg] = np.einsum("ij,ij->j", a2, b2)
        return out

    def merge(self, other: PairMoments) -> None:
        """Add another batch of the same group: both sides' sums are moved to the merged
        mean (binomial expansion of (c + shift)^p (c' + shift')^q; Pebay, SAND2008-6212)
        and added."""
        if other.n == 0:
            return
        if self.n == 0:
            for name in ("n", "mean", "m2", "c11", "c21", "c12", "c22"):
                value = getattr(other, name)
                setattr(self, name, value if name == "n" else value.copy())
            return
        i, j = self.pairs.index()
        na, nb = float(self.n), float(other.n)
        n = na + nb
        delta = other.mean - self.mean
        parts = []
        for side, shift in ((self, -nb / n * delta), (other, na / n * delta)):
            a, b = shift[i], shift[j]
            m20, m02 = side.m2[i], side.m2[j]
            parts.append((
                side.c11 + side.n * a * b,
                side.c21 + b * m20 + 2 * a * side.c11 + side.n * a * a * b,
                side.c12 + a * m02 + 2 * b * side.c11 + side.n * a * b * b,
                side.c22 + 2 * b * side.c21 + b * b * m20 + 2 * a * side.c12 + 4 * a * b * side.c11
                + a * a * m02 + side.n * a * a * b * b,
            ))
        self.c11, self.c21, self.c12, self.c22 = (x + y for x, y in zip(*parts))
        self.m2 = self.m2 + other.m2 + delta * delta * na * nb / n
        self.mean = self.mean + delta * nb / n
        self.n = int(n)

    def centred_product(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of (x_i - mean_i)(x_j - mean_j) for every pair."""
        n = float(self.n)
        mean = self.c11 / n
        return mean, (self.c22 / n - mean * mean) * n / (n - 1)


def welch_t_pairs(a: PairMoments, b: PairMoments) -> np.ndarray:
    """Welch's t per pair between two groups' centred products (bivariate second order)."""
    if a.n < 2 or b.n < 2:
        raise ValueError("Welch's t needs at least 2 traces per group")
    ma, va = a.centred_product()
    mb, vb = b.centred_product()
    return _t(ma - mb, np.sqrt(np.maximum(va, 0.0) / a.n + np.maximum(vb, 0.0) / b.n))


def _t(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        t = num / den
    exact = den == 0
    t[exact] = np.where(np.isclose(num[exact], 0.0, rtol=0, atol=1e-9), 0.0, np.copysign(np.inf, num[exact]))
    return t


# ---------------------------------------------------------------------- CPA

Intermediate = Callable[[dict[str, np.ndarray], int, int], np.ndarray]


@dataclass
class CpaSums:
    """Running sums for the correlation of a trace set with predictions for every key
    guess (Brier, Clavier, Olivier, CHES 2004): sums of x, x^2, h, h^2 and h x."""

    n: int
    sx: np.ndarray
    sxx: np.ndarray
    sh: np.ndarray  # (guesses,)
    shh: np.ndarray
    shx: np.ndarray  # (guesses, samples)

    @classmethod
    def empty(cls, guesses: int, size: int) -> CpaSums:
        return cls(0, np.zeros(size), np.zeros(size), np.zeros(guesses), np.zeros(guesses),
                   np.zeros((guesses, size)))

    def add(self, traces: np.ndarray, predictions: np.ndarray) -> None:
        """A batch: traces (n, samples), predictions (n, guesses)."""
        x = np.asarray(traces, dtype=np.float64)
        h = np.asarray(predictions, dtype=np.float64)
        self.n += len(x)
        self.sx += x.sum(axis=0)
        self.sxx += (x * x).sum(axis=0)
        self.sh += h.sum(axis=0)
        self.shh += (h * h).sum(axis=0)
        self.shx += h.T @ x

    def correlation(self) -> np.ndarray:
        """Pearson's r, (guesses, samples); 0 where either side does not vary."""
        n = float(self.n)
        cov = self.shx - np.outer(self.sh, self.sx) / n
        vx = self.sxx - self.sx * self.sx / n
        vh = self.shh - self.sh * self.sh / n
        den = np.sqrt(np.outer(np.maximum(vh, 0.0), np.maximum(vx, 0.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(den > 0, cov / den, 0.0)
        return r


HW8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)
AES_SBOX = bytes.fromhex(
    "637c777bf26b6fc53001672bfed7ab76ca82c97dfa5947f0add4a2af9ca472c0"
    "b7fd9326363ff7cc34a5e5f171d8311504c723c31896059a071280e2eb27b275"
    "09832c1a1b6e5aa0523bd6b329e32f8453d100ed20fcb15b6acbbe394a4c58cf"
    "d0efaafb434d338545f9027f503c9fa851a3408f929d38f5bcb6da2110fff3d2"
    "cd0c13ec5f974417c4a77e3d645d197360814fdc222a908846eeb814de5e0bdb"
    "e0323a0a4906245cc2d3ac629195e479e7c8376d8dd54ea96c56f4ea657aae08"
    "ba78252e1ca6b4c6e8dd741f4bbd8b8a703eb5664803f60e613557b986c11d9e"
    "e1f8981169d98e949b1e87e9ce5528df8ca1890dbfe6426841992d0fb054bb16")
_SBOX = np.frombuffer(AES_SBOX, dtype=np.uint8)


def aes_sbox_hw(symbol: str) -> Intermediate:
    """The first-round S-box output's Hamming weight, HW(S[p[byte] ^ guess]), for the
    plaintext in ``symbol``: the classic CPA target of AES-128."""

    def intermediate(inputs: dict[str, np.ndarray], byte: int, guess: int) -> np.ndarray:
        return HW8[_SBOX[inputs[symbol][:, byte] ^ guess]]

    intermediate.__name__ = f"aes_sbox_hw({symbol})"
    return intermediate
