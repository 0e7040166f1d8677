"""Expressions the debugger evaluates (``print``, ``x``, ``break *``, ``watch``):
integers (decimal, 0x hex), registers (``r0``, ``$sp``, ``xpsr``...), symbols (the
value of a 1-, 2- or 4-byte object, the address of anything larger or of a function),
``&sym``, ``*addr`` (the 32-bit word there), parentheses, and C's integer operators.
A small parser of its own: nothing is handed to Python's eval."""

from __future__ import annotations

import re
from collections.abc import Callable

from pkasim.base.errors import UsageError

_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)|(\$?[A-Za-z_][A-Za-z0-9_.]*)|(<<|>>|[-+*/%&|^~()]))")
_BINARY = {  # operator: (precedence, function)
    "|": (1, lambda a, b: a | b), "^": (2, lambda a, b: a ^ b), "&": (3, lambda a, b: a & b),
    "<<": (4, lambda a, b: a << b), ">>": (4, lambda a, b: a >> b),
    "+": (5, lambda a, b: a + b), "-": (5, lambda a, b: a - b),
    "*": (6, lambda a, b: a * b), "/": (6, lambda a, b: a // b), "%": (6, lambda a, b: a % b),
}


class Evaluator:
    """Evaluates expressions against a machine's registers, symbols and memory."""

    def __init__(self, register: Callable[[str], int | None], symbol: Callable[[str], tuple[int, int] | None],
                 read_u32: Callable[[int], int], read: Callable[[int, int], bytes]) -> None:
        self._register = register
        self._symbol = symbol
        self._read_u32 = read_u32
        self._read = read

    def __call__(self, text: str) -> int:
        self._tokens = self._lex(text)
        self._i = 0
        if not self._tokens:
            raise UsageError("empty expression")
        value = self._expr(0)
        if self._i != len(self._tokens):
            raise UsageError(f"unexpected '{self._tokens[self._i][1]}' in '{text}'")
        return value

    @staticmethod
    def _lex(text: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise UsageError(f"cannot read '{text[pos:]}' in an expression")
            kind = "num" if m.group(1) else "name" if m.group(2) else "op"
            out.append((kind, m.group(m.lastindex)))
            pos = m.end()
        return out

    def _peek(self) -> tuple[str, str] | None:
        return self._tokens[self._i] if self._i < len(self._tokens) else None

    def _expr(self, min_prec: int) -> int:
        left = self._unary()
        while True:
            tok = self._peek()
            if tok is None or tok[0] != "op" or tok[1] not in _BINARY or _BINARY[tok[1]][0] <= min_prec - 1:
                return left
            prec, fn = _BINARY[tok[1]]
            if prec < min_prec:
                return left
            self._i += 1
            right = self._expr(prec + 1)
            if tok[1] in "/%" and right == 0:
                raise UsageError("division by zero")
            left = fn(left, right)

    def _unary(self) -> int:
        tok = self._peek()
        if tok is None:
            raise UsageError("expression ends too early")
        kind, text = tok
        self._i += 1
        if kind == "op":
            if text == "-":
                return -self._unary()
            if text == "+":
                return self._unary()
            if text == "~":
                return ~self._unary() & 0xFFFFFFFF
            if text == "*":
                return self._read_u32(self._unary() & 0xFFFFFFFF)
            if text == "&":
                name = self._peek()
                if name is None or name[0] != "name":
                    raise UsageError("'&' takes a symbol name")
                self._i += 1
                sym = self._symbol(name[1])
                if sym is None:
                    raise UsageError(f"no symbol named '{name[1]}'")
                return sym[0]
            if text == "(":
                value = self._expr(0)
                if self._peek() != ("op", ")"):
                    raise UsageError("missing ')'")
                self._i += 1
                return value
            raise UsageError(f"unexpected '{text}'")
        if kind == "num":
            return int(text, 0)
        return self._name(text)

    def _name(self, text: str) -> int:
        reg = self._register(text.lstrip("$"))
        if reg is not None:
            return reg
        sym = self._symbol(text)
        if sym is None:
            raise UsageError(f"no register or symbol named '{text}'")
        addr, size = sym
        if size in (1, 2, 4):
            return int.from_bytes(self._read(addr, size), "little")
        return addr
