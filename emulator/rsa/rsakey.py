"""RSA keys in the firmware's ``rsa_key_t`` layout (firmware/src/rsa.h, after CanoKey).

The emulator core knows nothing about RSA; this module serves the tools that drive
the RSA firmware (``pkasim bench``, the tests): it packs a key into the bytes the
firmware reads through its ``rsa_input_key`` symbol and checks results against
Python integers.

Layout: ``nbits`` (u16, little-endian) at 0, ``e`` at 4 (4 bytes big-endian), then
``p``, ``q``, ``dp``, ``dq``, ``qinv`` at 8, 264, 520, 776, 1032, each 256 bytes with
the value big-endian in its first nbits/16 bytes; 1288 bytes in all.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pkasim.base import limits, resources, userfiles
from pkasim.base.errors import InputMissingError, LoadError

if TYPE_CHECKING:  # `cryptography` loads on first use: sweeps and ct-check unpack keys without it
    from cryptography.hazmat.primitives.asymmetric import rsa

KEY_SIZE = 1288
FIELDS = {"p": 8, "q": 264, "dp": 520, "dq": 776, "qinv": 1032}
KEYS_DIR = resources.keys_dir()  # firmware/keys, bundled as package data
PEM_MAX = limits.KEY_MAX_BYTES


@dataclass(frozen=True)
class RsaKey:
    nbits: int
    e: int
    p: int
    q: int

    @property
    def n(self) -> int:
        return self.p * self.q

    @property
    def d(self) -> int:
        return pow(self.e, -1, (self.p - 1) * (self.q - 1))

    def private(self, m: int) -> int:
        """The reference result: m^d mod n."""
        return pow(m, self.d, self.n)

    def is_private(self, m: int, out: int) -> bool:
        """Whether ``out`` is m^d mod n, checked with the public exponent: for an RSA
        key (n = pq, p and q distinct primes, ed = 1 mod lcm(p - 1, q - 1)) x -> x^e
        mod n is a permutation of the integers mod n, so for 0 <= out < n, out^e = m
        (mod n) holds for out = m^d mod n and no other. Seventeen multiplications for
        e = 65537 instead of the private exponentiation (20 ms at 2048 bits, seconds at
        4096), which a sweep would otherwise pay at every point."""
        return 0 <= out < self.n and pow(out, self.e, self.n) == m % self.n

    def pack(self, nbits: int | None = None) -> bytes:
        """The 1288 bytes of rsa_key_t; ``nbits`` overrides the size field only (to
        test how firmware refuses a size)."""
        half = self.nbits // 16
        out = bytearray(KEY_SIZE)
        out[0:2] = (self.nbits if nbits is None else nbits).to_bytes(2, "little")
        out[4:8] = self.e.to_bytes(4, "big")
        values = {"p": self.p, "q": self.q, "dp": self.d % (self.p - 1), "dq": self.d % (self.q - 1),
                  "qinv": pow(self.q, -1, self.p)}
        for name, offset in FIELDS.items():
            out[offset:offset + half] = values[name].to_bytes(half, "big")
        return bytes(out)

    @classmethod
    def unpack(cls, data: bytes) -> RsaKey:
        nbits = int.from_bytes(data[0:2], "little")
        half = nbits // 16
        p = int.from_bytes(data[8:8 + half], "big")
        q = int.from_bytes(data[264:264 + half], "big")
        return cls(nbits, int.from_bytes(data[4:8], "big"), p, q)

    @classmethod
    def from_cryptography(cls, key: rsa.RSAPrivateKey) -> RsaKey:
        nums = key.private_numbers()
        return cls(key.key_size, nums.public_numbers.e, nums.p, nums.q)

    @classmethod
    def generate(cls, nbits: int, e: int = 65537) -> RsaKey:
        from cryptography.hazmat.primitives.asymmetric import rsa

        return cls.from_cryptography(rsa.generate_private_key(public_exponent=e, key_size=nbits))

    @classmethod
    def load_pem(cls, path: str | Path) -> RsaKey:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        try:
            data = userfiles.read_bounded(path, PEM_MAX, streams=True)
        except OSError as exc:
            raise InputMissingError(f"{path}: cannot read key: {exc.strerror or exc}") from None
        if len(data) > PEM_MAX:
            raise LoadError(f"{path}: more than {PEM_MAX:,} bytes; not a PEM key")
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise LoadError(f"{path}: not an unencrypted PEM private key: {exc}") from None
        if not isinstance(key, rsa.RSAPrivateKey):
            raise LoadError(f"{path}: not an RSA private key")
        return cls.from_cryptography(key)

    def to_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        pub = rsa.RSAPublicNumbers(self.e, self.n)
        d = self.d
        nums = rsa.RSAPrivateNumbers(self.p, self.q, d, d % (self.p - 1), d % (self.q - 1),
                                     pow(self.q, -1, self.p), pub)
        return nums.private_key().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption())


@functools.cache
def demo_key(nbits: int) -> RsaKey:
    """The fixed demo keys shipped in firmware/keys (so benchmark runs are repeatable);
    read once per process (parsing the PEM file takes about 30 ms, every bench run and
    sweep point asks for it; the key is immutable)."""
    return RsaKey.load_pem(KEYS_DIR / f"demo-{nbits}.pem")


_SMALL_PRIMES = [p for p in range(3, 2000) if all(p % q for q in range(2, int(p ** 0.5) + 1))]


def probably_prime(n: int, rng: random.Random) -> bool:
    """Miller-Rabin with 40 rounds after trial division: for keys made from a seeded
    generator (repeatable, unlike cryptography's), e.g. sizes below its 1024-bit minimum."""
    if n < 4:
        return n in (2, 3)
    if any(n % p == 0 for p in _SMALL_PRIMES):
        return n in _SMALL_PRIMES
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for _ in range(40):
        x = pow(rng.randrange(2, n - 1), d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def random_prime(bits: int, rng: random.Random, e: int = 65537) -> int:
    """A prime of exactly ``bits`` bits with the top two set (so a product of two has
    twice the bits, as OpenSSL makes them) and p - 1 prime to ``e``, drawn from ``rng``."""
    while True:
        candidate = rng.getrandbits(bits) | (3 << (bits - 2)) | 1
        if (candidate - 1) % e and probably_prime(candidate, rng):
            return candidate
