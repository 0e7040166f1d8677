"""pkasim power, tvla and cpa from the command line (docs/power.md): what they write,
their verdicts on the demo firmware (small trace counts: the documented campaigns are
larger), reproducibility, and one clear line with the documented exit code for each
kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from pkasim.cli.main import main

KEY = "000102030405060708090a0b0c0d0e0f"
PT = "00112233445566778899aabbccddeeff"


def run(argv: list) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def one_error_line(capsys, code: int, expected: int, *phrases: str) -> None:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("pkasim:")]
    assert code == expected, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def aes(key: bytes, block: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


@pytest.fixture(scope="module")
def aes_set(elf, tmp_path_factory) -> Path:
    """300 traces of aes.elf's first round, random plaintexts, the ciphertext recorded."""
    out = tmp_path_factory.mktemp("power") / "aes.npy"
    assert run(["power", elf("aes"), "--window", "aes_round#1", "--random", "aes_pt", "--traces", 300,
                "--noise", 10, "--out", out, "--output", "aes_ct", "-q"]) == 0
    return out


def test_power_writes_the_traces_their_inputs_outputs_and_a_description(aes_set):
    traces = np.load(aes_set)
    side = np.load(aes_set.with_suffix(".inputs.npz"))
    doc = json.loads(aes_set.with_suffix(".json").read_text())
    assert doc["schema"] == "pkasim.power/1"
    assert traces.dtype == np.float32 and traces.shape == (300, doc["samples"]) == (300, doc["window"]["cycles"])
    assert side["in_aes_pt"].shape == (300, 16) and side["out_aes_ct"].shape == (300, 16)
    assert side["aligned"].all() and doc["misaligned"] == 0
    assert len(side["cycles"]) == doc["samples"] and side["cycles"][0] == doc["window"]["first_cycle"]
    for pt, ct in zip(side["in_aes_pt"][:5], side["out_aes_ct"][:5]):
        assert aes(bytes.fromhex(KEY), pt.tobytes()) == ct.tobytes()


def test_the_window_of_a_function_starts_at_its_first_instruction(aes_set, elf):
    from pkasim.chip.config import load_config
    from pkasim.chip.loader import load_image

    side = np.load(aes_set.with_suffix(".inputs.npz"))
    entry = load_image(elf("aes"), load_config()).symbol("aes_round").address & ~1
    assert side["pcs"][0] == entry


def test_cpa_recovers_the_aes_key_from_the_traces(aes_set, capsys, tmp_path):
    report = tmp_path / "cpa.json"
    code = run(["cpa", aes_set, "--intermediate", "aes-sbox-hw:aes_pt", "--key", KEY, "--json", report])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(report.read_text())
    assert doc["schema"] == "pkasim.cpa/1" and doc["recovered"] == 16
    assert doc["recovered_key"] == KEY
    assert doc["traces_needed"] <= 300
    assert "recovered 16 of 16 bytes" in capsys.readouterr().err


def test_cpa_with_a_wrong_key_exits_1(aes_set):
    assert run(["cpa", aes_set, "--intermediate", "aes-sbox-hw:aes_pt", "--key", "ff" * 16, "-q"]) == 1


def test_the_same_seed_gives_the_same_traces_on_any_number_of_workers(elf, tmp_path):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    common = ["--window", "aes_round#2", "--random", "aes_pt", "--traces", 40, "--noise", 5, "--seed", 9, "-q"]
    assert run(["power", elf("aes"), *common, "--out", a]) == 0
    assert run(["power", elf("aes"), *common, "--out", b, "--jobs", 2]) == 0
    assert np.array_equal(np.load(a), np.load(b))
    assert np.array_equal(np.load(a.with_suffix(".inputs.npz"))["in_aes_pt"],
                          np.load(b.with_suffix(".inputs.npz"))["in_aes_pt"])


def test_a_dask_cluster_gives_the_tvla_of_one_process(elf, tmp_path):
    distributed = pytest.importorskip("distributed")
    common = ["tvla", elf("aes"), "--window", "aes_round#1", "--fixed", f"aes_pt={PT}", "--random", "aes_pt",
              "--traces", 40, "--noise", 5, "--seed", 3, "-q"]
    assert run([*common, "--json", tmp_path / "one.json"]) == 1
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        assert run([*common, "--engine", "dask", "--scheduler", cluster.scheduler_address,
                    "--json", tmp_path / "d.json"]) == 1
    one, dask = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "d"))
    assert (one["max_abs_t"], one["leaking_samples"], one["max_at"]) == (dask["max_abs_t"], dask["leaking_samples"],
                                                                         dask["max_at"])


