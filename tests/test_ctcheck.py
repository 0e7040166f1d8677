"""pkasim ct-check (emulator/cli/ctcheck.py, emulator/native/cthash.c; docs/ct-check.md).

It passes the PKA RSA images with random keys and messages (their control flow, memory
access addresses, PKA operations and cycles are the same for every key and message;
the cycle tests of issue 12 for every image, here with random keys),
passes the software RSA image likewise, and finds the deliberately leaky
square-and-multiply of firmware/images/ctleak.c at the line marked LEAK: a branch on
the exponent bit (mode 0) and a table address from the exponent (mode 2), while the
masked version (mode 1) passes. Hashing never changes a run's counts. Bad input gets
one line and its exit code.

Key counts are kept small here (the suite's time budget); docs/ct-check.md gives the
20-key results for every image.
"""

from __future__ import annotations

import io
import json
import re

import pytest

from pkasim.analysis.cthash import CtHash
from pkasim.cli.main import main
from pkasim.core.machine import Machine

PKA_IMAGES = ("xrsa", "xrsa_opt", "xrsa_win", "xrsa_win_sram", "xrsa_pair")


def ct_check(capsys, *argv: str) -> tuple[int, dict | None, str]:
    """Run `pkasim ct-check -q --json - ARGV`: exit code, the JSON document, stderr."""
    code = main(["ct-check", "-q", "--json", "-", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def leak_line(repo, marker: str) -> int:
    lines = (repo / "firmware" / "images" / "ctleak.c").read_text().splitlines()
    (n,) = [i + 1 for i, text in enumerate(lines) if marker in text]
    return n


@pytest.fixture
def mode(tmp_path):
    def write(value: int) -> str:
        path = tmp_path / f"mode{value}.bin"
        path.write_bytes(value.to_bytes(4, "little"))
        return f"ct_mode={path}"

    return write


def rsa_secrets(nbits: int) -> list[str]:
    return ["--secret", f"rsa_input_key=rsa-key:{nbits}", "--secret", f"rsa_input_msg=rsa-msg:{nbits}"]


# --------------------------------------------------------------------------- the RSA images

@pytest.mark.parametrize("image", PKA_IMAGES)
def test_pka_rsa2048_images_pass_with_random_keys_and_messages(capsys, elf, image):
    code, doc, err = ct_check(capsys, str(elf(image)), *rsa_secrets(2048), "--random", "4")
    assert code == 0, err
    assert doc["verdict"] == "identical"
    assert all(doc["identical"].values())
    assert len(doc["runs"]) == 4
    assert {r["exit_code"] for r in doc["runs"]} == {1}  # each signs; rsa_check compares with the demo signature
    assert doc["runs"][0]["pka"] > 2_000  # the exponentiation ran (MONTMULs and the rest)


@pytest.mark.parametrize("image", PKA_IMAGES[:4])  # xrsa_pair is xrsa_win without the pair
def test_pka_rsa4096_images_pass_with_random_keys_and_messages(capsys, elf, image):
    code, doc, err = ct_check(capsys, str(elf(image)), *rsa_secrets(4096), "--random", "2")
    assert code == 0, err
    assert all(doc["identical"].values())
    assert len({r["cycles"] for r in doc["runs"]}) == 1


def test_pair_image_passes_on_the_pka_with_the_pair(capsys, elf, repo):
    """xrsa_pair.elf on the Victor preset (CAPS.PAIR): one MONTMUL2 per exponent bit."""
    config = repo / "configs" / "presets" / "victor-radix16.yaml"
    code, doc, err = ct_check(capsys, str(elf("xrsa_pair")), "--config", str(config), *rsa_secrets(2048),
                              "--random", "3")
    assert code == 0, err
    assert all(doc["identical"].values())


def test_software_rsa_passes_with_random_keys_and_messages(capsys, elf):
    """rsa_soft.elf is constant time like Mbed TLS 3.6's bignum core (fixed window,
    masked table lookups and subtractions; docs/software-rsa.md)."""
    code, doc, err = ct_check(capsys, str(elf("rsa_soft")), *rsa_secrets(2048), "--random", "2")
    assert code == 0, err
    assert doc["verdict"] == "identical"
    assert all(doc["identical"].values())
    assert [r["complete"] for r in doc["runs"]] == [True, True]
    assert doc["runs"][0]["pka"] == 0  # software: no PKA operation


# --------------------------------------------------------------------------- the leaky example

def test_leaky_square_and_multiply_fails_at_the_branch_on_the_exponent_bit(capsys, elf, repo):
    code, doc, err = ct_check(capsys, str(elf("ctleak")), "--secret", "ct_secret", "--random", "5", "--seed", "1")
    assert code == 1
    d = doc["divergence"]
    assert d["kind"] == "control flow"
    assert d["symbol"].startswith("leaky_modexp+")
    assert d["source"]["file"].endswith("firmware/images/ctleak.c")
    assert d["source"]["line"] == leak_line(repo, "LEAK: a branch")
    assert doc["identical"]["mem"] is True  # no access differs before the first branch does
    assert re.search(r"the branch at leaky_modexp\+0x[0-9a-f]+ \(.*ctleak\.c:\d+\)", d["message"])
    assert "divergence (control flow)" in err and "ct_secret = " in err  # the report names both inputs


def test_secret_indexed_table_fails_at_the_load_with_a_secret_address(capsys, elf, repo, mode):
    code, doc, _ = ct_check(capsys, str(elf("ctleak")), "--secret", "ct_secret", "--random", "5", "--seed", "1",
                            "--load", mode(2))
    assert code == 1
    d = doc["divergence"]
    assert d["kind"] == "memory address"
    assert d["symbol"].startswith("window_modexp+")
    assert d["source"]["line"] == leak_line(repo, "LEAK: an address")
    assert d["addresses"][0] != d["addresses"][1]
    assert doc["identical"]["flow"] is True and doc["identical"]["cycles"] is True


def test_masked_square_and_multiply_passes(capsys, elf, mode):
    code, doc, _ = ct_check(capsys, str(elf("ctleak")), "--secret", "ct_secret", "--random", "10",
                            "--load", mode(1))
    assert code == 0
    assert doc["verdict"] == "identical" and len(doc["runs"]) == 10


def test_saved_inputs_reproduce_the_divergence(capsys, elf, tmp_path):
    saved = tmp_path / "inputs"
    first = ct_check(capsys, str(elf("ctleak")), "--secret", "ct_secret", "--random", "3", "--seed", "7",
                     "--save-inputs", str(saved))
    again = ct_check(capsys, str(elf("ctleak")), "--secret", "ct_secret", "--inputs", str(saved))
    assert first[0] == again[0] == 1
    assert first[1]["divergence"]["pc"] == again[1]["divergence"]["pc"]
    assert [r["cycles"] for r in first[1]["runs"]] == [r["cycles"] for r in again[1]["runs"]]


@pytest.fixture
def long_leaky_inputs(tmp_path):
    """--inputs for ctleak repeated 10,000 times (about 67 M cycles, past three progress
    stops): inputs 1 and 2 the same exponent, 3 one whose first bit differs, 4 like 1."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name, exponent in (("1", 0x0000_0001), ("2", 0x0000_0001), ("3", 0x8000_0001), ("4", 0x0000_0001)):
        (inputs / name).write_bytes(exponent.to_bytes(4, "little"))
    repeat = tmp_path / "repeat.bin"
    repeat.write_bytes((10_000).to_bytes(4, "little"))
    return ["--secret", "ct_secret", "--inputs", str(inputs), "--load", f"ct_repeat={repeat}"]


def test_the_check_stops_at_the_first_input_that_differs(capsys, elf, long_leaky_inputs):
    code, doc, _ = ct_check(capsys, str(elf("ctleak")), *long_leaky_inputs)
    assert code == 1 and doc["verdict"] == "divergence"
    assert doc["inputs"] == 4
    assert [r["input"] for r in doc["runs"]] == ["1", "2", "3"]  # input 4 is never run


def test_a_differing_run_is_stopped_at_the_progress_stop_after_its_first_difference(capsys, elf, long_leaky_inputs):
    """Input 3 differs in its first block of leaky_modexp: its first checkpoint (16,384
    events) already differs, and the run ends at the next progress stop (2^24 cycles)."""
    code, doc, _ = ct_check(capsys, str(elf("ctleak")), *long_leaky_inputs)
    runs = doc["runs"]
    assert code == 1
    assert [r["complete"] for r in runs] == [True, True, False]
    assert runs[0]["cycles"] > 2 * 2**24  # a full run goes past two progress stops
    assert 2**24 <= runs[2]["cycles"] < 2**24 + 64  # ... the differing one ends at the first
    assert runs[2]["exit_code"] is None
    assert doc["compared_to_event"] == 16_384
    assert doc["identical"]["cycles"] is None and doc["identical"]["flow"] is False
    assert doc["divergence"]["source"]["line"] == leak_line(elf("ctleak").parents[2], "LEAK: a branch")


def test_the_hash_does_not_change_the_run(config, elf):
    """The same cycles, instructions and sleep with the hooks attached as without."""
    outcomes = []
    for hashed in (False, True):
        m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
        m.load(elf("systick"))
        h = CtHash(m) if hashed else None
        r = m.run(max_cycles=10**8)
        outcomes.append((r.reason, r.cycles, r.instructions, m.sleep_cycles, m.exceptions_taken))
        if h is not None:
            assert h.result().counts[0] > 0
            h.close()
    assert outcomes[0] == outcomes[1]


# --------------------------------------------------------------------------- errors

def test_unknown_secret_symbol_is_exit_65(capsys, elf):
    code, doc, err = ct_check(capsys, str(elf("ctleak")), "--secret", "no_such_symbol", "--random", "2")
    assert code == 65 and doc is None
    assert err.strip().splitlines() == [f"pkasim: error: {elf('ctleak')}: no symbol named 'no_such_symbol'"]


def test_input_file_larger_than_the_symbol_is_exit_65(capsys, elf, tmp_path):
    (tmp_path / "a").write_bytes(bytes(4))
    (tmp_path / "b").write_bytes(bytes(5))
    code, _, err = ct_check(capsys, str(elf("ctleak")), "--secret", "ct_secret", "--inputs", str(tmp_path))
    assert code == 65
    assert "more than 4 bytes, the size of 'ct_secret'" in err and "Traceback" not in err


def test_random_bytes_larger_than_the_symbol_are_exit_65(capsys, elf):
    code, _, err = ct_check(capsys, str(elf("ctleak")), "--secret", "ct_secret=bytes:8", "--random", "2")
    assert code == 65
    assert "8 bytes do not fit in 'ct_secret' (4 bytes)" in err


@pytest.mark.parametrize("argv,code", [
    (["--secret", "ct_secret", "--random", "1"], 64),
    (["--secret", "ct_secret", "--inputs", "/no/such/dir"], 66),
    (["--secret", "ct_secret=rsa-key:2048", "--inputs", "."], 64),
    (["--secret", "ct_secret=rsa-key:1000", "--random", "2"], 64),
    (["--secret", "ct_secret", "--secret", "ct_secret", "--random", "2"], 64),
    (["--secret", "ct_secret"], 64),
])
def test_misuse_is_one_line_and_its_exit_code(capsys, elf, argv, code):
    got = main(["ct-check", str(elf("ctleak")), *argv])
    _, err = capsys.readouterr()
    assert got == code
    assert "Traceback" not in err and err.strip()


def test_fewer_than_two_inputs_is_usage_error(capsys, elf, tmp_path):
    (tmp_path / "only").write_bytes(bytes(4))
    code, _, err = ct_check(capsys, str(elf("ctleak")), "--secret", "ct_secret", "--inputs", str(tmp_path))
    assert code == 64
    assert "at least two" in err


def test_a_run_that_does_not_end_is_its_exit_code(capsys, elf):
    code, doc, err = ct_check(capsys, str(elf("ctleak")), "--secret", "ct_secret", "--random", "2",
                              "--max-cycles", "1000")
    assert code == 124 and doc is None
    assert err.startswith("pkasim: error: input random #1: the run did not end") and len(err.splitlines()) == 1
