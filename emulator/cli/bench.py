"""The ``pkasim bench`` command: runs the jobs of pkasim.rsa.bench and pkasim.ecc.bench
and shows the figures, the RSA rows and the ECC rows in one table."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pkasim.base import resources
from pkasim.base.errors import UsageError
from pkasim.chip.config import DEFAULT_CHIP, DEFAULT_CONFIG, load_config
from pkasim.ecc.bench import ECC_JOBS, PUBLISHED_M0, EccJob, EccJobResult, ecc_ratios, run_ecc_job
from pkasim.rsa.bench import BUILD_DIR, JOBS, ConfigResult, JobResult, ratios, run_job, to_json

HELP = "RSA-2048 vs RSA-4096 (xRSA) vs software, and the ECC operations, on one or more chips"
ALL_JOBS = (*JOBS, *ECC_JOBS)

RATIO_TEXT = {
    "rsa4096_xrsa_vs_rsa2048_pka": "RSA-4096 by xRSA (paper variant) vs RSA-2048 on the PKA",
    "rsa4096_xrsa_opt_vs_rsa2048_pka": "RSA-4096 by xRSA (optimized) vs RSA-2048 on the PKA",
    "rsa4096_software_vs_xrsa": "RSA-4096 in software vs xRSA (paper variant)",
    "rsa4096_software_vs_xrsa_opt": "RSA-4096 in software vs xRSA (optimized)",
    "rsa2048_software_vs_pka": "RSA-2048 in software vs on the PKA",
    "rsa4096_xrsa_paper_vs_optimized": "xRSA paper variant vs optimized variant",
    "rsa2048_pka_vs_win": "RSA-2048: Algorithm 3 (optimized) vs fixed window",
    "rsa4096_xrsa_vs_win": "RSA-4096: xRSA paper variant vs fixed window",
    "rsa4096_xrsa_opt_vs_win": "RSA-4096: xRSA optimized vs fixed window",
    "rsa4096_win_vs_rsa2048_win": "fixed window: RSA-4096 vs RSA-2048",
    "rsa4096_win_sram_vs_win": "RSA-4096 fixed window: table in SRAM vs in PKA RAM",
}
for _job in ECC_JOBS:
    if _job.engine == "pka":
        _name = _job.label.rsplit(",", 1)[0]
        RATIO_TEXT[f"{_job.key}_software_vs_pka"] = f"{_name}: software vs PKA"
        if _job.key in PUBLISHED_M0:
            RATIO_TEXT[f"{_job.key}_published_m0_vs_pka"] = f"{_name}: {PUBLISHED_M0[_job.key][1]} vs this PKA"
for _job in ECC_JOBS:
    if _job.engine == "pka":
        RATIO_TEXT[f"{_job.key}_software_vs_pka"] = f"{_job.label.rsplit(',', 1)[0]}: software vs PKA"
        if _job.key in PUBLISHED_M0:
            RATIO_TEXT[f"{_job.key}_published_m0_vs_pka"] = (f"{_job.label.rsplit(',', 1)[0]}: {PUBLISHED_M0[_job.key][1]}"
                                                              " vs this PKA")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help=HELP)
    p.add_argument("--config", action="append", default=[], metavar="CHIP",
                   help=f"chip file or bundled chip name; repeat to compare chips side by side (default: {DEFAULT_CHIP})")
    p.add_argument("--json", metavar="FILE", help="write every figure as JSON ('-' for stdout)")
    p.add_argument("--plot", metavar="FILE", help="write a chart (.png or .svg; needs pkasim[plot])")
    p.add_argument("--only", action="append", default=[], metavar="JOB",
                   help="run only these jobs (repeatable): " + ", ".join(j.key for j in ALL_JOBS))
    p.add_argument("--build-dir", default=None, help="where the firmware images are (default: the bundled images)")
    p.add_argument("--cold", action="store_true",
                   help="run every RSA job on a new machine (default: a job whose image an earlier job loaded "
                        "reuses that machine and its translated code; the same figures, less wall time)")


def main(args: argparse.Namespace, console: Console) -> int:
    return run_bench(args, console)


def run_bench(args: argparse.Namespace, console: Console) -> int:
    if not console.is_terminal:
        console = Console(file=console.file, highlight=False, width=150)  # tables are read in logs too
    configs = args.config or [str(DEFAULT_CONFIG)]
    chips = [(path, load_config(path)) for path in configs]
    jobs = [j for j in ALL_JOBS if not args.only or j.key in args.only]
    unknown = set(args.only) - {j.key for j in ALL_JOBS}
    if unknown:
        raise UsageError(f"unknown job {', '.join(sorted(unknown))} (known: {', '.join(j.key for j in ALL_JOBS)})")
    build = Path(args.build_dir) if args.build_dir else BUILD_DIR
    for job in jobs:  # every image is there before the first job runs
        resources.image(job.image, build if args.build_dir else None)

    results: list[ConfigResult] = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        overall = bar.add_task("bench", total=len(jobs) * len(chips), status="")
        for path, cfg in chips:
            done: list[JobResult | EccJobResult] = []
            for job in jobs:
                bar.update(overall, description=f"{job.label} on {Path(path).name}", status="")

                def tick(cycles: int, hz: int = cfg.core.clock_hz) -> None:
                    bar.update(overall, status=f"{cycles / hz:.2f} s modeled")

                if isinstance(job, EccJob):
                    done.append(run_ecc_job(cfg, job, build, progress=tick))
                else:
                    done.append(run_job(cfg, job, build, progress=tick, reuse=not args.cold))
                bar.advance(overall)
            rsa_done = [j for j in done if not isinstance(j, EccJobResult)]
            ecc_done = [j for j in done if isinstance(j, EccJobResult)]
            results.append(ConfigResult(config=path, chip=cfg.chip, clock_hz=cfg.core.clock_hz,
                                        muls_cycles=cfg.core.muls_cycles, jobs=done,
                                        ratios=ratios(rsa_done) | ecc_ratios(ecc_done)))

    for res in results:
        _print_config(console, res)
    if len(results) > 1:
        _print_side_by_side(console, results)
    if args.json:
        text = json.dumps(to_json(results), indent=2) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text)
    if args.plot:
        from pkasim.rsa.plot import bench_chart

        bench_chart(results, args.plot)
        console.print(f"chart written to {args.plot}")
    failed = [j for r in results for j in r.jobs if not j.verified]
    if failed:
        console.print(f"[red]{len(failed)} result(s) did not match the reference (m^d mod n, or the cryptography "
                      "package's): " + ", ".join(j.label for j in failed))
        return 1
    return 0


def _print_config(console: Console, res: ConfigResult) -> None:
    table = Table(title=f"{res.chip} at {res.clock_hz / 1e6:g} MHz, MULS {res.muls_cycles} cycle(s) ({res.config})",
                  title_justify="left")
    for name, justify in (("operation", "left"), ("cycles", "right"), ("modeled ms", "right"), ("ops/s", "right"),
                          ("efficiency", "right"), ("SysTick ms", "right"), ("PKA ops", "right"), ("PKA busy", "right"),
                          ("CPU only", "right"),
                          ("check", "center"), ("wall s", "right")):
        table.add_column(name, justify=justify)
    for j in res.jobs:
        table.add_row(
            j.label, f"{j.cycles:,}", f"{j.modeled_ms:,.1f}", f"{j.ops_per_second:.3g}", f"{j.efficiency:.3g}",
            "-" if j.firmware_ms is None else f"{j.firmware_ms:,}",
            f"{sum(j.pka_operations.values()):,}" if j.pka_operations else "-",
            f"{100 * j.pka_busy_share:.1f}%", f"{100 * j.cpu_only_share:.1f}%",
            "[green]ok[/green]" if j.verified else "[red]WRONG[/red]", f"{j.wall_seconds:.3f}",
        )
    console.print(table)
    console.print("efficiency: bits of result per 1000 cycles (nbits * 1000 / cycles; 256 for the curves), "
                  "whatever the clock")
    ecc = [j for j in res.jobs if isinstance(j, EccJobResult)]
    if ecc:
        et = Table(title="ECC: hashing apart, and the emulator's speed", title_justify="left")
        for name in ("operation", "hash", "hash cycles", "without hash", "wall / modeled (the operation again)"):
            et.add_column(name, justify="left" if name in ("operation", "hash") else "right")
        for j in ecc:
            et.add_row(j.label, j.hash_function or "-", f"{j.hash_cycles:,}" if j.hash_function else "-",
                       f"{j.cycles - j.hash_cycles:,}",
                       f"{j.op_wall_seconds / (j.modeled_ms / 1e3):.2f}" if j.modeled_ms else "-")
        console.print(et)
    if res.ratios:
        rt = Table(show_header=False, box=None, padding=(0, 2))
        rt.add_column()
        rt.add_column(justify="right")
        for key, value in res.ratios.items():
            rt.add_row(RATIO_TEXT.get(key, key), f"{value:,.1f}x slower")
        console.print(rt)


def _print_side_by_side(console: Console, results: list[ConfigResult]) -> None:
    table = Table(title="ops/s side by side", title_justify="left")
    table.add_column("operation")
    for res in results:
        table.add_column(f"{res.chip}\n{Path(res.config).name}", justify="right")
    for i, job in enumerate(results[0].jobs):
        table.add_row(job.label, *(f"{res.jobs[i].ops_per_second:.3g}" for res in results))
    console.print(table)