def test_a_riscure_trace_set_holds_the_same_traces(elf, tmp_path):
    trsfile = pytest.importorskip("trsfile")
    out = tmp_path / "t.npy"
    assert run(["power", elf("aes"), "--window", "aes_round#1", "--random", "aes_pt", "--traces", 5, "--out", out,
                "--trs", tmp_path / "t.trs", "-q"]) == 0
    traces = np.load(out)
    with trsfile.open(str(tmp_path / "t.trs"), "r") as trs:
        assert len(trs) == 5
        assert np.allclose(np.asarray(trs[3].samples), traces[3])
        assert bytes(trs[3].parameters["IN_aes_pt"].value) == np.load(tmp_path / "t.inputs.npz")["in_aes_pt"][3].tobytes()


def test_tvla_finds_the_unprotected_aes_leak_and_names_where(elf, tmp_path, capsys):
    report, plot = tmp_path / "t.json", tmp_path / "t.png"
    code = run(["tvla", elf("aes"), "--window", "aes_round#1", "--fixed", f"aes_pt={PT}", "--random", "aes_pt",
                "--traces", 200, "--noise", 10, "--json", report, "--plot", plot])
    assert code == 1
    doc = json.loads(report.read_text())
    assert doc["schema"] == "pkasim.tvla/1" and doc["leaks"] is True and doc["threshold"] == 4.5
    assert doc["groups"] == {"fixed": 100, "random": 100} and doc["tested"] == ["aes_pt"]
    assert doc["max_abs_t"] > 4.5
    first = doc["first_leak"]
    assert set(first) >= {"cycle", "pc", "function", "file", "line"}
    assert first["function"].startswith("aes_round") and first["file"].endswith("aes.c")
    assert plot.stat().st_size > 0
    assert "LEAK" in capsys.readouterr().err


def test_a_second_order_tvla_reports_its_order(elf, tmp_path):
    report = tmp_path / "t.json"
    code = run(["tvla", elf("aes"), "--window", "aes_round#1", "--fixed", f"aes_pt={PT}", "--random", "aes_pt",
                "--traces", 200, "--noise", 10, "--order", 2, "--json", report, "-q"])
    doc = json.loads(report.read_text())
    assert doc["order"] == 2 and code == (1 if doc["leaks"] else 0)
    assert isinstance(doc["max_abs_t"], float)


def test_tvla_passes_when_the_tested_input_does_not_reach_the_window(elf, tmp_path):
    # aes_pt is read only inside aes_encrypt: the key schedule does not depend on it
    report = tmp_path / "t.json"
    code = run(["tvla", elf("aes"), "--window", "aes_expand_key", "--fixed", f"aes_pt={PT}", "--random", "aes_pt",
                "--traces", 100, "--noise", 10, "--json", report, "-q"])
    assert code == 0
    assert json.loads(report.read_text())["first_leak"] is None


def test_masked_aes_passes_a_first_order_tvla_the_unmasked_one_fails(elf, repo, tmp_path):
    gen = repo / "firmware" / "images" / "aes_masked_inputs.py"
    report = tmp_path / "m.json"
    code = run(["tvla", elf("aes_masked"), "--window", "aes_round#2", "--inputs", f"{gen}:shares",
                "--traces", 400, "--noise", 10, "--json", report, "-q"])
    doc = json.loads(report.read_text())
    assert code == 0, doc["max_at"]
    assert doc["max_abs_t"] < 4.5 and doc["misaligned_traces"] == 0


def test_a_timing_leak_makes_the_traces_misaligned_and_fails(elf, tmp_path):
    report = tmp_path / "t.json"
    code = run(["tvla", elf("ctleak"), "--window", "leaky_modexp", "--fixed", "ct_secret=01000000",
                "--random", "ct_secret", "--traces", 8, "--json", report, "-q"])
    assert code == 1
    doc = json.loads(report.read_text())
    assert doc["misaligned_traces"] > 0 and doc["leaks"] is True


