"""The debugger's expression parser against Python's own integer arithmetic."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pkasim.base.errors import UsageError
from pkasim.debugger.expr import Evaluator

REGS = {"r0": 7, "sp": 0x20003FE0, "pc": 0x100}
SYMS = {"word": (0x20000000, 4), "table": (0x20000100, 64), "fn": (0x1F0, 0)}
MEMORY = {0x20000000: 0xDEADBEEF, 0x10: 0x1234}


def evaluator() -> Evaluator:
    def read(addr: int, size: int) -> bytes:
        return MEMORY.get(addr, 0).to_bytes(4, "little")[:size]

    return Evaluator(REGS.get, SYMS.get, lambda a: MEMORY.get(a, 0), read)


leaf = st.one_of(st.integers(0, 2**32 - 1).map(str), st.integers(0, 2**32 - 1).map(hex),
                 st.sampled_from(["r0", "$sp", "pc"]))


def combine(children):
    return st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "*", "&", "|", "^"]), children)
          .map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(children, st.integers(0, 31)).map(lambda t: f"({t[0]} << {t[1]})"),
        st.tuples(children, st.integers(0, 31)).map(lambda t: f"({t[0]} >> {t[1]})"),
        children.map(lambda c: f"-{c}"),
    )


@given(st.recursive(leaf, combine, max_leaves=12))
def test_integer_expressions_evaluate_as_python_does(text):
    python = text.replace("$sp", "sp")
    assert evaluator()(text) == eval(python, {}, dict(REGS))  # noqa: S307 - the reference, on generated input


def test_precedence_follows_c():
    ev = evaluator()
    assert ev("1 + 2 * 3") == 7
    assert ev("1 << 2 + 1") == 8
    assert ev("6 & 3 | 8") == 10
    assert ev("10 - 4 - 3") == 3


def test_symbols_read_small_objects_and_give_the_address_of_others():
    ev = evaluator()
    assert ev("word") == 0xDEADBEEF
    assert ev("table") == 0x20000100
    assert ev("&word") == 0x20000000
    assert ev("fn + 2") == 0x1F2
    assert ev("*0x10") == 0x1234
    assert ev("~0") == 0xFFFFFFFF


@pytest.mark.parametrize("text, message", [
    ("", "empty expression"), ("1 +", "expression ends too early"), ("(1", "missing ')'"),
    ("nosuch", "no register or symbol named 'nosuch'"), ("5 / 0", "division by zero"), ("1 @ 2", "cannot read"),
    ("&5", "'&' takes a symbol name"),
])
def test_bad_expressions_are_one_clear_error(text, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        evaluator()(text)
