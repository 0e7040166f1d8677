"""run_job reuses the machine an earlier run of the same image on the same chip loaded
(pkasim.core.reuse): the figures are exactly a new machine's, and a machine is never
reused when the chip, the image file or the run's observers differ."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import given
from hypothesis import strategies as st

from pkasim.chip.config import load_config
from pkasim.cli.main import main
from pkasim.core import reuse
from pkasim.core.reuse import LoadedMachines
from pkasim.rsa import bench
from pkasim.rsa.bench import JOBS, Job, run_job
from pkasim.rsa.rsakey import RsaKey

BY_KEY = {j.key: j for j in JOBS}


@pytest.fixture
def machines(monkeypatch, build_dir):
    """run_job's kept machines, empty for this test."""
    kept = LoadedMachines(4)
    monkeypatch.setattr(bench, "MACHINES", kept)
    return kept


@pytest.fixture(scope="module")
def other_key() -> RsaKey:
    return RsaKey.generate(2048)


def figures(result) -> dict:
    """Every field of a JobResult but the host's wall time."""
    out = dataclasses.asdict(result)
    del out["wall_seconds"]
    return out


def fresh(config, job, **kwargs) -> dict:
    totals: dict[str, int] = {}
    return figures(run_job(config, job, reuse=False, totals=totals, **kwargs)) | {"totals": totals}


def kept(config, job, **kwargs) -> dict:
    totals: dict[str, int] = {}
    return figures(run_job(config, job, totals=totals, **kwargs)) | {"totals": totals}


@pytest.mark.parametrize("job", JOBS, ids=[j.key for j in JOBS])
def test_a_reused_machine_gives_the_figures_of_a_new_one(machines, config, job):
    expected = fresh(config, job)
    first = kept(config, job)
    again = kept(config, job)
    assert machines.built == 1 and machines.reused == 1
    assert first == expected and again == expected
    assert again["verified"]


def test_another_key_and_message_after_a_reuse_give_a_new_machines_result(machines, config, other_key):
    job = BY_KEY["rsa2048-win"]
    kept(config, job)
    kept(config, job)
    msg = 0x1234567 * other_key.n // 0x7654321
    assert kept(config, job, key=other_key, msg=msg) == fresh(config, job, key=other_key, msg=msg)
    assert kept(config, job) == fresh(config, job)  # and the bench's own inputs again
    assert machines.built == 1 and machines.reused == 3


def test_the_built_in_key_comes_from_the_image_after_a_run_that_wrote_another(machines, config, other_key):
    """rsa4096-xrsa-opt reads the image's RSA-4096 key from flash, where a previous run
    on the same image (xrsa_opt.elf) wrote its RSA-2048 key's initial value."""
    kept(config, BY_KEY["rsa2048-pka"], key=other_key, msg=12345)
    assert kept(config, BY_KEY["rsa4096-xrsa-opt"]) == fresh(config, BY_KEY["rsa4096-xrsa-opt"])
    assert machines.reused == 1


def test_an_image_rewritten_on_disk_is_loaded_again(machines, config, tmp_path, build_dir):
    image = tmp_path / "rsa.elf"
    shutil.copyfile(build_dir / "xrsa_win.elf", image)
    job = Job("rsa2048", "RSA-2048", "rsa.elf", 2048, "pka")
    win = kept(config, job, build_dir=tmp_path)
    with open(image, "r+b") as fh:  # the same file (inode), other bytes
        fh.write((build_dir / "xrsa_opt.elf").read_bytes())
        fh.truncate()
    again = kept(config, job, build_dir=tmp_path)
    assert machines.built == 2 and machines.reused == 0
    assert again == fresh(config, job, build_dir=tmp_path) and again["cycles"] != win["cycles"]


def test_an_image_rewritten_within_one_tick_of_the_file_clock_is_found_by_its_digest(machines, config, tmp_path,
                                                                                       build_dir, monkeypatch):
    """Same size, and times the file system did not move (simulated): the bytes differ."""
    monkeypatch.setattr(reuse, "_stamp", lambda info: (info.st_dev, info.st_ino, info.st_size, 0, 0))
    image = tmp_path / "rsa.elf"
    shutil.copyfile(build_dir / "xrsa_win.elf", image)
    with open(image, "rb") as fh:
        comment = ELFFile(fh).get_section_by_name(".comment")["sh_offset"]
    job = Job("rsa2048", "RSA-2048", "rsa.elf", 2048, "pka")
    kept(config, job, build_dir=tmp_path)
    kept(config, job, build_dir=tmp_path)
    assert machines.reused == 1
    with open(image, "r+b") as fh:
        fh.seek(comment)
        byte = fh.read(1)
        fh.seek(comment)
        fh.write(bytes([byte[0] ^ 0x20]))
    kept(config, job, build_dir=tmp_path)
    assert machines.built == 2 and machines.reused == 1


