"""A bounded run of every fuzzer (issue 11). The long run is `make fuzz` (tests/fuzz/run.py),
its counts are in docs/robustness.md; these few hundred inputs, the same on every run,
keep the property true commit by commit: whatever the input, pkasim ends with a
documented exit code, never 70, never a signal, never a traceback, one error line."""

from __future__ import annotations

import random
from pathlib import Path

import card_inputs
import cli_cases
import config_mutants
import ctcheck_inputs
import debug_scripts
import elf_mutants
import guest
import pytest
import regress_files
import rsp_packets
import sweep_files
from fuzzing import BUILD, Tally, run_case
from hypothesis import HealthCheck, given, settings

ELF_MUTANTS = 40
CONFIG_MUTANTS = 80
CLI_CASES = 50
GUEST_SEEDS = 8
SWEEP_FILES = 12
REGRESS_SUITES = 10
CARD_CASES = 10
DEBUG_SCRIPTS = 10
CTCHECK_CASES = 8
RSP_SESSIONS, RSP_PACKETS = 4, 40

# The exit codes each command documents (README, docs/<command>.md), beside 70.
DOCUMENTED = {
    "sweep": {0, 1, 64, 65, 66, 69, 74, 78, 130},
    "regress": {0, 1, 2},
    "card": {0, 1, 64, 65, 66, 74, 78},
    "debug": {0, 64, 65, 66, 78},
    "ct-check": {0, 1, 64, 65, 66, 74, 78, 124, 125},
}


@pytest.fixture(scope="module")
def built(build_dir: Path) -> Path:
    """firmware/build, with the images the fuzzers start from."""
    assert build_dir == BUILD
    return build_dir


def test_elf_mutants_end_with_documented_exit_codes(built: Path, tmp_path: Path) -> None:
    rng = random.Random(11)
    corpus = elf_mutants.seeds(built)
    tally = Tally("elf")
    for _ in range(ELF_MUTANTS):
        argv, what = elf_mutants.case(rng, corpus, tmp_path, max_cycles=50_000)
        tally.add(what, run_case(argv, tmp_path))
    assert not tally.failures, tally.report()
    assert len(tally.statuses) > 1, "every mutant ended the same way: the mutator is not reaching anything"


@settings(max_examples=CONFIG_MUTANTS, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mutant=config_mutants.chip_file())
def test_config_mutants_end_with_documented_exit_codes(mutant: tuple[bytes, str], built: Path,
                                                       tmp_path: Path) -> None:
    data, bend = mutant
    path = tmp_path / "chip.yaml"
    path.write_bytes(data.replace(b"{self}", str(path).encode()))
    outcome = run_case(["run", str(built / "hello.elf"), "--config", str(path), "--max-cycles", "20000", "-q"],
                       tmp_path)
    assert not outcome.problems(), f"{bend}: {outcome.problems()}: {outcome.stderr[-600:]}"
    assert outcome.status in (0, 65, 66, 78), f"{bend}: exit {outcome.status}: {outcome.stderr[-600:]}"


def test_cli_cases_end_with_documented_exit_codes(built: Path, tmp_path: Path) -> None:
    rng = random.Random(11)
    pool = cli_cases.files(tmp_path)
    tally = Tally("cli")
    for _ in range(CLI_CASES):
        argv = cli_cases.case(rng, pool)
        tally.add(" ".join(argv), run_case(argv, tmp_path))
    assert not tally.failures, tally.report()
    assert {0, 64, 65, 66} <= set(tally.statuses), tally.codes()


def test_guest_fuzzer_seeds_end_with_documented_exit_codes(built: Path, tmp_path: Path) -> None:
    rng = random.Random(11)
    tally = Tally("guest")
    for _ in range(GUEST_SEEDS):
        argv, seed = guest.case(rng, tmp_path, max_cycles=300_000, steps=150)
        tally.add(seed, run_case(argv, tmp_path))
    assert not tally.failures, tally.report()


def _documented(tally: Tally, command: str) -> None:
    assert not tally.failures, tally.report()
    stray = {k: v for k, v in tally.statuses.items() if k not in DOCUMENTED[command]}
    assert not stray, f"{command}: undocumented exit codes {stray} ({tally.codes()})"


def test_sweep_files_end_with_documented_exit_codes(built: Path, tmp_path: Path) -> None:
    rng = random.Random(25)
    pool = sweep_files.files(tmp_path)
    tally = Tally("sweep")
    for _ in range(SWEEP_FILES):
        argv, what = sweep_files.case(rng, pool, tmp_path)
        tally.add(what, run_case(argv, tmp_path))
    _documented(tally, "sweep")


def test_regress_suites_and_baselines_end_with_documented_exit_codes(built: Path, tmp_path: Path) -> None:
    rng = random.Random(25)
    pool = regress_files.files(tmp_path)
    tally = Tally("regress")
    for _ in range(REGRESS_SUITES):
        argv, what = regress_files.case(rng, pool, tmp_path)
        tally.add(what, run_case(argv, tmp_path))
    _documented(tally, "regress")


def test_card_keys_states_and_apdus_end_with_documented_exit_codes(built: Path, tmp_path: Path) -> None:
    if not card_inputs.CARD.exists():
        pytest.skip("firmware/build/card.elf is not built")
    rng = random.Random(25)
    pool = card_inputs.files(tmp_path)
    tally = Tally("card")
    for _ in range(CARD_CASES):
        argv, what = card_inputs.case(rng, pool, tmp_path)
        tally.add(what, run_case(argv, tmp_path))
    _documented(tally, "card")


def test_debugger_scripts_end_with_documented_exit_codes(built: Path, tmp_path: Path) -> None:
    rng = random.Random(25)
    pool = debug_scripts.files(tmp_path)
    tally = Tally("debug")
    for _ in range(DEBUG_SCRIPTS):
        argv, what = debug_scripts.case(rng, pool, tmp_path)
        tally.add(what, run_case(argv, tmp_path))
    _documented(tally, "debug")


def test_ct_check_inputs_end_with_documented_exit_codes(built: Path, tmp_path: Path) -> None:
    rng = random.Random(25)
    tally = Tally("ct-check")
    for _ in range(CTCHECK_CASES):
        argv, what = ctcheck_inputs.case(rng, tmp_path)
        tally.add(what, run_case(argv, tmp_path))
    _documented(tally, "ct-check")


def test_rsp_packets_are_each_answered_without_an_internal_error(built: Path, make_machine) -> None:
    rng = random.Random(25)
    problems = []
    for _ in range(RSP_SESSIONS):
        machine = make_machine()
        machine.load(built / rng.choice(["hello.elf", "fault.elf", "systick.elf"]))
        problems += rsp_packets.session(rng, machine, RSP_PACKETS).problems
    assert not problems, problems[:10]
