"""Repeatable random RSA keys and messages for a sweep.

A sweep's keys must be the same on every run and every machine (the result cache
keys on them, and two engines must give the same table), so they are drawn from a
seeded ``random.Random``, not from the operating system. Primes come from a sieve by
small primes and Miller-Rabin with 40 seeded bases (error below 2^-80 per prime);
p and q are of nbits/2 bits each with the top two bits set, so n has exactly nbits
bits, and gcd(e, p-1) = gcd(e, q-1) = 1. These are test keys, not secrets.

Pure-Python primes are slow (an RSA-4096 key took 14 s on the shared 2-core machine:
each Miller-Rabin step on a 2048-bit candidate is a 2048-bit modular exponentiation),
so a sweep keeps its keys in its result cache (``cached_key``) and makes each once.
"""

from __future__ import annotations

import functools
import hashlib
import random
from typing import Any

from pkasim.rsa.rsakey import RsaKey, random_prime

E = 65537
@functools.lru_cache(maxsize=64)
def sweep_key(nbits: int, index: int) -> RsaKey:
    """Key number ``index`` of size ``nbits``: the same on every machine."""
    rng = random.Random(f"pkasim sweep key {nbits} {index}")
    while True:
        p, q = random_prime(nbits // 2, rng, E), random_prime(nbits // 2, rng, E)
        if p != q and (p * q).bit_length() == nbits:
            return RsaKey(nbits, E, max(p, q), min(p, q))


KEY_SCHEMA = "pkasim.sweep.key/1"


def cached_key(cache: Any, nbits: int, index: int) -> RsaKey:
    """``sweep_key`` through the result cache: made once per cache, then read back
    (a stored key that does not fit its size is made again)."""
    name = f"{KEY_SCHEMA}/{nbits}/{index}"
    hit = cache.get(name) if cache is not None else None
    if hit is not None:
        try:
            key = RsaKey(nbits, int(hit["e"]), int(hit["p"]), int(hit["q"]))
            if key.n.bit_length() == nbits and key.p.bit_length() == key.q.bit_length() == nbits // 2:
                return key
        except (KeyError, TypeError, ValueError):
            pass
    key = sweep_key(nbits, index)
    if cache is not None:
        cache.put(name, {"e": key.e, "p": str(key.p), "q": str(key.q)})
    return key


def sweep_message(key: RsaKey, index: int) -> int:
    """Message number ``index`` for ``key``: below n, derived from the key and index."""
    seed = hashlib.sha512(f"pkasim sweep message {key.nbits} {key.n} {index}".encode()).digest()
    stream = b"".join(hashlib.sha512(seed + bytes([i])).digest() for i in range(key.nbits // 512 + 1))
    return int.from_bytes(stream[: key.nbits // 8], "big") % key.n
