"""A bounded run of every fuzzer (issue 11). The long run is `make fuzz` (tests/fuzz/run.py),
its counts are in docs/robustness.md; these few hundred inputs, the same on every run,
keep the property true commit by commit: whatever the input, pkasim ends with a
documented exit code, never 70, never a signal, never a traceback, one error line."""

from __future__ import annotations

import random
from pathlib import Path

import cli_cases
import config_mutants
import elf_mutants
import guest
import pytest
from fuzzing import BUILD, Tally, run_case
from hypothesis import HealthCheck, given, settings

ELF_MUTANTS = 40
CONFIG_MUTANTS = 80
CLI_CASES = 50
GUEST_SEEDS = 8


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
