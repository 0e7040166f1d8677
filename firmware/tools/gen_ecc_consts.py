"""Write firmware/src/ecc_consts.h: the curve constants the ECC firmware loads into
PKA RAM (docs/ecc.md), each as eight 32-bit words, least significant first.

Everything the firmware multiplies by is stored in Montgomery form (x R mod m,
R = 2^256, the PKA's R at LEN = 8), so the firmware never converts a constant at run
time. tests/test_ecc.py regenerates the header and compares it with the committed one.

    python firmware/tools/gen_ecc_consts.py > firmware/src/ecc_consts.h
"""

from __future__ import annotations

R = 1 << 256

# P-256 (SEC 2 v2, section 2.4.2; FIPS 186-4 D.1.2.3)
P256_P = 2**256 - 2**224 + 2**192 + 2**96 - 1
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
P256_B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
P256_GX = 0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296
P256_GY = 0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5

# Curve25519 / edwards25519 (RFC 7748 section 4.1, RFC 8032 section 5.1)
F25519_P = 2**255 - 19
ED_L = 2**252 + 27742317777372353535851937790883648493
ED_D = -121665 * pow(121666, -1, F25519_P) % F25519_P
ED_BY = 4 * pow(5, -1, F25519_P) % F25519_P
SQRT_M1 = pow(2, (F25519_P - 1) // 4, F25519_P)
A24 = 121665  # RFC 7748: (486662 - 2) / 4


def _ed_bx() -> int:
    u = (ED_BY * ED_BY - 1) % F25519_P
    v = (ED_D * ED_BY * ED_BY + 1) % F25519_P
    x = u * pow(v, 3, F25519_P) * pow(u * pow(v, 7, F25519_P), (F25519_P - 5) // 8, F25519_P) % F25519_P
    if v * x * x % F25519_P != u:
        x = x * SQRT_M1 % F25519_P
    return x if x % 2 == 0 else F25519_P - x  # RFC 8032: the base point's x is "positive" (even)


ED_BX = _ed_bx()


def mont(x: int, m: int) -> int:
    return x * R % m


def constants() -> list[tuple[str, int, str]]:
    """(name, value, comment) in header order."""
    c = []

    def add(name: str, value: int, comment: str) -> None:
        assert 0 <= value < R, name
        c.append((name, value, comment))

    add("P256_P", P256_P, "p = 2^256 - 2^224 + 2^192 + 2^96 - 1")
    add("P256_ONE", mont(1, P256_P), "R mod p (1 in Montgomery form)")
    add("P256_RR", R * R % P256_P, "R^2 mod p (MONTMUL by it converts into Montgomery form)")
    add("P256_BM", mont(P256_B, P256_P), "b R mod p")
    add("P256_GXM", mont(P256_GX, P256_P), "G.x R mod p")
    add("P256_GYM", mont(P256_GY, P256_P), "G.y R mod p")
    add("P256_PM2", P256_P - 2, "p - 2 (Fermat inversion exponent)")
    add("P256_N", P256_N, "n, the order of G")
    add("P256_ONEN", mont(1, P256_N), "R mod n")
    add("P256_RRN", R * R % P256_N, "R^2 mod n")
    add("P256_NK1", mont(2**128, P256_N), "2^128 R mod n (reduces the top 128 bits of a 256-bit number)")
    add("P256_NM2", P256_N - 2, "n - 2")
    add("F25519_P", F25519_P, "p = 2^255 - 19")
    add("F25519_ONE", mont(1, F25519_P), "R mod p")
    add("F25519_RR", R * R % F25519_P, "R^2 mod p")
    add("F25519_A24", mont(A24, F25519_P), "121665 R mod p (RFC 7748 a24)")
    add("F25519_PM2", F25519_P - 2, "p - 2")
    add("F25519_PM58", (F25519_P - 5) // 8, "(p - 5) / 8 (RFC 8032 square root)")
    add("ED_DM", mont(ED_D, F25519_P), "d R mod p")
    add("ED_D2M", mont(2 * ED_D, F25519_P), "2d R mod p")
    add("ED_SQRTM1", mont(SQRT_M1, F25519_P), "sqrt(-1) R mod p")
    add("ED_BXM", mont(ED_BX, F25519_P), "B.x R mod p")
    add("ED_BYM", mont(ED_BY, F25519_P), "B.y R mod p")
    add("ED_BTM", mont(ED_BX * ED_BY, F25519_P), "B.x B.y R mod p")
    add("ED_L", ED_L, "L = 2^252 + 27742317777372353535851937790883648493, the order of B")
    add("ED_ONEL", mont(1, ED_L), "R mod L")
    add("ED_RRL", R * R % ED_L, "R^2 mod L")
    add("ED_LK1", mont(2**128, ED_L), "2^128 R mod L")
    add("ED_LK2", mont(2**256, ED_L), "2^256 R mod L")
    add("ED_LK3", mont(2**384, ED_L), "2^384 R mod L")
    return c


# ---- the comb tables of the base points --------------------------------------------

def p256_add(p1: tuple[int, int] | None, p2: tuple[int, int] | None) -> tuple[int, int] | None:
    """Affine P-256 addition (None is the point at infinity)."""
    if p1 is None:
        return p2
    if p2 is None:
        return p1
    (x1, y1), (x2, y2) = p1, p2
    if x1 == x2 and (y1 + y2) % P256_P == 0:
        return None
    if p1 == p2:
        lam = (3 * x1 * x1 - 3) * pow(2 * y1, -1, P256_P) % P256_P
    else:
        lam = (y2 - y1) * pow(x2 - x1, -1, P256_P) % P256_P
    x3 = (lam * lam - x1 - x2) % P256_P
    return x3, (lam * (x1 - x3) - y1) % P256_P


def p256_mul(k: int, pt: tuple[int, int]) -> tuple[int, int] | None:
    acc = None
    for bit in bin(k)[2:]:
        acc = p256_add(acc, acc)
        if bit == "1":
            acc = p256_add(acc, pt)
    return acc


def ed_add(p1: tuple[int, int], p2: tuple[int, int]) -> tuple[int, int]:
    """Affine edwards25519 addition (complete)."""
    (x1, y1), (x2, y2) = p1, p2
    t = ED_D * x1 * x2 * y1 * y2 % F25519_P
    x3 = (x1 * y2 + x2 * y1) * pow(1 + t, -1, F25519_P) % F25519_P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, -1, F25519_P) % F25519_P
    return x3, y3


def ed_mul(k: int, pt: tuple[int, int]) -> tuple[int, int]:
    acc = (0, 1)
    for bit in bin(k)[2:]:
        acc = ed_add(acc, acc)
        if bit == "1":
            acc = ed_add(acc, pt)
    return acc


COMB_TEETH = 4
COMB_SPACING = 64  # bits between teeth: 4 x 64 = 256


def comb_scalars() -> list[int]:
    """Entry i of a comb table is this multiple of the base point: the sum of
    2^(64 j) over the bits j of i."""
    return [sum(1 << (COMB_SPACING * j) for j in range(COMB_TEETH) if i >> j & 1) for i in range(1 << COMB_TEETH)]


def p256_comb() -> list[list[int]]:
    """(X, Y, Z) in Montgomery form: (x R, y R, R), the point at infinity (0, R, 0)."""
    rows = []
    for k in comb_scalars():
        pt = p256_mul(k, (P256_GX, P256_GY))
        rows.append([0, mont(1, P256_P), 0] if pt is None else
                    [mont(pt[0], P256_P), mont(pt[1], P256_P), mont(1, P256_P)])
    return rows


def ed_comb() -> list[list[int]]:
    """(y + x, y - x, 2 d x y) in Montgomery form (the "Niels" form of affine points)."""
    rows = []
    for k in comb_scalars():
        x, y = ed_mul(k, (ED_BX, ED_BY))
        rows.append([mont(y + x, F25519_P), mont(y - x, F25519_P), mont(2 * ED_D * x * y, F25519_P)])
    return rows


def table(name: str, rows: list[list[int]], comment: str) -> list[str]:
    out = [f"/* {comment} */", f"static const uint32_t {name}[{len(rows)}][{8 * len(rows[0])}] = {{"]
    for row in rows:
        out.append("    {" + ",\n     ".join(words(v) for v in row).replace("\\n", "\n") + "},")
    out.append("};")
    return out


def words(x: int) -> str:
    return ", ".join(f"0x{(x >> (32 * i)) & 0xFFFFFFFF:08x}u" for i in range(8))


def header() -> str:
    lines = [
        "/* Generated by firmware/tools/gen_ecc_consts.py: do not edit. Curve constants,",
        " * eight 32-bit words each, least significant first; R = 2^256. */",
        "#ifndef PKASIM_ECC_CONSTS_H",
        "#define PKASIM_ECC_CONSTS_H",
        "",
        "#include <stdint.h>",
        "",
    ]
    for name, value, comment in constants():
        lines.append(f"/* {comment} */")
        lines.append(f"static const uint32_t {name}[8] = {{{words(value)}}};")
    lines += [""]
    lines += table("P256_COMB", p256_comb(), "comb table of G: entry i = sum of 2^(64 j) G over the bits j of i, "
                   "(X, Y, Z) in Montgomery form")
    lines += table("ED_COMB", ed_comb(), "comb table of B: entry i = sum of 2^(64 j) B over the bits j of i, "
                   "(y + x, y - x, 2 d x y) in Montgomery form")
    lines += ["", "#endif", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(header(), end="")