def test_the_pka_adds_its_leakage_in_its_busy_cycles(elf, repo, tmp_path):
    quiet = tmp_path / "quiet-pka.yaml"
    quiet.write_text(f"extends: {repo / 'configs' / 'ciu98320b.yaml'}\n"
                     "power:\n  pka: {constant: 0, hd_read: 0, hd_write: 0}\n")
    with_pka, without = tmp_path / "a.npy", tmp_path / "b.npy"
    window = ["--window", "cycles:2371-4370", "--traces", 1, "-q"]
    assert run(["power", elf("rsa_power"), *window, "--out", with_pka]) == 0
    assert run(["power", elf("rsa_power"), *window, "--out", without, "--config", quiet]) == 0
    doc = json.loads(with_pka.with_suffix(".json").read_text())
    assert doc["window"]["pka_operations"] > 0
    extra = np.load(with_pka)[0] - np.load(without)[0]
    assert (extra >= 0).all()
    busy = extra > 0
    assert 0.5 < busy.mean() < 1  # the PKA works most of the window; the CPU alone at its start
    assert np.unique(extra[busy]).size > 10  # data-dependent, not a constant


def test_every_trace_draws_its_own_numbers_from_the_trng(elf, repo, tmp_path):
    out = tmp_path / "m.npy"
    gen = repo / "firmware" / "images" / "aes_masked_inputs.py"
    assert run(["power", elf("aes_masked"), "--window", "aes_round#1", "--inputs", f"{gen}:shares", "--traces", 6,
                "--output", "aes_masks", "--output", "aes_ct_share0", "--output", "aes_ct_share1", "--out", out,
                "-q"]) == 0
    side = np.load(out.with_suffix(".inputs.npz"))
    masks = {m.tobytes() for m in side["out_aes_masks"]}
    assert len(masks) == 6
    for s0, s1, c0, c1 in zip(side["in_aes_pt_share0"], side["in_aes_pt_share1"], side["out_aes_ct_share0"],
                              side["out_aes_ct_share1"]):
        assert aes(bytes.fromhex(KEY), (s0 ^ s1).tobytes()) == (c0 ^ c1).tobytes()


@pytest.mark.parametrize("blind", [0, 1, 2, 3])
def test_the_rsa_signer_signs_right_with_every_blinding(elf, blind):
    # rsa_check: the signature equals the demo key's (exit 0), blinded or not
    from pkasim import Machine, load_config

    m = Machine(load_config())
    m.load(elf("rsa_power"))
    m.write_symbol("rsa_blind", bytes([blind, 0, 0, 0]))
    assert m.run(max_cycles=10**7).exit_code == 0


def _exp_start(elf, blind: int) -> int:
    """The first cycle of the exponentiation mod q (rsa_exp's first call)."""
    from pkasim import load_config
    from pkasim.analysis.power import Setup, Tracer
    from pkasim.analysis.windows import parse_window

    tracer = Tracer(Setup(elf("rsa_power"), load_config()))
    return tracer.reference(parse_window("rsa_exp#1"), {"rsa_blind": bytes([blind, 0, 0, 0])}).lo


@pytest.fixture(scope="module")
def rsa_dq(elf) -> str:
    from pkasim import Machine, load_config

    m = Machine(load_config())
    m.load(elf("rsa_power"))
    return m.read_symbol("rsa_dq", initial=True).hex()


def _rsa_tvla(elf, blind: int, dq: str, *extra) -> int:
    lo = _exp_start(elf, blind)
    return run(["tvla", elf("rsa_power"), "--window", f"cycles:{lo}-{lo + 1999}", "--fixed",
                f"rsa_blind={blind:02x}000000", "--fixed", f"rsa_dq={dq}", "--random", "rsa_dq", "--traces", 200,
                "--noise", 10, "--seed", 1, "-q", *extra])


@pytest.mark.parametrize(("blind", "verdict"), [(0, 1), (1, 0), (2, 1), (3, 0)],
                         ids=["none-leaks", "exponent-blinding-passes", "message-blinding-alone-leaks",
                              "both-pass"])
def test_rsa_exponent_tvla_passes_only_with_exponent_blinding(elf, rsa_dq, blind, verdict):
    # message blinding randomises the PKA's operands, but the exponent's bits still
    # choose the slots and the exponent words the CPU reads (docs/power.md)
    assert _rsa_tvla(elf, blind, rsa_dq) == verdict


