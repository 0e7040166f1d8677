"""ns per MONTMUL in pkasim's native code (peripherals/pka_montmul.c), old against new.

Old is benchmarks/montmul_before.c, the routine before the AVX-512 IFMA rows (64-bit
SOS rows through MULX/ADX); new is peripherals/pka_montmul.c as it is. The script
builds both with the same C compiler and flags as setup.py (-O3 -std=c99), each with
the same timing loop, loads both and, alternating, times chains of MONTMULs like an
exponentiation's (x = x x mod n for squares, x = x b for products) at 256, 1024 and
2048 bits, on each row primitive the CPU has. It prints the best of --repeat runs
and the ratio old / new, and checks that both end on the same bits.

Timing belongs here, never in tests: the machine is shared, so only ratios measured
in one run mean much.

    .venv/bin/python benchmarks/montmul_native.py [--repeat R] [--count N] [--bits 256,1024,2048]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LOOP_C = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <time.h>
#include "pka_montmul.h"

/* count chained MONTMULs: x = x x (square) or x = x b; ns per MONTMUL, -1 on a decline */
double bench_loop(uint32_t *x, const uint32_t *b, const uint32_t *n, uint32_t w, int square, long count) {
    struct timespec t0, t1;
    int bad = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < count; i++) bad |= pk_montmul(x, x, square ? x : b, n, w);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return bad ? -1.0 : ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / count;
}
"""

SOURCES = {"old": ROOT / "benchmarks" / "montmul_before.c", "new": ROOT / "peripherals" / "pka_montmul.c"}


def build(tmp: Path) -> dict[str, ctypes.CDLL]:
    """Both routines as shared libraries, built alike (CC, else cc)."""
    loop = tmp / "loop.c"
    loop.write_text(LOOP_C)
    libs = {}
    for name, source in SOURCES.items():
        out = tmp / f"montmul_{name}.so"
        subprocess.run([os.environ.get("CC", "cc"), "-O3", "-std=c99", "-fPIC", "-shared", "-I",
                        str(ROOT / "peripherals"), "-o", str(out), str(source), str(loop)], check=True)
        lib = ctypes.CDLL(str(out))
        lib.bench_loop.restype = ctypes.c_double
        lib.bench_loop.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_uint32, ctypes.c_int, ctypes.c_long]
        lib.pk_montmul_use_adx.argtypes = [ctypes.c_int]
        libs[name] = lib
    libs["new"].pk_montmul_use_ifma.argtypes = [ctypes.c_int]
    return libs


def paths(libs: dict[str, ctypes.CDLL]) -> list[tuple[str, str, int, int]]:
    """(label, library, use_adx, use_ifma) for each path this CPU has: old and new as
    pkasim runs them by default, then new on its other row primitives."""
    new = libs["new"]
    has_adx = bool(new.pk_montmul_use_adx(1))
    has_ifma = bool(new.pk_montmul_use_ifma(1))
    rows = [("old", "old", 1, 0), ("new", "new", 1, 1)]
    if has_ifma:
        rows.append(("new, no IFMA", "new", 1, 0))
    if has_adx:
        rows += [("old, C rows", "old", 0, 0), ("new, C rows", "new", 0, 0)]
    return rows


def time_one(lib: ctypes.CDLL, adx: int, ifma: int, bits: int, square: bool, count: int,
             rng_seed: int) -> tuple[float, bytes]:
    words = bits // 32
    rng = random.Random(rng_seed)
    n = rng.getrandbits(bits) | 1 | 1 << (bits - 1)
    x0, b = rng.getrandbits(bits) % n, rng.getrandbits(bits) % n
    arr = ctypes.c_uint32 * words
    x = arr.from_buffer_copy(x0.to_bytes(4 * words, "little"))
    lib.pk_montmul_use_adx(adx)
    if hasattr(lib, "pk_montmul_use_ifma"):
        lib.pk_montmul_use_ifma(ifma)
    ns = lib.bench_loop(x, arr.from_buffer_copy(b.to_bytes(4 * words, "little")),
                        arr.from_buffer_copy(n.to_bytes(4 * words, "little")), words, int(square), count)
    assert ns >= 0, f"a MONTMUL of {bits} bits declined"
    return ns, bytes(x)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--count", type=int, default=20000, help="MONTMULs a timed chain")
    ap.add_argument("--bits", default="256,1024,2048")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        libs = build(Path(tmp))
        rows = paths(libs)
        print(f"{'bits':>5} {'op':7} " + " ".join(f"{label:>14}" for label, *_ in rows) + "   old/new")
        for bits in (int(b) for b in args.bits.split(",")):
            for square in (True, False):
                best = {label: float("inf") for label, *_ in rows}
                ends = set()
                for _ in range(args.repeat):
                    for label, lib, adx, ifma in rows:
                        ns, end = time_one(libs[lib], adx, ifma, bits, square, args.count, rng_seed=bits)
                        best[label] = min(best[label], ns)
                        ends.add(end)
                assert len(ends) == 1, f"{bits} bits: the paths end on different bits"
                print(f"{bits:>5} {'square' if square else 'product':7} "
                      + " ".join(f"{best[label]:>11.0f} ns" for label, *_ in rows)
                      + f"   {best['old'] / best['new']:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
