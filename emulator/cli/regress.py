"""``pkasim regress SUITE.yaml [--update] [--junit F] [--markdown F]``: hold timing in CI.

A suite (traces/suite.yaml is the project's, docs/traces.md describes the format)
names firmware images, chips, ``--load`` inputs and the metrics to hold: total
cycles and instructions, the exit code, exclusive cycles and calls per function (all
or listed), PKA operation counts and busy cycles, code and data size. Each case's
reviewed values live in one JSON file under the suite's baseline directory.

Cycle counts are deterministic, so a metric is held exactly unless the suite gives
it a tolerance. Exit status: 0 every metric holds; 1 a regression (a cycle or size
metric grew past its tolerance) or any other unreviewed change (a value that moved
either way, a metric or baseline that is new or gone); 2 an error (a bad suite, a
missing image, a run that could not start). ``--update`` rewrites the baselines
from this run: review and commit them with the change that moved them.
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pkasim.analysis.profiler import Profiler
from pkasim.base import limits, userfiles
from pkasim.base.errors import PkasimError
from pkasim.chip.config import DEFAULT_CONFIG, load_config, load_yaml
from pkasim.cli.common import read_load
from pkasim.cli.report import exit_code_for
from pkasim.core.machine import Machine

BASELINE_SCHEMA = "pkasim.baseline/1"
BASELINE_MAX = limits.BASELINE_MAX_BYTES
METRIC_GROUPS = ("cycles", "instructions", "exit_code", "functions", "pka", "size")
GROWS_WORSE = re.compile(r"^(cycles|instructions|sleep_cycles|function\..*\.cycles|pka\.busy_cycles|size\..*)$")
DEFAULT_BUDGET_SECONDS = 600
EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


class SuiteError(PkasimError):
    """A suite that cannot be run: exit 2."""

    exit_code = EXIT_ERROR


def add_parser(sub: argparse._SubParsersAction) -> None:
    base = sub._parser_class

    class _Parser(base):  # regress documents 2 for every error, its command line's too
        def exit(self, status: int = 0, message: str | None = None) -> None:
            super().exit(EXIT_ERROR if status else 0, message)

        def error(self, message: str) -> None:
            self.print_usage(sys.stderr)
            sys.stderr.write(f"pkasim regress: error: {message}\n")
            sys.exit(EXIT_ERROR)

    sub._parser_class = _Parser
    try:
        p = sub.add_parser("regress", help="check cycle, function, PKA and size metrics against reviewed baselines")
    finally:
        sub._parser_class = base
    p.add_argument("suite", metavar="SUITE.yaml", help="the suite (e.g. traces/suite.yaml)")
    p.add_argument("--update", action="store_true", help="rewrite the baselines from this run (then review them)")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML (one test case per suite case)")
    p.add_argument("--markdown", metavar="FILE", help="write a Markdown summary (CI job pages)")
    p.add_argument("--case", action="append", default=[], metavar="NAME", help="run only these cases (repeatable)")
    p.add_argument("--build-dir", metavar="DIR", help="take the images from DIR instead of the suite's build directory")
    p.add_argument("--baselines", metavar="DIR", help="baseline directory instead of the suite's")


# ---------------------------------------------------------------------------- the suite

@dataclass
class Tolerance:
    pattern: str
    relative: float | None = None  # percent
    absolute: int | None = None

    def allows(self, old: int, new: int) -> bool:
        diff = abs(new - old)
        if self.absolute is not None:
            return diff <= self.absolute
        return diff <= abs(old) * self.relative / 100


@dataclass
class Case:
    name: str
    image: Path
    config: Path
    loads: list[tuple[str, Path]] = field(default_factory=list)
    metrics: tuple[str, ...] = METRIC_GROUPS
    functions: str | list[str] = "all"
    tolerances: list[Tolerance] = field(default_factory=list)
    max_cycles: int | None = None


@dataclass
class Suite:
    path: Path
    build: Path
    baselines: Path
    cases: list[Case]


def _fail(path: Path, where: str, problem: str) -> SuiteError:
    return SuiteError(f"{path}: {where}: {problem}")


def _tolerance(path: Path, where: str, pattern: str, value: Any) -> Tolerance:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return Tolerance(pattern, absolute=value)
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = float(value[:-1])
        except ValueError:
            pct = -1.0
        if pct >= 0:
            return Tolerance(pattern, relative=pct)
    raise _fail(path, where, f"tolerance for '{pattern}' must be a whole number of units or a percentage "
                             f"like '0.5%', got {value!r}")


def load_suite(path: str | Path, build_dir: str | None = None, baselines: str | None = None) -> Suite:
    """Read and check a suite file; paths in it are relative to the file."""
    path = Path(path)
    try:
        doc = load_yaml(path)  # a chip file's bounds: size, nesting, aliases, tags
    except PkasimError as exc:
        raise SuiteError(str(exc)) from None
    if not isinstance(doc, dict):
        raise SuiteError(f"{path}: expected a mapping with 'cases'")
    known = {"build", "baselines", "defaults", "cases"}
    for key in doc:
        if key not in known:
            raise _fail(path, str(key), f"unknown key (known: {', '.join(sorted(known))})")
    here = path.parent
    build = Path(build_dir) if build_dir else here / str(doc.get("build", "."))
    base = Path(baselines) if baselines else here / str(doc.get("baselines", "baselines"))
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise _fail(path, "defaults", "expected a mapping")
    raw_cases = doc.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise _fail(path, "cases", "expected a non-empty list of cases")
    cases, seen = [], set()
    for i, raw in enumerate(raw_cases):
        if not isinstance(raw, dict):
            raise _fail(path, f"cases[{i}]", "expected a mapping")
        cases.append(_case(path, here, build, i, {**defaults, **raw}))
        if cases[-1].name in seen:
            raise _fail(path, f"cases[{i}].name", f"'{cases[-1].name}' is used twice")
        seen.add(cases[-1].name)
    return Suite(path=path, build=build, baselines=base, cases=cases)


CASE_KEYS = {"name", "image", "config", "load", "metrics", "functions", "tolerance", "max_cycles"}


def _case(path: Path, here: Path, build: Path, i: int, raw: dict) -> Case:
    where = f"cases[{i}]"
    for key in raw:
        if key not in CASE_KEYS:
            raise _fail(path, f"{where}.{key}", f"unknown key (known: {', '.join(sorted(CASE_KEYS))})")
    name = raw.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name or ""):
        raise _fail(path, f"{where}.name", "expected a name of letters, digits, '.', '_' or '-'")
    image = raw.get("image")
    if not isinstance(image, str):
        raise _fail(path, f"{where}.image", "expected the ELF file name (relative to the build directory)")
    config = raw.get("config")
    config_path = here / config if isinstance(config, str) else None
    if config is not None and not isinstance(config, str):
        raise _fail(path, f"{where}.config", "expected a chip description path")
    loads = raw.get("load") or {}
    if not isinstance(loads, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in loads.items()):
        raise _fail(path, f"{where}.load", "expected a mapping of SYMBOL: FILE")
    metrics = raw.get("metrics", list(METRIC_GROUPS))
    if not isinstance(metrics, list) or not all(m in METRIC_GROUPS for m in metrics):
        raise _fail(path, f"{where}.metrics", f"expected a list of: {', '.join(METRIC_GROUPS)}")
    functions = raw.get("functions", "all")
    if functions != "all" and not (isinstance(functions, list) and all(isinstance(f, str) for f in functions)):
        raise _fail(path, f"{where}.functions", "expected 'all' or a list of function names")
    tol = raw.get("tolerance") or {}
    if not isinstance(tol, dict):
        raise _fail(path, f"{where}.tolerance", "expected a mapping of METRIC-PATTERN: tolerance")
    max_cycles = raw.get("max_cycles")
    if max_cycles is not None and (not isinstance(max_cycles, int) or isinstance(max_cycles, bool) or max_cycles <= 0):
        raise _fail(path, f"{where}.max_cycles", "expected a positive whole number")
    return Case(name=name, image=build / image, config=config_path or DEFAULT_CONFIG,
                loads=[(sym, here / f) for sym, f in loads.items()], metrics=tuple(metrics), functions=functions,
                tolerances=[_tolerance(path, f"{where}.tolerance", str(k), v) for k, v in tol.items()],
                max_cycles=max_cycles)


# ---------------------------------------------------------------------------- measuring

def sizes(elf_path: Path) -> dict[str, int]:
    """Code and data size as Berkeley ``size`` counts them: text (code and read-only
    data, in flash), data (initialised RAM, also stored in flash), bss (zeroed RAM)."""
    out = {"size.text": 0, "size.data": 0, "size.bss": 0}
    with userfiles.open_input(elf_path, streams=True) as fh:  # the image m.load() has read and checked
        for sec in ELFFile(fh).iter_sections():
            flags = sec["sh_flags"]
            if not flags & SH_FLAGS.SHF_ALLOC or not sec["sh_size"]:
                continue
            if sec["sh_type"] == "SHT_NOBITS":
                out["size.bss"] += sec["sh_size"]
            elif flags & SH_FLAGS.SHF_WRITE:
                out["size.data"] += sec["sh_size"]
            else:
                out["size.text"] += sec["sh_size"]
    return out


def measure(case: Case) -> dict[str, int]:
    """Run one case and return its metrics (flat names, integers)."""
    if not case.image.exists():
        raise SuiteError(f"{case.image}: not built (case '{case.name}'; run 'make firmware')")
    config = load_config(case.config)
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(case.image)
    for symbol, file in case.loads:  # bounded as run's --load: /dev/zero is refused, never read whole
        try:
            data = read_load(m, symbol, file)
        except PkasimError as exc:
            raise SuiteError(f"{exc} (case '{case.name}', load {symbol})") from None
        m.write_symbol(symbol, data)
    profiler = None
    if "functions" in case.metrics:
        profiler = Profiler()
        m.observe(profiler)
    budget = case.max_cycles or DEFAULT_BUDGET_SECONDS * config.core.clock_hz
    result = m.run(max_cycles=budget)
    out: dict[str, int] = {}
    if "cycles" in case.metrics:
        out["cycles"] = result.cycles
        out["sleep_cycles"] = result.sleep_cycles
    if "instructions" in case.metrics:
        out["instructions"] = result.instructions
    if "exit_code" in case.metrics:
        out["exit_code"] = exit_code_for(result)
    if profiler is not None:
        wanted = None if case.functions == "all" else set(case.functions)
        rows = {r.name: r for r in profiler.rows()}
        for name in sorted(rows if wanted is None else wanted):
            row = rows.get(name)
            out[f"function.{name}.cycles"] = row.exclusive_cycles if row else 0
            out[f"function.{name}.calls"] = row.calls if row else 0
        m.unobserve(profiler)
    if "pka" in case.metrics:
        pka = m.peripherals.get("pka")
        if pka is not None:
            stats = pka.stats()
            for op, count in sorted(stats["operations"].items()):
                out[f"pka.{op}"] = count
            out["pka.busy_cycles"] = stats["busy_cycles"]
    if "size" in case.metrics:
        out.update(sizes(case.image))
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------- comparing

@dataclass
class Row:
    metric: str
    baseline: int | None
    now: int | None
    status: str  # "ok", "tolerated", "regression", "changed", "new", "gone"

    @property
    def delta(self) -> int | None:
        return None if self.baseline is None or self.now is None else self.now - self.baseline

    @property
    def percent(self) -> str:
        if self.delta is None:
            return ""
        if not self.baseline:
            return "new" if self.delta else ""
        return f"{100 * self.delta / self.baseline:+.2f}%"


@dataclass
class Outcome:
    case: Case
    rows: list[Row] = field(default_factory=list)
    error: str | None = None
    missing_baseline: bool = False

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.status not in ("ok", "tolerated")]


def compare(case: Case, baseline: dict[str, int] | None, now: dict[str, int]) -> list[Row]:
    rows = []
    old = baseline or {}
    for metric in sorted(set(old) | set(now)):
        b, n = old.get(metric), now.get(metric)
        if b is None:
            status = "new"
        elif n is None:
            status = "gone"
        elif b == n:
            status = "ok"
        elif any(fnmatch.fnmatchcase(metric, t.pattern) and t.allows(b, n) for t in case.tolerances):
            status = "tolerated"
        elif n > b and GROWS_WORSE.match(metric):
            status = "regression"
        else:
            status = "changed"
        rows.append(Row(metric, b, n, status))
    return rows


def baseline_path(suite: Suite, case: Case) -> Path:
    return suite.baselines / f"{case.name}.json"


def read_baseline(suite: Suite, case: Case) -> dict[str, int] | None:
    """A case's reviewed metrics; None when it has no baseline yet. Anything but a
    regular file of at most BASELINE_MAX bytes holding ``{"schema": ..., "metrics":
    {NAME: integer}}`` is one SuiteError naming the file and the key."""
    path = baseline_path(suite, case)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = userfiles.read_bounded(path, BASELINE_MAX)
    except OSError as exc:
        raise SuiteError(f"{path}: unreadable baseline: {exc.strerror or exc}") from None
    if len(data) > BASELINE_MAX:
        raise SuiteError(f"{path}: larger than {BASELINE_MAX >> 20} MiB; not a pkasim baseline")
    try:
        doc = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise SuiteError(f"{path}: unreadable baseline: JSON nested too deep") from None
    except ValueError as exc:  # not UTF-8, not JSON, an integer of thousands of digits
        raise SuiteError(f"{path}: unreadable baseline: {exc}") from None
    if not isinstance(doc, dict):
        raise SuiteError(f"{path}: top level: expected a JSON object (\"schema\": \"{BASELINE_SCHEMA}\", "
                         f"\"metrics\"), got {type(doc).__name__ if doc is not None else 'null'}")
    if doc.get("schema") != BASELINE_SCHEMA:
        raise SuiteError(f"{path}: schema: not a pkasim baseline (expected \"{BASELINE_SCHEMA}\")")
    metrics = doc.get("metrics")
    if not isinstance(metrics, dict):
        raise SuiteError(f"{path}: metrics: expected an object of METRIC: whole number")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise SuiteError(f"{path}: metrics.{name}: expected a whole number, got {json.dumps(value)[:40]}")
    return metrics


def write_baseline(suite: Suite, case: Case, metrics: dict[str, int]) -> None:
    """The case's baseline, written atomically (an interrupted --update leaves the old one)."""
    doc = {"schema": BASELINE_SCHEMA, "case": case.name, "image": case.image.name,
           "config": case.config.name, "metrics": metrics}
    path = baseline_path(suite, case)
    try:
        suite.baselines.mkdir(parents=True, exist_ok=True)
        userfiles.write_atomically(path, (json.dumps(doc, indent=2) + "\n").encode())
    except OSError as exc:
        raise SuiteError(f"{path}: cannot write the baseline: {exc.strerror or exc}") from None


