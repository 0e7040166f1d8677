"""The statistics of pkasim tvla and cpa: one-pass moments merged batch by batch equal
the moments of all traces at once, Welch's t at first and second order, and CPA on
synthetic traces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim.analysis.power import aes_sbox_hw, cpa
from pkasim.analysis.power.stats import HW8, Moments, PairMoments, Pairs, welch_t, welch_t_pairs

SBOX = np.frombuffer(bytes.fromhex(
    "637c777bf26b6fc53001672bfed7ab76ca82c97dfa5947f0add4a2af9ca472c0"
    "b7fd9326363ff7cc34a5e5f171d8311504c723c31896059a071280e2eb27b275"
    "09832c1a1b6e5aa0523bd6b329e32f8453d100ed20fcb15b6acbbe394a4c58cf"
    "d0efaafb434d338545f9027f503c9fa851a3408f929d38f5bcb6da2110fff3d2"
    "cd0c13ec5f974417c4a77e3d645d197360814fdc222a908846eeb814de5e0bdb"
    "e0323a0a4906245cc2d3ac629195e479e7c8376d8dd54ea96c56f4ea657aae08"
    "ba78252e1ca6b4c6e8dd741f4bbd8b8a703eb5664803f60e613557b986c11d9e"
    "e1f8981169d98e949b1e87e9ce5528df8ca1890dbfe6426841992d0fb054bb16"), dtype=np.uint8)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 12), min_size=1, max_size=6), seed=st.integers(0, 2**32))
def test_merged_batches_have_the_moments_of_all_traces(sizes, seed):
    rng = np.random.default_rng(seed)
    batches = [rng.normal(3.0, 2.0, (n, 5)) for n in sizes]
    acc = Moments.empty(5, 2)
    for b in batches:
        acc.merge(Moments.of(b, 2))
    whole = np.concatenate(batches)
    if len(whole) == 0:
        assert acc.n == 0
        return
    direct = Moments.of(whole, 2)
    assert acc.n == len(whole)
    for name in ("mean", "m2", "m3", "m4"):
        assert np.allclose(getattr(acc, name), getattr(direct, name), rtol=1e-9, atol=1e-6), name


def test_first_order_t_is_welch_s_statistic():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, (50, 3)), rng.normal(0.5, 2, (70, 3))
    t = welch_t(Moments.of(a, 1), Moments.of(b, 1), 1)
    expected = (a.mean(0) - b.mean(0)) / np.sqrt(a.var(0, ddof=1) / 50 + b.var(0, ddof=1) / 70)
    assert np.allclose(t, expected)


def test_second_order_t_compares_centred_squares():
    rng = np.random.default_rng(2)
    a, b = rng.normal(0, 1, (400, 2)), rng.normal(0, 3, (400, 2))  # same means, other variances
    assert np.abs(welch_t(Moments.of(a, 2), Moments.of(b, 2), 1)).max() < 4.5
    t2 = welch_t(Moments.of(a, 2), Moments.of(b, 2), 2)
    ca, cb = (a - a.mean(0)) ** 2, (b - b.mean(0)) ** 2
    expected = (ca.mean(0) - cb.mean(0)) / np.sqrt(ca.var(0, ddof=1) / 400 + cb.var(0, ddof=1) / 400)
    assert np.allclose(t2, expected, rtol=1e-3)
    assert np.abs(t2).min() > 4.5


def test_without_noise_an_exact_difference_is_infinite_and_an_exact_agreement_zero():
    a = np.array([[1.0, 5.0], [1.0, 5.0], [1.0, 5.0]])
    b = np.array([[1.0, 6.0], [1.0, 6.0], [1.0, 6.0]])
    t = welch_t(Moments.of(a, 1), Moments.of(b, 1), 1)
    assert t[0] == 0 and t[1] == -np.inf


def test_welch_t_needs_two_traces_per_group():
    with pytest.raises(ValueError):
        welch_t(Moments.of(np.zeros((1, 2)), 1), Moments.of(np.zeros((5, 2)), 1), 1)


def test_cpa_finds_each_key_byte_of_synthetic_sbox_leakage():
    rng = np.random.default_rng(3)
    key = rng.integers(0, 256, 4, dtype=np.uint8)
    pt = rng.integers(0, 256, (300, 4), dtype=np.uint8)
    traces = rng.normal(0, 1.0, (300, 20))
    for b in range(4):
        traces[:, 3 + 4 * b] += HW8[SBOX[pt[:, b] ^ key[b]]]
    result = cpa(traces, {"pt": pt}, aes_sbox_hw("pt"), range(4), key=key.tobytes())
    assert [b.guess for b in result.bytes] == list(key)
    assert [b.sample for b in result.bytes] == [3, 7, 11, 15]
    assert result.recovered == 4
    assert result.traces_needed is not None and result.traces_needed <= 300


def test_cpa_on_noise_recovers_nothing_reliably():
    rng = np.random.default_rng(4)
    pt = rng.integers(0, 256, (60, 2), dtype=np.uint8)
    result = cpa(rng.normal(0, 1, (60, 8)), {"pt": pt}, aes_sbox_hw("pt"), range(2), key=b"\x11\x22")
    assert result.traces_needed is None or result.recovered < 2


def _centred_products(x: np.ndarray, pairs) -> np.ndarray:
    i, j = pairs.index()
    c = x - x.mean(axis=0)
    return c[:, i] * c[:, j]


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 9), min_size=1, max_size=6), distance=st.integers(1, 5),
       seed=st.integers(0, 2**32))
def test_merged_pair_moments_equal_the_centred_products_of_all_traces(sizes, distance, seed):
    rng = np.random.default_rng(seed)
    pairs = Pairs(6, min(distance, 5))
    batches = [rng.normal(3.0, 2.0, (n, 6)) for n in sizes]
    acc = PairMoments.empty(pairs)
    for b in batches:
        acc.merge(PairMoments.of(b, pairs))
    whole = np.concatenate(batches)
    assert acc.n == len(whole)
    if len(whole) < 2:
        return
    p = _centred_products(whole, pairs)
    mean, var = acc.centred_product()
    assert np.allclose(mean, p.mean(axis=0), rtol=1e-9, atol=1e-6)
    assert np.allclose(var, p.var(axis=0, ddof=1), rtol=1e-7, atol=1e-6)


def test_pairs_are_every_two_samples_within_the_distance():
    pairs = Pairs(5, 2)
    i, j = pairs.index()
    assert pairs.count == len(i) == 7
    assert set(zip(i.tolist(), j.tolist())) == {(0, 1), (1, 2), (2, 3), (3, 4), (0, 2), (1, 3), (2, 4)}
    assert [pairs.pair(k) for k in range(pairs.count)] == list(zip(i.tolist(), j.tolist()))


def test_bivariate_t_finds_shares_leaking_at_different_samples():
    # a byte x in two shares, x ^ m at sample 1 and m at sample 3, as Hamming weights plus
    # noise: no sample's mean or variance depends on x, the product of samples 1 and 3 does
    # (its mean is (8 - 2 HW(x)) / 4: the fixed x needs HW(x) != 4)
    rng = np.random.default_rng(3)
    n = 4000

    def group(fixed: bool) -> np.ndarray:
        x = np.full(n, 0x03, dtype=np.uint8) if fixed else rng.integers(0, 256, n, dtype=np.uint8)
        m = rng.integers(0, 256, n, dtype=np.uint8)
        t = rng.normal(0, 0.5, (n, 4))
        t[:, 1] += HW8[x ^ m]
        t[:, 3] += HW8[m]
        return t

    a, b = group(True), group(False)
    assert np.abs(welch_t(Moments.of(a, 2), Moments.of(b, 2), 1)).max() < 4.5
    assert np.abs(welch_t(Moments.of(a, 2), Moments.of(b, 2), 2)).max() < 4.5
    pairs = Pairs(4, 3)
    t = welch_t_pairs(PairMoments.of(a, pairs), PairMoments.of(b, pairs))
    expected = (_centred_products(a, pairs).mean(0) - _centred_products(b, pairs).mean(0))
    assert np.all(np.sign(t[expected != 0]) == np.sign(expected[expected != 0]))
    peak = int(np.argmax(np.abs(t)))
    assert pairs.pair(peak) == (1, 3) and abs(t[peak]) > 4.5
    assert (np.abs(np.delete(t, peak)) < 4.5).all()
