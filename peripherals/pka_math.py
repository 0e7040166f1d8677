"""The PKA's arithmetic, as a pure-integer service behind a command table.

No registers, no RAM, no time: each function takes the operands as Python integers
(``a``, ``b``, the modulus ``n``, the operand length ``words`` in 32-bit words) and
returns ``(result, carry)``, or raises ``OperandError`` when the request breaks a rule
of docs/pka.md (the engine then sets OPERRF). The register front end
(``peripherals/pka.py``) looks opcodes up in ``COMMANDS``.

Results follow docs/pka.md exactly: modular results are fully reduced into [0, N),
whatever the size of A and B; ADD and SUB wrap at 2^(32*LEN) and report the carry
(ADD) or the borrow (SUB). A chip with ``strict_operands`` also refuses a modular
operation whose A or B is N or more (``require_reduced``), as real modular adders and
multipliers that correct their result by one subtraction do.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

WORD_BITS = 32


class OperandError(ValueError):
    """The operands break an arithmetic rule of the operation (OPERRF)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _require_modulus(n: int) -> None:
    if n == 0:
        raise OperandError("modulus N is 0")


def montmul(a: int, b: int, n: int, words: int) -> tuple[int, int]:
    """R = A * B * 2^(-32*words) mod N (Montgomery product), N odd and N > 1."""
    if n % 2 == 0:
        raise OperandError("MONTMUL needs an odd modulus N")
    if n <= 1:
        raise OperandError("MONTMUL needs N > 1")
    return a * b * _r_inverse(n, words) % n, 0


@lru_cache(maxsize=64)
def _r_inverse(n: int, words: int) -> int:
    """R^-1 mod N: a modulus is used for thousands of products in a row."""
    return pow(2, -WORD_BITS * words, n)


def modadd(a: int, b: int, n: int, words: int) -> tuple[int, int]:
    """R = (A + B) mod N, N > 0."""
    _require_modulus(n)
    return (a + b) % n, 0


def modsub(a: int, b: int, n: int, words: int) -> tuple[int, int]:
    """R = (A - B) mod N, N > 0 (Python's % already gives a result in [0, N))."""
    _require_modulus(n)
    return (a - b) % n, 0


def require_reduced(a: int, b: int, n: int) -> None:
    """The strict operand rule (docs/pka.md): A < N and B < N for a modular operation.

    A datapath that reduces its result with one conditional subtraction of N is only
    right for operands below N; a chip with this rule refuses the others (OPERRF)
    instead of computing a wrong result, so firmware that relies on the lenient
    model's full reduction fails loudly on it.
    """
    if a >= n:
        raise OperandError("A >= N (strict_operands: modular operands must be below N)")
    if b >= n:
        raise OperandError("B >= N (strict_operands: modular operands must be below N)")


def add(a: int, b: int, n: int, words: int) -> tuple[int, int]:
    """R = (A + B) mod 2^(32*words); carry = the bit that fell off."""
    total = a + b
    return total & ((1 << (WORD_BITS * words)) - 1), total >> (WORD_BITS * words)


def sub(a: int, b: int, n: int, words: int) -> tuple[int, int]:
    """R = (A - B) mod 2^(32*words); carry = 1 when B > A (a borrow)."""
    return (a - b) & ((1 << (WORD_BITS * words)) - 1), int(b > a)


class Command(NamedTuple):
    """One PKA operation: its name, its maths, and whether it reads N."""

    name: str
    function: Callable[[int, int, int, int], tuple[int, int]]
    uses_n: bool

    @property
    def key(self) -> str:
        """The operation's name in the chip description's ``timing`` and in stats."""
        return self.name.lower()


# CR.OPCODE -> operation (docs/pka.md, "Operations").
COMMANDS: dict[int, Command] = {
    0x01: Command("MONTMUL", montmul, True),
    0x02: Command("MODADD", modadd, True),
    0x03: Command("MODSUB", modsub, True),
    0x04: Command("ADD", add, False),
    0x05: Command("SUB", sub, False),
}
