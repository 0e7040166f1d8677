"""The RSA key model the bench checks firmware results against (emulator/rsa/rsakey.py)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim.rsa.rsakey import RsaKey, demo_key, random_prime

RNG = random.Random(20261126)
SMALL = RsaKey(256, 65537, random_prime(128, RNG), random_prime(128, RNG))


@settings(max_examples=200, deadline=None)
@given(m=st.integers(min_value=0, max_value=SMALL.n - 1))
def test_the_public_check_accepts_the_private_result(m):
    assert SMALL.is_private(m, SMALL.private(m))


@settings(max_examples=200, deadline=None)
@given(m=st.integers(min_value=0, max_value=SMALL.n - 1), out=st.integers(min_value=0, max_value=SMALL.n - 1))
def test_the_public_check_accepts_nothing_but_the_private_result(m, out):
    assert SMALL.is_private(m, out) == (out == SMALL.private(m))


def test_the_public_check_refuses_a_result_congruent_to_the_private_one_but_not_reduced():
    m = 12345
    assert not SMALL.is_private(m, SMALL.private(m) + SMALL.n)
    assert not SMALL.is_private(m, -1)


def test_a_message_not_below_the_modulus_is_checked_as_its_residue():
    m = SMALL.n + 7
    assert SMALL.is_private(m, SMALL.private(m))


def test_the_demo_key_is_read_once_per_process_and_is_the_same_key():
    assert demo_key(2048) is demo_key(2048)
    assert demo_key(2048).nbits == 2048
