"""The long fuzzing run (`make fuzz`): every fuzzer, many inputs, counts for docs/robustness.md.

    .venv/bin/python tests/fuzz/run.py [--elf N] [--config N] [--cli N] [--guest N] [--seed S]

Each case runs in a forked child with a wall-clock budget (a case still running after it
is a hang) and an address-space limit (a runaway allocation fails instead of taking the
machine down). Prints one Markdown table: inputs, outcomes by exit code, hangs, crashes,
exit 70, peak memory and the slowest case; then every failing case. Exits 1 if any case
broke the property, 0 otherwise. The tests run the same fuzzers with a few hundred
fixed inputs (tests/fuzz/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cli_cases  # noqa: E402
import config_mutants  # noqa: E402
import elf_mutants  # noqa: E402
import guest  # noqa: E402
from fuzzing import BUILD, Outcome, Tally, run_case  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402


def fuzz_elf(n: int, rng: random.Random, workdir: Path, opts: argparse.Namespace) -> Tally:
    tally = Tally("ELF mutation")
    corpus = elf_mutants.seeds(BUILD)
    for _ in range(n):
        argv, what = elf_mutants.case(rng, corpus, workdir, max_cycles=opts.max_cycles)
        tally.add(what, run(argv, workdir, opts))
    return tally


def fuzz_config(n: int, rng: random.Random, workdir: Path, opts: argparse.Namespace) -> Tally:
    tally = Tally("config mutation (hypothesis)")
    hello = str(BUILD / "hello.elf")

    @seed(rng.getrandbits(64))
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(mutant=config_mutants.chip_file())
    def one(mutant: tuple[bytes, str]) -> None:
        data, bend = mutant
        path = workdir / "chip.yaml"
        path.write_bytes(data.replace(b"{self}", str(path).encode()))
        tally.add(bend, run(["run", hello, "--config", str(path), "--max-cycles", "20000", "-q"], workdir, opts))

    one()
    return tally


def fuzz_cli(n: int, rng: random.Random, workdir: Path, opts: argparse.Namespace) -> Tally:
    tally = Tally("CLI options")
    pool = cli_cases.files(workdir)
    for _ in range(n):
        argv = cli_cases.case(rng, pool)
        tally.add(" ".join(argv), run(argv, workdir, opts))
    return tally


def fuzz_guest(n: int, rng: random.Random, workdir: Path, opts: argparse.Namespace) -> Tally:
    tally = Tally("guest firmware (fuzz.elf)")
    for _ in range(n):
        argv, seed = guest.case(rng, workdir, max_cycles=opts.guest_cycles, steps=opts.steps)
        tally.add(seed, run(argv, workdir, opts))
    return tally


def run(argv: list[str], workdir: Path, opts: argparse.Namespace) -> Outcome:
    return run_case(argv, workdir, budget=opts.budget, memory_mib=opts.memory)


def table(tallies: list[Tally]) -> str:
    rows = ["| fuzzer | inputs | outcomes by exit code | exit 70 | hangs | crashes | peak RSS | slowest |",
            "|---|---:|---|---:|---:|---:|---:|---:|"]
    for t in tallies:
        exit70 = t.statuses.get(70, 0)
        hangs = t.statuses.get("hang", 0)
        crashes = sum(v for k, v in t.statuses.items() if isinstance(k, str) and k.startswith("signal"))
        rows.append(f"| {t.name} | {t.inputs:,} | {t.codes()} | {exit70} | {hangs} | {crashes} | "
                    f"{t.max_rss_kib / 1024:.0f} MiB | {t.slowest:.1f} s |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elf", type=int, default=2000, help="ELF mutants")
    parser.add_argument("--config", type=int, default=2000, help="chip-file mutants")
    parser.add_argument("--cli", type=int, default=600, help="command lines")
    parser.add_argument("--guest", type=int, default=600, help="guest fuzzer seeds")
    parser.add_argument("--seed", type=int, default=None, help="master seed (default: random, printed)")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds before a case counts as a hang")
    parser.add_argument("--memory", type=int, default=3072, help="address-space limit per case, MiB")
    parser.add_argument("--max-cycles", type=int, default=200_000, help="cycle budget of an ELF mutant")
    parser.add_argument("--guest-cycles", type=int, default=2_000_000, help="cycle budget of a guest run")
    parser.add_argument("--steps", type=int, default=400, help="actions per guest run (fuzz_steps)")
    opts = parser.parse_args(argv)
    seed = opts.seed if opts.seed is not None else random.SystemRandom().getrandbits(32)
    print(f"fuzz: master seed {seed} (rerun with --seed {seed})", flush=True)
    tallies = []
    with tempfile.TemporaryDirectory(prefix="pkasim-fuzz-") as tmp:
        for name, count, fuzzer in (("elf", opts.elf, fuzz_elf), ("config", opts.config, fuzz_config),
                                    ("cli", opts.cli, fuzz_cli), ("guest", opts.guest, fuzz_guest)):
            if count <= 0:
                continue
            workdir = Path(tmp) / name
            workdir.mkdir()
            start = time.monotonic()
            tally = fuzzer(count, random.Random(f"{seed}:{name}"), workdir, opts)
            print(f"fuzz: {tally.name}: {tally.inputs:,} inputs in {time.monotonic() - start:.0f} s", flush=True)
            tallies.append(tally)
    print()
    print(table(tallies))
    failures = [t for t in tallies if t.failures]
    for t in failures:
        print()
        print(t.report())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