# ---------------------------------------------------------------------------- reports

STATUS_TEXT = {"regression": "regression", "changed": "changed (unreviewed)", "new": "new (unreviewed)",
               "gone": "gone (unreviewed)", "tolerated": "within tolerance", "ok": "holds"}


def _num(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def diff_lines(outcome: Outcome) -> list[str]:
    """The failing rows as plain text lines (JUnit failure bodies)."""
    lines = [f"{'metric':<48} {'baseline':>16} {'now':>16} {'delta':>14} {'%':>9}  status"]
    for r in outcome.failed:
        delta = "" if r.delta is None else f"{r.delta:+,}"
        lines.append(f"{r.metric:<48} {_num(r.baseline):>16} {_num(r.now):>16} {delta:>14} {r.percent:>9}  "
                     f"{STATUS_TEXT[r.status]}")
    return lines


def print_outcomes(console: Console, outcomes: list[Outcome]) -> None:
    for o in outcomes:
        if o.error:
            console.print(f"[red]ERROR[/red] {o.case.name}: {escape(o.error)}")
            continue
        failed = o.failed
        tolerated = sum(r.status == "tolerated" for r in o.rows)
        if not failed:
            extra = f", {tolerated} within tolerance" if tolerated else ""
            console.print(f"[green]ok[/green]    {o.case.name}: {len(o.rows)} metrics hold{extra}")
            continue
        what = "no baseline yet" if o.missing_baseline else f"{len(failed)} of {len(o.rows)} metrics moved"
        console.print(f"[red]FAIL[/red]  {o.case.name}: {what}")
        table = Table(show_edge=False, pad_edge=False)
        for name, justify in (("metric", "left"), ("baseline", "right"), ("now", "right"), ("delta", "right"),
                              ("%", "right"), ("status", "left")):
            table.add_column(name, justify=justify)
        for r in failed:
            table.add_row(r.metric, _num(r.baseline), _num(r.now), "" if r.delta is None else f"{r.delta:+,}",
                          r.percent, STATUS_TEXT[r.status])
        console.print(table)


def junit(suite: Suite, outcomes: list[Outcome]) -> str:
    failures = sum(1 for o in outcomes if not o.error and o.failed)
    errors = sum(1 for o in outcomes if o.error)
    root = ET.Element("testsuites", name="pkasim regress", tests=str(len(outcomes)), failures=str(failures),
                      errors=str(errors))
    ts = ET.SubElement(root, "testsuite", name=suite.path.name, tests=str(len(outcomes)), failures=str(failures),
                       errors=str(errors))
    for o in outcomes:
        tc = ET.SubElement(ts, "testcase", classname=f"pkasim.regress.{suite.path.stem}", name=o.case.name)
        if o.error:
            ET.SubElement(tc, "error", message=o.error).text = o.error
        elif o.failed:
            names = ", ".join(r.metric for r in o.failed[:10]) + (", ..." if len(o.failed) > 10 else "")
            msg = f"{len(o.failed)} metric(s) moved: {names}"
            ET.SubElement(tc, "failure", message=msg, type="regression").text = "\n".join(diff_lines(o))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def markdown(suite: Suite, outcomes: list[Outcome]) -> str:
    out = [f"## pkasim regress: {suite.path.name}", "", "| case | result | metrics |", "|---|---|---:|"]
    for o in outcomes:
        if o.error:
            out.append(f"| {o.case.name} | error: {o.error} | |")
        elif o.failed:
            out.append(f"| {o.case.name} | **{len(o.failed)} moved** | {len(o.rows)} |")
        else:
            out.append(f"| {o.case.name} | holds | {len(o.rows)} |")
    for o in outcomes:
        if o.error or not o.failed:
            continue
        out += ["", f"### {o.case.name}", "", "| metric | baseline | now | delta | % | status |",
                "|---|---:|---:|---:|---:|---|"]
        for r in o.failed:
            delta = "" if r.delta is None else f"{r.delta:+,}"
            out.append(f"| `{r.metric}` | {_num(r.baseline)} | {_num(r.now)} | {delta} | {r.percent} | "
                       f"{STATUS_TEXT[r.status]} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- the command

def run_suite(suite: Suite, update: bool = False, only: list[str] | None = None,
              console: Console | None = None) -> list[Outcome]:
    cases = [c for c in suite.cases if not only or c.name in only]
    unknown = set(only or []) - {c.name for c in suite.cases}
    if unknown:
        raise SuiteError(f"{suite.path}: no case named {', '.join(sorted(unknown))}")
    outcomes = []
    for case in cases:
        if console is not None and console.is_terminal:
            console.print(f"[dim]running {case.name}...[/dim]", end="\r")
        try:
            now = measure(case)
        except PkasimError as exc:
            outcomes.append(Outcome(case, error=str(exc)))
            continue
        baseline = read_baseline(suite, case)
        if update:
            write_baseline(suite, case, now)
            baseline = now
        outcomes.append(Outcome(case, compare(case, baseline, now), missing_baseline=baseline is None))
    return outcomes


def main(args: argparse.Namespace, console: Console) -> int:
    out = Console(highlight=False, width=None if console.is_terminal else 150)
    try:
        suite = load_suite(args.suite, args.build_dir, args.baselines)
        outcomes = run_suite(suite, update=args.update, only=args.case, console=console)
    except PkasimError as exc:
        raise SuiteError(str(exc)) from None
    print_outcomes(out, outcomes)
    for path, text in ((args.junit, junit(suite, outcomes) if args.junit else ""),
                       (args.markdown, markdown(suite, outcomes) if args.markdown else "")):
        if path:
            try:
                Path(path).write_text(text)
            except OSError as exc:
                raise SuiteError(f"{path}: cannot write: {exc.strerror}") from None
    errors = [o for o in outcomes if o.error]
    failed = [o for o in outcomes if not o.error and o.failed]
    held = len(outcomes) - len(errors) - len(failed)
    verdict = f"{held} held, {len(failed)} failed, {len(errors)} error(s)"
    if args.update:
        out.print(f"baselines written to {suite.baselines} ({verdict}): review and commit them")
    else:
        out.print(verdict + ("" if not failed else "; if a change is intended, rerun with --update and commit "
                                                       "the baselines it rewrites"))
    if errors:
        return EXIT_ERROR
    return EXIT_FAIL if failed else EXIT_OK