def test_another_chip_gets_its_own_machine(machines, config, repo):
    job = BY_KEY["rsa2048-win"]
    other = load_config(repo / "configs" / "ciu98320b-muls32.yaml")
    kept(config, job)
    assert kept(config, job) == fresh(config, job)
    assert kept(other, job) == fresh(other, job)
    assert machines.built == 2 and machines.reused == 1


def test_a_chip_description_changed_in_place_is_another_chip(machines, repo):
    job = BY_KEY["rsa2048-win"]
    chip = load_config()
    kept(chip, job)
    chip.peripherals["pka"].params["digit_bits"] = 64  # the same object, another PKA
    assert kept(chip, job) == fresh(chip, job)
    assert machines.built == 2 and machines.reused == 0


def test_a_run_with_an_observer_attached_gets_a_new_machine(machines, config):
    job = BY_KEY["rsa2048-win"]
    kept(config, job)
    seen = []
    run_job(config, job, attach=seen.append)
    assert len(seen) == 1 and machines.built == 1 and machines.reused == 0
    assert kept(config, job) == fresh(config, job)  # the kept machine saw no observer
    assert machines.reused == 1


def test_at_most_size_pairs_are_kept_the_least_recently_used_dropped(monkeypatch, config):
    small = LoadedMachines(2)
    monkeypatch.setattr(bench, "MACHINES", small)
    for key in ("rsa2048-win", "rsa2048-pka", "rsa2048-pair"):
        kept(config, BY_KEY[key])
    assert len(small) == 2 and small.built == 3
    kept(config, BY_KEY["rsa2048-pair"])
    assert small.reused == 1
    kept(config, BY_KEY["rsa2048-win"])  # dropped when the third came
    assert small.built == 4 and len(small) == 2


def test_a_run_that_raises_leaves_no_machine_behind(machines, config):
    def stop(cycles: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_job(config, BY_KEY["rsa4096-xrsa"], progress=stop)
    assert len(machines) == 0


def test_two_runs_at_once_of_one_pair_get_two_machines(config, build_dir):
    kept_machines = LoadedMachines(4)
    with kept_machines.loaded(config, build_dir / "hello.elf") as a, \
            kept_machines.loaded(config, build_dir / "hello.elf") as b:
        assert a is not b
    assert len(kept_machines) == 1


def test_bench_cold_gives_the_same_figures(machines, tmp_path):
    out = {}
    for flags in ((), ("--cold",)):
        path = tmp_path / f"bench{len(flags)}.json"
        assert main(["bench", "--only", "rsa2048-pka", "--only", "rsa4096-xrsa-opt", *flags, "--json", str(path)]) == 0
        jobs = json.loads(path.read_text())["configs"][0]["jobs"]
        out[flags] = [{k: v for k, v in j.items() if k != "wall_seconds"} for j in jobs]
    assert out[()] == out[("--cold",)]
    assert machines.reused == 1 and machines.built == 1  # the second job, then --cold built none


@given(st.binary(min_size=1, max_size=40000).flatmap(
    lambda old: st.tuples(st.just(old), st.lists(st.tuples(st.integers(0, len(old) - 1), st.integers(1, 255)),
                                                 max_size=6))))
def test_flash_is_put_back_byte_for_byte_over_only_the_bytes_that_differ(case):
    """The spans written back start and end on a changed byte: equal bytes of code
    around them are not rewritten (that would drop every decoded block)."""
    old, flips = case
    now = bytearray(old)
    for at, bits in flips:
        now[at] ^= bits
    spans = reuse._changed(bytes(now), old)
    for lo, hi in spans:
        assert now[lo] != old[lo] and now[hi - 1] != old[hi - 1]
        now[lo:hi] = old[lo:hi]
    assert bytes(now) == old
