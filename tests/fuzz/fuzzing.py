"""The fuzzers' common parts: run one case in isolation, judge its outcome, keep counts.

Every case is a ``pkasim`` command line run by ``pkasim.cli.main.main`` in a forked child:
imports are paid once, yet a crash in native code, a hang or a runaway allocation
ends only the child, and its exit status, peak memory and time are measured alone.

The property every fuzzer checks (issue 11): whatever the input, pkasim ends with a
documented exit code, never 70 (internal error), never a signal, never a Python
traceback, at most one ``pkasim: error:`` line, and, in the long run, never later than
the budget. The generators live beside this file, one module per fuzzer.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pkasim.base.errors import EXIT_INTERNAL, EXIT_OS  # noqa: E402
from pkasim.cli import main as cli  # noqa: E402


def _warm() -> None:
    """Import in the parent what every case needs, so no forked child pays for it."""
    import rich.progress  # noqa: F401

    import pkasim.cli.bench  # noqa: F401
    import pkasim.peripherals.pka  # noqa: F401
    from pkasim import native
    from pkasim.core.machine import Machine  # noqa: F401

    cli.build_parser()
    native.load()


_warm()

ESCAPED = "fuzz: an exception escaped pkasim.cli.main.main"
BUILD = REPO / "firmware" / "build"


@dataclass(frozen=True)
class Outcome:
    """How one case ended. ``status`` is the exit code, or ``signal N`` / ``hang``;
    ``firmware_exit`` the code the firmware itself passed to SYS_EXIT, when the case
    wrote a --json report (a firmware may exit with any code, 70 included)."""

    status: int | str
    stdout: bytes
    stderr: str
    seconds: float
    max_rss_kib: int
    firmware_exit: int | None = None

    @property
    def bucket(self) -> int | str:
        """The status as the counts show it: the firmware's own exit codes other than 0
        in one bucket, since they say nothing about pkasim."""
        if self.firmware_exit is not None and self.firmware_exit == self.status and self.status != 0:
            return "firmware 1-255"
        return self.status

    def problems(self) -> list[str]:
        """What is wrong with this outcome (empty: the property holds)."""
        found = []
        if isinstance(self.status, str):
            found.append(self.status)
        elif self.status == EXIT_INTERNAL and self.firmware_exit != EXIT_INTERNAL:
            found.append("exit 70 (internal error)")
        elif self.status == EXIT_OS and self.firmware_exit != EXIT_OS:
            found.append("exit 71 (out of host memory within the case's limit: an unbounded input)")
        if ESCAPED in self.stderr:
            found.append("exception escaped main")
        if "Traceback" in self.stderr:
            found.append("Python traceback")
        if "pkasim: internal error" in self.stderr:
            found.append("internal error line")
        if self.stderr.count("pkasim: error:") > 1:
            found.append("more than one error line")
        return found


def _child(argv: Sequence[str], out: int, err: int, memory_mib: int | None) -> None:
    """In the forked child: fresh standard streams on the case's files, then main()."""
    code = EXIT_INTERNAL
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        if memory_mib is not None:
            limit = memory_mib << 20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        code = cli.main(list(argv))
    except BaseException:  # noqa: BLE001 - the point is to see anything that escapes
        try:
            traceback.print_exc()
            sys.stderr.write(ESCAPED + "\n")
        except BaseException:  # noqa: BLE001
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code if isinstance(code, int) and 0 <= code <= 255 else EXIT_INTERNAL)


