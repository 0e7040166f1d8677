"""``pkasim run``: run a firmware image headless and report its cycles."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from pkasim.cli.common import add_run_options, run_firmware, write_text
from pkasim.cli.report import abnormal_exit, exit_code_for, print_summary, to_json
from pkasim.cli.streams import say
from pkasim.cli.traces import Traces, add_trace_options

HELP = "run a firmware image headless and report cycles"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help=HELP)
    add_run_options(p)
    p.add_argument("--json", metavar="FILE", help="write the run summary as JSON ('-' for stdout)")
    add_trace_options(p)


def main(args: argparse.Namespace, console: Console) -> int:
    traces = Traces(args)
    machine, result = run_firmware(args, console, traces.attach if traces.wanted else None)
    traces.close(console)
    if args.json:
        write_text(args.json, json.dumps(to_json(machine, result, args.firmware), indent=2) + "\n", "JSON")
    if not args.quiet:
        print_summary(console, machine, result, args.firmware)
    elif (result.lockup is not None or result.reason.value in ("budget", "sleep-forever", "stuck")
          or abnormal_exit(machine, result)):
        say(f"pkasim: {result.message}")
    return exit_code_for(result)
