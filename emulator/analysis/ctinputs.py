"""The secret inputs of ``pkasim ct-check``: what goes into which symbol, run by run.

A secret is an ELF symbol, optionally at a byte offset into it (``SYMBOL+OFFSET``: a
field of a structure, such as a key inside the OpenPGP card's ``card_state``), optionally
with a kind that says how ``--random`` fills it:

  SYMBOL                 random bytes, the symbol's whole size (from OFFSET to its end)
  SYMBOL=bytes:N         N random bytes at the start of the symbol, or at OFFSET (the rest
                         keeps its value)
  SYMBOL=rsa-key:BITS    a random RSA key of BITS bits (e = 65537) in the rsa_key_t layout
                         the RSA images read (emulator/rsa/rsakey.py)
  SYMBOL=rsa-msg:BITS    a random message representative of BITS/8 bytes, big-endian,
                         below the modulus of the same input's rsa-key (below 2^(BITS-1)
                         without one)
  @trng                  not a symbol: the seed of the chip's TRNG (8 bytes, the 64-bit
                         seed little-endian), for secrets the firmware draws from it
                         (key generation); each input gets its own stream

``--inputs DIR`` gives the inputs as files instead: with one secret, every file of DIR
is one input (sorted by name; names starting with '.' are skipped, a FIFO or device is
refused, not skipped); with several, every subdirectory of DIR is one
input and holds a file named after each secret symbol. ``save()`` writes inputs in
that layout, so a run of ``--random`` can be repeated with ``--inputs``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pkasim.base import userfiles
from pkasim.base.errors import InputMissingError, LoadError, UsageError
from pkasim.rsa.rsakey import RsaKey

KINDS = ("bytes", "rsa-key", "rsa-msg")
RSA_BITS = (2048, 4096)  # the sizes the RSA images take
MAX_INPUTS = 100_000
MAX_BYTES = 1 << 28  # no memory region is larger (emulator/base/limits.py)
TRNG = "@trng"  # the pseudo-secret: the TRNG's seed
TRNG_SEED_BYTES = 8


@dataclass(frozen=True)
class Secret:
    """One secret symbol and how --random fills it."""

    symbol: str
    kind: str = "bytes"
    size: int | None = None  # bytes:N; for rsa-key / rsa-msg the key size in bits
    offset: int = 0  # SYMBOL+OFFSET: where in the object the secret starts

    @property
    def name(self) -> str:
        """What the secret is called in inputs, reports and --inputs file names."""
        return f"{self.symbol}+0x{self.offset:x}" if self.offset else self.symbol

    def __str__(self) -> str:
        if self.symbol == TRNG or (self.kind == "bytes" and self.size is None):
            return self.name
        return f"{self.name}={self.kind}:{self.size}"


def parse_secret(text: str) -> Secret:
    """``SYMBOL[+OFFSET]`` or ``SYMBOL[+OFFSET]=KIND:N``, or ``@trng`` (argparse type:
    errors are usage errors)."""
    import argparse

    where, sep, spec = text.partition("=")
    symbol, plus, off = where.partition("+")
    if not symbol:
        raise argparse.ArgumentTypeError(f"expected SYMBOL[+OFFSET] or SYMBOL[+OFFSET]=KIND:N, got {text!r}")
    offset = 0
    if plus:
        try:
            offset = int(off, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: the offset {off!r} is not a whole number") from None
        if not 0 <= offset < MAX_BYTES:
            raise argparse.ArgumentTypeError(f"{text!r}: the offset is 0 to {MAX_BYTES - 1:,}")
    if symbol == TRNG:
        if plus or sep:
            raise argparse.ArgumentTypeError(f"{text!r}: {TRNG} (the TRNG's seed) takes no offset and no kind")
        return Secret(TRNG, "bytes", TRNG_SEED_BYTES)
    if not sep:
        return Secret(symbol, offset=offset)
    kind, colon, number = spec.partition(":")
    if kind not in KINDS or not colon:
        raise argparse.ArgumentTypeError(f"{text!r}: the kind is one of bytes:N, rsa-key:BITS, rsa-msg:BITS")
    try:
        n = int(number, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {number!r} is not a whole number") from None
    if kind == "bytes" and not 1 <= n <= MAX_BYTES:
        raise argparse.ArgumentTypeError(f"{text!r}: bytes:N takes 1 <= N <= {MAX_BYTES:,}")
    if kind != "bytes" and n not in RSA_BITS:
        raise argparse.ArgumentTypeError(f"{text!r}: RSA sizes are {', '.join(map(str, RSA_BITS))} bits")
    return Secret(symbol, kind, n, offset)


@dataclass
class Input:
    """One run's secrets: bytes per symbol, and where they came from (for the report)."""

    name: str
    values: dict[str, bytes] = field(default_factory=dict)  # by Secret.name
    origin: str = ""  # a path, or '' for generated inputs