def test_the_rsa_blinding_randomness_comes_from_the_trng(elf, tmp_path):
    out = tmp_path / "r.npy"
    assert run(["power", elf("rsa_power"), "--window", "rsa_blind_exponent#1", "--fixed", "rsa_blind=01000000",
                "--traces", 3, "--output", "rsa_rand", "--out", out, "-q"]) == 0
    drawn = np.load(out.with_suffix(".inputs.npz"))["out_rsa_rand"]
    assert len({r.tobytes() for r in drawn}) == 3 and all(r.any() for r in drawn)  # a fresh draw per trace


def test_the_first_trace_of_a_fresh_worker_lines_up_with_the_reference(elf, tmp_path):
    # a worker's first run decides the PKA's polling loop (idle.c) while it runs: without
    # a warm-up run its instructions in the window differ from the reference's
    out = tmp_path / "w.npy"
    assert run(["power", elf("rsa_power"), "--window", "cycles:3000-3999", "--random", "rsa_dq", "--traces", 3,
                "--jobs", 2, "--out", out, "-q"]) == 0
    assert np.load(out.with_suffix(".inputs.npz"))["aligned"].all()


def test_a_bivariate_tvla_finds_the_masked_shares_the_univariate_ones_miss(elf, repo, tmp_path):
    # the masked AES's input stage loads the plaintext's shares u and p ^ u at different
    # cycles: no sample depends on p, the product of the two samples does
    gen = repo / "firmware" / "images" / "aes_masked_inputs.py"
    common = ["tvla", elf("aes_masked"), "--window", "aes_masked.c:197-203", "--inputs", f"{gen}:shares",
              "--traces", 600, "--noise", 5, "--seed", 1, "-q"]
    report = tmp_path / "b.json"
    assert run([*common, "--order", 1]) == 0
    assert run([*common, "--order", 2]) == 0
    assert run([*common, "--order", 2, "--pairs", 16, "--json", report]) == 1
    doc = json.loads(report.read_text())
    assert doc["pairs"] == {"max_distance": 16, "count": doc["pairs"]["count"]} and doc["leaking_pairs"] > 0
    lines = {doc["max_at"]["line"], doc["max_at"]["paired_with"]["line"]}
    assert lines == {198, 201}  # in1[i] (u) and in0[i] (p ^ u)


# ---------------------------------------------------------------------- bad input

def test_an_unknown_symbol_is_exit_65(elf, capsys, tmp_path):
    code = run(["power", elf("aes"), "--random", "no_such", "--traces", 2, "--out", tmp_path / "x.npy"])
    one_error_line(capsys, code, 65, "no_such")


def test_a_fixed_value_longer_than_its_symbol_is_exit_65(elf, capsys, tmp_path):
    code = run(["power", elf("aes"), "--fixed", "aes_pt=" + "00" * 17, "--traces", 2, "--out", tmp_path / "x.npy"])
    one_error_line(capsys, code, 65, "17 bytes do not fit in 'aes_pt' (16 bytes)")


def test_a_symbol_in_bss_is_exit_65(elf, capsys, tmp_path):
    code = run(["power", elf("aes"), "--random", "round_keys", "--traces", 2, "--out", tmp_path / "x.npy"])
    one_error_line(capsys, code, 65, "round_keys", "zeroes at reset")


def test_fewer_than_two_traces_per_group_is_exit_64(elf, capsys):
    code = run(["tvla", elf("aes"), "--fixed", f"aes_pt={PT}", "--random", "aes_pt", "--traces", 3])
    one_error_line(capsys, code, 64, "at least 2 traces in each group")


def test_a_tvla_with_nothing_tested_is_exit_64(elf, capsys):
    code = run(["tvla", elf("aes"), "--random", "aes_pt", "--traces", 10])
    one_error_line(capsys, code, 64, "nothing differs between the groups")


def test_an_empty_window_is_exit_64(elf, capsys, tmp_path):
    code = run(["power", elf("aes"), "--window", "cycles:900000-900010", "--traces", 2, "--out", tmp_path / "x.npy"])
    one_error_line(capsys, code, 64, "before the window starts")


