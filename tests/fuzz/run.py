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

import card_inputs  # noqa: E402
import cli_cases  # noqa: E402
import config_mutants  # noqa: E402
import ctcheck_inputs  # noqa: E402
import debug_scripts  # noqa: E402
import elf_mutants  # noqa: E402
import guest  # noqa: E402
import regress_files  # noqa: E402
import sweep_files  # noqa: E402
from fuzzing import BUILD, REPO, Outcome, Tally, run_case  # noqa: E402
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


def _command_fuzzer(name: str, module, with_pool: bool = True):
    """A fuzzer whose cases are command lines: ``module.case(rng, [pool,] workdir)``."""

    def fuzz(n: int, rng: random.Random, workdir: Path, opts: argparse.Namespace) -> Tally:
        tally = Tally(name)
        pool = module.files(workdir) if with_pool else None
        for _ in range(n):
            argv, what = module.case(rng, pool, workdir) if with_pool else module.case(rng, workdir)
            tally.add(what, run(argv, workdir, opts))
        return tally

    return fuzz


fuzz_sweep = _command_fuzzer("sweep files", sweep_files)
fuzz_regress = _command_fuzzer("regress suites and baselines", regress_files)
fuzz_card = _command_fuzzer("card keys, states, APDUs", card_inputs)
fuzz_debug = _command_fuzzer("debugger scripts", debug_scripts)
fuzz_ctcheck = _command_fuzzer("ct-check inputs", ctcheck_inputs, with_pool=False)


def fuzz_rsp(n: int, rng: random.Random, workdir: Path, opts: argparse.Namespace) -> Tally:
    """RSP sessions of 50 packets each, in a forked child per session (a crash in
    native code ends only that child): the child exits 0 when every packet got a good
    reply, 1 and prints the problems otherwise."""
    tally = Tally("RSP packets (sessions of 50)")
    for _ in range(n):
        session_seed = rng.getrandbits(32)
        script = workdir / "rsp_case.py"
        script.write_text(
            "import io, random, sys\n"
            f"sys.path[:0] = [{str(Path(__file__).resolve().parent)!r}, {str(REPO)!r}]\n"
            "import rsp_packets\n"
            "from pkasim.chip.config import load_config\n"
            "from pkasim.core.machine import Machine\n"
            f"rng = random.Random({session_seed})\n"
            "m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())\n"
            f"m.load({str(BUILD)!r} + '/' + rng.choice(['hello.elf', 'fault.elf', 'systick.elf']))\n"
            "out = rsp_packets.session(rng, m, 50)\n"
            "print('pkasim: error: ' + '; '.join(out.problems)[:2000] if out.problems else 'ok', file=sys.stderr)\n"
            "sys.exit(1 if out.problems else 0)\n")
        outcome = run_script(script, workdir, opts)
        if outcome.status == 1:
            outcome = Outcome("exit 70 (internal error)" if "E03" in outcome.stderr else "bad reply",
                              outcome.stdout, outcome.stderr, outcome.seconds, outcome.max_rss_kib)
        tally.add(f"session seed {session_seed}", outcome)
    return tally


def run_script(script: Path, workdir: Path, opts: argparse.Namespace) -> Outcome:
    """A Python script in a child process, with the case budget and memory limit; its
    own peak memory (wait4), as run_case measures a forked case."""
    import os
    import resource
    import signal
    import subprocess

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (opts.memory << 20, opts.memory << 20))

    start = time.monotonic()
    with open(workdir / "script.out", "w+b") as out, open(workdir / "script.err", "w+b") as err:
        proc = subprocess.Popen([sys.executable, str(script)], stdout=out, stderr=err, preexec_fn=limit, cwd=workdir)
        hung = False
        while True:
            done, wait_status, usage = os.wait4(proc.pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() - start > opts.budget:
                os.kill(proc.pid, signal.SIGKILL)
                _, wait_status, usage = os.wait4(proc.pid, 0)
                hung = True
                break
            time.sleep(0.002)
        proc.returncode = 0  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(1 << 16), err.read(1 << 16).decode(errors="replace")
    status: int | str
    if hung:
        status = "hang"
    elif os.WIFSIGNALED(wait_status):
        status = f"signal {signal.Signals(os.WTERMSIG(wait_status)).name}"
    else:
        status = os.WEXITSTATUS(wait_status)
    return Outcome(status, stdout, stderr, time.monotonic() - start, usage.ru_maxrss)


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
    parser.add_argument("--sweep", type=int, default=300, help="sweep files")
    parser.add_argument("--regress", type=int, default=300, help="regress suites with their baselines")
    parser.add_argument("--card", type=int, default=200, help="sign/apdu command lines (keys, states, APDUs)")
    parser.add_argument("--debug", type=int, default=300, help="debugger command scripts")
    parser.add_argument("--ctcheck", type=int, default=200, help="ct-check command lines")
    parser.add_argument("--rsp", type=int, default=200, help="gdb server sessions of 50 packets")
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
                                    ("cli", opts.cli, fuzz_cli), ("guest", opts.guest, fuzz_guest),
                                    ("sweep", opts.sweep, fuzz_sweep), ("regress", opts.regress, fuzz_regress),
                                    ("card", opts.card, fuzz_card), ("debug", opts.debug, fuzz_debug),
                                    ("ctcheck", opts.ctcheck, fuzz_ctcheck), ("rsp", opts.rsp, fuzz_rsp)):
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
