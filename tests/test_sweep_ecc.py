"""`pkasim sweep` over the curve jobs (axes.curve_jobs; docs/sweep.md, docs/ecc.md): the
ECC operations of `pkasim bench` as points of a grid of chips, beside or instead of the
RSA points, each checked against `cryptography`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkasim.cli.main import main
from pkasim.sweep.cache import ResultCache
from pkasim.sweep.engines import LocalEngine
from pkasim.sweep.grid import expand
from pkasim.sweep.runner import run_sweep
from pkasim.sweep.spec import read_sweep

SHIPPED = Path(__file__).resolve().parent.parent / "configs" / "sweeps" / "ecc-multipliers.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_the_shipped_ecc_sweep_expands_to_a_point_per_job_and_chip():
    sweep = read_sweep(SHIPPED)
    points = expand(sweep)
    assert len(points) == 3 * 5 and not sweep.firmware
    assert {p.algorithm for p in points} == {"p256-sign", "x25519", "ed25519-sign"}
    assert {p.key_bits for p in points} == {256}


def test_curve_jobs_run_on_every_chip_and_match_cryptography(tmp_path, build_dir):
    repo = Path(__file__).resolve().parent.parent
    sweep = read_sweep(write(tmp_path, f"""
chip: {repo / "configs" / "ciu98320b.yaml"}
build_dir: {build_dir}
axes:
  firmware: [xrsa_opt.elf]
  key_bits: [2048]
  curve_jobs: [x25519, ed25519-sign-soft]
  chip:
    pka.digit_bits: [32, 64]
"""))
    points = expand(sweep)
    assert [p.algorithm for p in points] == ["CRT", "x25519", "ed25519-sign-soft"] * 2
    run = run_sweep(sweep, points, LocalEngine(1), ResultCache(tmp_path / "c.sqlite"))
    assert run.failed == 0 and all(r["verified"] for r in run.rows)
    by = {(r["algorithm"], r["pka.digit_bits"]): r for r in run.rows}
    # a 64-bit digit halves d: the PKA's operations are shorter, X25519 faster; the software job does not change
    assert by[("x25519", 64)]["cycles"] < by[("x25519", 32)]["cycles"]
    assert by[("ed25519-sign-soft", 64)]["cycles"] == by[("ed25519-sign-soft", 32)]["cycles"]
    again = run_sweep(sweep, points, LocalEngine(1), ResultCache(tmp_path / "c.sqlite"))
    assert again.computed == 0 and again.rows == run.rows


@pytest.mark.parametrize("text, message", [
    ("axes: {curve_jobs: [p384-sign]}", "unknown ECC job 'p384-sign'"),
    ("axes: {curve_jobs: [x25519, x25519]}", "listed twice"),
    ("axes: {key_bits: [2048]}", "axes.firmware: required"),
])
def test_a_bad_curve_jobs_axis_is_one_line_and_exit_78(capsys, tmp_path, text, message):
    path = write(tmp_path, text)
    assert main(["sweep", str(path), "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "o")]) == 78
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