def random_inputs(secrets: list[Secret], count: int, rooms: dict[str, int], seed: int | None) -> Iterator[Input]:
    """``count`` inputs, made one at a time (a check that stops at the first difference
    makes no more keys than it runs). Bytes and messages come from
    ``random.Random(seed)``; RSA keys from the `cryptography` package's generator
    (fresh keys every time)."""
    rng = random.Random(seed)
    for i in range(count):
        values: dict[str, bytes] = {}
        key: RsaKey | None = None
        for s in sorted(secrets, key=lambda s: s.kind != "rsa-key"):  # keys first: messages need n
            if s.kind == "rsa-key":
                key = RsaKey.generate(s.size)
                values[s.name] = key.pack()
            elif s.kind == "rsa-msg":
                bound = key.n if key is not None and key.nbits == s.size else 1 << (s.size - 1)
                values[s.name] = rng.randrange(bound).to_bytes(s.size // 8, "big")
            else:
                n = s.size if s.size is not None else rooms[s.name]
                values[s.name] = rng.randbytes(n)
        yield Input(f"random #{i + 1}", values)


def read_inputs(directory: str, secrets: list[Secret], rooms: dict[str, int]) -> list[Input]:
    """The inputs of an --inputs directory (layout in the module doc), each file read
    up to one byte past its symbol's size (a longer one is refused, never read whole)."""
    root = Path(directory)
    if not root.exists():
        raise InputMissingError(f"--inputs {directory}: no such directory")
    if not root.is_dir():
        raise InputMissingError(f"--inputs {directory}: not a directory")
    entries = sorted(root.iterdir(), key=lambda p: p.name)
    if len(entries) > MAX_INPUTS:
        raise UsageError(f"--inputs {directory}: more than {MAX_INPUTS:,} entries")
    symbols = [s.name for s in secrets]
    out = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if len(symbols) == 1 and not entry.is_dir():  # a FIFO or device is refused by _read, not skipped
            out.append(Input(entry.name, {symbols[0]: _read(entry, symbols[0], rooms[symbols[0]])}, str(entry)))
        elif entry.is_dir():
            values = {}
            for sym in symbols:
                f = entry / sym
                if not f.exists() and not f.is_symlink():
                    raise InputMissingError(f"{f}: no such file (each input directory holds one file per secret)")
                values[sym] = _read(f, sym, rooms[sym])
            out.append(Input(entry.name, values, str(entry)))
    return out


def _read(path: Path, symbol: str, room: int) -> bytes:
    """One input file, a regular file read up to one byte past the symbol's room."""
    try:
        data = userfiles.read_bounded(path, room)
    except OSError as exc:
        raise InputMissingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > room:
        what = "a TRNG seed" if symbol == TRNG else f"the size of '{symbol}'"
        raise LoadError(f"{path}: more than {room:,} bytes, {what}")
    return data


def save(inp: Input, directory: str, number: int, count: int) -> None:
    """Write input ``number`` of ``count`` in the --inputs layout (a subdirectory per input)."""
    from pkasim.base.errors import OutputError

    sub = Path(directory) / f"input{number:0{len(str(count))}d}"
    try:
        sub.mkdir(parents=True, exist_ok=True)
        for sym, data in inp.values.items():
            (sub / sym).write_bytes(data)
    except OSError as exc:
        raise OutputError(f"{directory}: cannot write the inputs: {exc.strerror or exc}") from None
    inp.origin = str(sub)


def preview(data: bytes, limit: int = 16) -> str:
    """The first bytes in hex, and the length."""
    head = data[:limit].hex()
    return f"{head}{'...' if len(data) > limit else ''} ({len(data):,} bytes)"