def run_case(argv: Sequence[str], workdir: Path, *, budget: float | None = None,
             memory_mib: int | None = None) -> Outcome:
    """Run ``pkasim ARGV`` in a forked child. ``budget`` (seconds) turns a longer run into
    a ``hang`` (the long run only: the tests wait for the child however long it takes,
    since a test never depends on the host's speed)."""
    out_path, err_path = workdir / "case.out", workdir / "case.err"
    report = Path(argv[argv.index("--json") + 1]) if "--json" in argv[:-1] else None
    if report is not None and report.is_file():
        report.unlink()
    with out_path.open("w+b") as out, err_path.open("w+b") as err:
        sys.stdout.flush()
        sys.stderr.flush()
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(argv, out.fileno(), err.fileno(), memory_mib)
        hung = False
        while True:
            done, wait_status, usage = os.wait4(pid, 0 if budget is None else os.WNOHANG)
            if done:
                break
            if time.monotonic() - start > budget:
                os.kill(pid, signal.SIGKILL)
                _, wait_status, usage = os.wait4(pid, 0)
                hung = True
                break
            time.sleep(0.002)
        seconds = time.monotonic() - start
        status: int | str
        if hung:
            status = "hang"
        elif os.WIFSIGNALED(wait_status):
            status = f"signal {signal.Signals(os.WTERMSIG(wait_status)).name}"
        else:
            status = os.WEXITSTATUS(wait_status)
        out.seek(0)
        err.seek(0)
        stdout = out.read(1 << 16)
        stderr = err.read(1 << 16).decode("utf-8", errors="replace")
    return Outcome(status, stdout, stderr, seconds, usage.ru_maxrss, _firmware_exit(report))


def _firmware_exit(report: Path | None) -> int | None:
    """The firmware's exit code from a --json report; only a regular file is read (a
    case may well have pointed --json at /dev/full, which reads as endless zeros)."""
    try:
        if report is None or not report.is_file():
            return None
        with report.open("rb") as fh:
            return json.loads(fh.read(1 << 20))["firmware_exit_code"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass
class Tally:
    """Counts for one fuzzer: inputs, outcomes by exit code, and every bad case."""

    name: str
    inputs: int = 0
    statuses: Counter = field(default_factory=Counter)
    failures: list[tuple[str, list[str], Outcome]] = field(default_factory=list)
    max_rss_kib: int = 0
    slowest: float = 0.0

    def add(self, case: str, outcome: Outcome) -> Outcome:
        self.inputs += 1
        self.statuses[outcome.bucket] += 1
        self.max_rss_kib = max(self.max_rss_kib, outcome.max_rss_kib)
        self.slowest = max(self.slowest, outcome.seconds)
        problems = outcome.problems()
        if problems:
            self.failures.append((case, problems, outcome))
        return outcome

    def report(self) -> str:
        """The failures, each with its case and the end of its stderr (for assertions)."""
        lines = [f"{self.name}: {len(self.failures)} of {self.inputs} inputs broke the property"]
        for case, problems, outcome in self.failures[:10]:
            tail = " | ".join(outcome.stderr.strip().splitlines()[-3:])
            lines.append(f"  {case}: {', '.join(problems)}: {tail[:400]}")
        return "\n".join(lines)

    def codes(self) -> str:
        """Outcomes by exit code, most frequent first: ``0: 12, 65: 30, ...``."""
        return ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items(), key=lambda kv: (-kv[1], str(kv[0]))))


def mutate(rng, doc, hostile: Sequence, count: int):
    """``doc`` (plain YAML/JSON values) with ``count`` mutations at random places: a
    value replaced by one of ``hostile``, a key dropped, a key added, a list emptied
    or doubled. The schema is otherwise kept, so most of a file still passes the
    checks that come before the mutated key."""
    import copy

    doc = copy.deepcopy(doc)
    for _ in range(count):
        parent, key = None, None
        node = doc
        while isinstance(node, (dict, list)) and node and rng.random() < 0.75:
            parent, key = node, rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
            node = parent[key]
        if parent is None:
            continue
        how = rng.random()
        if how < 0.7:
            parent[key] = rng.choice(hostile)
        elif how < 0.8 and isinstance(parent, dict):
            del parent[key]
        elif how < 0.9 and isinstance(parent, dict):
            parent[rng.choice(["bogus", "x", "", "axes", "cases"]) + str(rng.randrange(3))] = rng.choice(hostile)
        elif isinstance(node, list):
            parent[key] = [] if rng.random() < 0.5 else node + node
    return doc