def test_a_function_never_called_is_exit_64(elf, capsys, tmp_path):
    code = run(["power", elf("aes"), "--window", "aes_round#10", "--traces", 2, "--out", tmp_path / "x.npy"])
    one_error_line(capsys, code, 64, "aes_round is called 9 time(s) in the run, not 10")


def test_an_unknown_function_is_exit_65(elf, capsys, tmp_path):
    code = run(["power", elf("aes"), "--window", "no_such_function", "--traces", 2, "--out", tmp_path / "x.npy"])
    one_error_line(capsys, code, 65, "no function named 'no_such_function'")


def test_an_unwritable_output_is_exit_74(elf, capsys, tmp_path):
    code = run(["power", elf("aes"), "--window", "aes_round#1", "--traces", 2, "--out", tmp_path / "no" / "x.npy"])
    one_error_line(capsys, code, 74, "cannot write")


def test_an_output_that_is_not_npy_is_exit_64(elf, capsys, tmp_path):
    code = run(["power", elf("aes"), "--traces", 2, "--out", tmp_path / "x.csv"])
    one_error_line(capsys, code, 64, "expected a .npy file name")


def test_a_missing_inputs_module_is_exit_66(elf, capsys, tmp_path):
    code = run(["tvla", elf("aes"), "--inputs", f"{tmp_path}/none.py:f", "--traces", 4])
    one_error_line(capsys, code, 66, "no such file")


def test_odd_hex_is_a_usage_error(elf, capsys, tmp_path):
    code = run(["power", elf("aes"), "--fixed", "aes_pt=abc", "--traces", 2, "--out", tmp_path / "x.npy"])
    assert code == 64
    assert "even number of hex digits" in capsys.readouterr().err


def test_cpa_without_its_inputs_file_is_exit_66(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3, 4), dtype=np.float32))
    code = run(["cpa", tmp_path / "x.npy", "--intermediate", "aes-sbox-hw:aes_pt"])
    one_error_line(capsys, code, 66, "x.inputs.npz")


def test_an_inputs_function_that_raises_is_one_line_exit_65(elf, capsys, tmp_path):
    gen = tmp_path / "gen.py"
    gen.write_text("INPUTS = ['aes_pt']\n\ndef make(rng, fixed):\n    return {'aes_pt': 1 / 0}\n")
    code = run(["power", elf("aes"), "--inputs", f"{gen}:make", "--traces", 2, "--out", tmp_path / "x.npy"])
    one_error_line(capsys, code, 65, f"--inputs {gen}:make failed: ZeroDivisionError")


def test_an_intermediate_that_raises_is_one_line_exit_65(aes_set, capsys, tmp_path):
    model = tmp_path / "model.py"
    model.write_text("def predict(inputs, byte, guess):\n    return inputs['no_such'][:, byte]\n")
    code = run(["cpa", aes_set, "--intermediate", f"{model}:predict", "--bytes", 1])
    one_error_line(capsys, code, 65, "predict(inputs, 0, guess) failed: KeyError")


def test_a_python_intermediate_attacks_like_the_built_in_one(aes_set, tmp_path):
    model = tmp_path / "model.py"
    model.write_text("from pkasim.analysis.power.stats import AES_SBOX, HW8\nimport numpy as np\n"
                     "S = np.frombuffer(AES_SBOX, dtype=np.uint8)\n\n"
                     "def predict(inputs, byte, guess):\n    return HW8[S[inputs['aes_pt'][:, byte] ^ guess]]\n")
    assert run(["cpa", aes_set, "--intermediate", f"{model}:predict", "--bytes", 2, "--key", KEY[:4], "-q"]) == 0


def test_pairs_without_second_order_is_exit_64(elf, capsys):
    code = run(["tvla", elf("aes"), "--fixed", f"aes_pt={PT}", "--random", "aes_pt", "--traces", 10, "--pairs", 4])
    one_error_line(capsys, code, 64, "--pairs 4", "--order 2")


def test_too_many_pairs_is_exit_64(elf, capsys):
    code = run(["tvla", elf("aes"), "--window", "aes_encrypt", "--fixed", f"aes_pt={PT}", "--random", "aes_pt",
                "--traces", 10, "--order", 2, "--pairs", 100000])
    one_error_line(capsys, code, 64, "pairs over", "at most")
