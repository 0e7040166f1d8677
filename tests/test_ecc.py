"""The ECC firmware (firmware/images/ecc.c, src/p256.c, src/c25519.c; docs/ecc.md).

Every operation against the ``cryptography`` package on 100 random keys and messages
each (one loaded image, ecc_dispatch called again and again: pkasim.ecc.image), the
published vectors (RFC 7748 for X25519, 1,000 iterations included, RFC 8032 TEST 1-3,
1024 and SHA(abc) for Ed25519, RFC 6979 A.2.5 and NIST CAVP for P-256: KAS ECC CDH COUNT
0-4, the 75 P-256 SigVer vectors), each bad input the RFCs and SEC 1 reject, the
software build (the same C, no PKA) on fewer keys, the strict PKA, constant time (the
same cycles for every key here; `pkasim ct-check` in tests/test_ecc_ct.py) and the
issue's cycle targets on the default chip (modeled: no wall clock).
"""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, x25519
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, decode_dss_signature, encode_dss_signature

from pkasim.chip.config import load_config
from pkasim.ecc.image import ERR_ENCODING, ERR_INFINITY, ERR_KEY, ERR_POINT, ERR_RANGE, ERR_SIGNATURE, ERR_ZERO, EccImage, Op

N = 100  # random keys and messages per operation on the PKA image
N_SOFT = 3  # ... on the software image (each operation is 20-40 M cycles there)
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
P256_P = 2**256 - 2**224 + 2**192 + 2**96 - 1
F25519_P = 2**255 - 19
ED_L = 2**252 + 27742317777372353535851937790883648493
RAW = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)
X962 = (serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
# The issue's targets (modeled cycles of one operation on the default chip).
TARGETS = {Op.X25519: 1_000_000, Op.P256_SIGN: 1_500_000, Op.ED25519_SIGN: 1_500_000}


@pytest.fixture(scope="module")
def pka(config, elf) -> EccImage:
    return EccImage(config, elf("ecc"))


@pytest.fixture(scope="module")
def soft(config, elf) -> EccImage:
    return EccImage(config, elf("ecc_soft"))


@pytest.fixture(scope="module")
def strict(repo, elf) -> EccImage:
    return EccImage(load_config(repo / "configs" / "ciu98320b-strict.yaml"), elf("ecc"))


def p256_key(rng: random.Random) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(rng.randrange(1, P256_N), ec.SECP256R1())


def d_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_numbers().private_value.to_bytes(32, "big")


def rs(der: bytes) -> bytes:
    r, s = decode_dss_signature(der)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def rfc6979(key: ec.EllipticCurvePrivateKey, digest: bytes) -> bytes:
    return rs(key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256()), deterministic_signing=True)))


# --------------------------------------------------------------------------- the default build

def test_the_demo_run_signs_rfc8032_test1_and_exits_0(repo, elf):
    out = subprocess.run([sys.executable, "-m", "pkasim", "run", str(elf("ecc")), "-q"], capture_output=True,
                         text=True, cwd=repo)
    assert out.returncode == 0, out.stderr
    assert "ecc ed25519-sign (PKA): OK" in out.stdout


def test_generated_constants_header_is_up_to_date(repo):
    gen = subprocess.run([sys.executable, str(repo / "firmware" / "tools" / "gen_ecc_consts.py")],
                         capture_output=True, text=True, check=True)
    assert gen.stdout == (repo / "firmware" / "src" / "ecc_consts.h").read_text()


# --------------------------------------------------------------------------- P-256 against cryptography

def test_p256_public_keys_equal_cryptography_for_100_random_keys(pka):
    rng = random.Random(1)
    cycles = set()
    for _ in range(N):
        key = p256_key(rng)
        r = pka.run(Op.P256_PUBLIC, key=d_bytes(key))
        assert r.ok and r.out == key.public_key().public_bytes(*X962), r.reason
        cycles.add(r.cycles)
    assert len(cycles) == 1  # constant time: one cycle count for every key


def test_p256_signatures_equal_cryptography_rfc6979_for_100_random_keys_and_messages(pka):
    rng = random.Random(2)
    cycles = set()
    for _ in range(N):
        key = p256_key(rng)
        digest = hashlib.sha256(rng.randbytes(rng.randrange(0, 200))).digest()
        r = pka.run(Op.P256_SIGN, key=d_bytes(key), msg=digest)
        assert r.ok and r.out == rfc6979(key, digest), r.reason
        cycles.add(r.cycles)
    assert len(cycles) == 1


def test_p256_verify_accepts_100_cryptography_signatures_and_rejects_each_altered(pka):
    rng = random.Random(3)
    for i in range(N):
        key = p256_key(rng)
        msg = rng.randbytes(rng.randrange(0, 200))
        sig = rs(key.sign(msg, ec.ECDSA(hashes.SHA256())))  # random nonces
        pub, digest = key.public_key().public_bytes(*X962), hashlib.sha256(msg).digest()
        assert pka.run(Op.P256_VERIFY, peer=pub, msg=digest, sig=sig).ok
        if i % 10 == 0:
            bad = bytearray(digest)
            bad[rng.randrange(32)] ^= 1 << rng.randrange(8)
            assert pka.run(Op.P256_VERIFY, peer=pub, msg=bytes(bad), sig=sig).status == ERR_SIGNATURE


def test_p256_verify_accepts_hashes_at_or_above_n(pka):
    """e = the hash as a number may exceed n (SEC 1 4.1.4 reduces it)."""
    key = p256_key(random.Random(4))
    digest = b"\xff" * 32
    sig = rs(key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256()))))
    assert pka.run(Op.P256_VERIFY, peer=key.public_key().public_bytes(*X962), msg=digest, sig=sig).ok
    assert pka.run(Op.P256_SIGN, key=d_bytes(key), msg=digest).out == rfc6979(key, digest)


def test_p256_ecdh_equals_cryptography_for_100_random_key_pairs(pka):
    rng = random.Random(5)
    cycles = set()
    for _ in range(N):
        a, b = p256_key(rng), p256_key(rng)
        r = pka.run(Op.P256_ECDH, key=d_bytes(a), peer=b.public_key().public_bytes(*X962))
        assert r.ok and r.out == a.exchange(ec.ECDH(), b.public_key()), r.reason
        cycles.add(r.cycles)
    assert len(cycles) == 1


# --------------------------------------------------------------------------- Curve25519 against cryptography

def test_x25519_equals_cryptography_for_100_random_key_pairs(pka):
    rng = random.Random(6)
    cycles = set()
    for _ in range(N):
        a = x25519.X25519PrivateKey.from_private_bytes(rng.randbytes(32))
        b = x25519.X25519PrivateKey.from_private_bytes(rng.randbytes(32))
        r = pka.run(Op.X25519, key=a.private_bytes_raw(), peer=b.public_key().public_bytes(*RAW))
        assert r.ok and r.out == a.exchange(b.public_key()), r.reason
        cycles.add(r.cycles)
    assert len(cycles) == 1


def test_ed25519_public_keys_and_signatures_equal_cryptography_for_100_random_keys(pka):
    rng = random.Random(7)
    sign_cycles = {}
    for i in range(N):
        seed = rng.randbytes(32)
        key = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
        msg = rng.randbytes(i * 7 % 300)
        r = pka.run(Op.ED25519_PUBLIC, key=seed)
        assert r.ok and r.out == key.public_key().public_bytes(*RAW)
        r = pka.run(Op.ED25519_SIGN, key=seed, msg=msg)
        assert r.ok and r.out == key.sign(msg), r.reason
        sign_cycles.setdefault(len(msg), set()).add(r.cycles)
    assert all(len(c) == 1 for c in sign_cycles.values())  # the message length alone sets the time


def test_ed25519_verify_accepts_100_cryptography_signatures_and_rejects_each_altered(pka):
    rng = random.Random(8)
    for i in range(N):
        key = ed25519.Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
        msg = rng.randbytes(rng.randrange(0, 300))
        pub, sig = key.public_key().public_bytes(*RAW), key.sign(msg)
        assert pka.run(Op.ED25519_VERIFY, peer=pub, msg=msg, sig=sig).ok
        if i % 10 == 0:
            bad = bytearray(sig)
            bad[rng.randrange(64)] ^= 1 << rng.randrange(8)
            status = pka.run(Op.ED25519_VERIFY, peer=pub, msg=msg, sig=bytes(bad)).status
            assert status in (ERR_SIGNATURE, ERR_RANGE)


# --------------------------------------------------------------------------- published vectors

RFC7748 = [  # section 5.2 (scalar, u, output) and section 6.1 (Alice's key, Bob's public key, shared secret)
    ("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
     "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
     "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"),
    ("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
     "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
     "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"),
    ("0900000000000000000000000000000000000000000000000000000000000000",  # one iteration
     "0900000000000000000000000000000000000000000000000000000000000000",
     "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079"),
    ("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
     "0900000000000000000000000000000000000000000000000000000000000000",
     "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"),
    ("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
     "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
     "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"),
]

RFC8032 = [  # section 7.1, TEST 1, 2, 3: (secret key, public key, message, signature)
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
]

# RFC 6979 A.2.5: P-256 key, its public point, and the SHA-256 signatures of "sample" and "test".
RFC6979_D = "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721"
RFC6979_Q = ("0460fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6"
             "7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299")
RFC6979_SIGS = {
    b"sample": "efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716"
               "f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8",
    b"test": "f1abb023518351cd71d881567b1ea663ed3efcf6c5132b354f28d3b0b7d38367"
             "019f4113742a2b14bd25926b49c649155f267e60d3814b4c0cc84250e46f0083",
}

# NIST CAVP, KAS ECC CDH primitive (SP 800-56A), P-256 COUNT = 0.
CAVP_CDH = {
    "QCAVS": "04700c48f77f56584c5cc632ca65640db91b6bacce3a4df6b42ce7cc838833d287"
             "db71e509e3fd9b060ddb20ba5c51dcc5948d46fbf640dfe0441782cab85fa4ac",
    "dIUT": "7d7dc5f71eb29ddaf80d6214632eeae03d9058af1fb6d22ed80badb62bc1a534",
    "QIUT": "04ead218590119e8876b29146ff89ca61770c4edbbf97d38ce385ed281d8a6b230"
            "28af61281fd35e2fa7002523acc85a429cb06ee6648325389f59edfce1405141",
    "ZIUT": "46fc62106420ff012e54a434fbdd2d25ccc5852060561e68040dd7778997bd7b",
}

# The same file, COUNT 1 to 4: (dIUT, QCAVSx, QCAVSy, ZIUT).
CAVP_CDH_MORE = [
    ("38f65d6dce47676044d58ce5139582d568f64bb16098d179dbab07741dd5caf5",
     "809f04289c64348c01515eb03d5ce7ac1a8cb9498f5caa50197e58d43a86a7ae",
     "b29d84e811197f25eba8f5194092cb6ff440e26d4421011372461f579271cda3",
     "057d636096cb80b67a8c038c890e887d1adfa4195e9b3ce241c8a778c59cda67"),
    ("1accfaf1b97712b85a6f54b148985a1bdc4c9bec0bd258cad4b3d603f49f32c8",
     "a2339c12d4a03c33546de533268b4ad667debf458b464d77443636440ee7fec3",
     "ef48a3ab26e20220bcda2c1851076839dae88eae962869a497bf73cb66faf536",
     "2d457b78b4614132477618a5b077965ec90730a8c81a1c75d6d4ec68005d67ec"),
    ("207c43a79bfee03db6f4b944f53d2fb76cc49ef1c9c4d34d51b6c65c4db6932d",
     "df3989b9fa55495719b3cf46dccd28b5153f7808191dd518eff0c3cff2b705ed",
     "422294ff46003429d739a33206c8752552c8ba54a270defc06e221e0feaf6ac4",
     "96441259534b80f6aee3d287a6bb17b5094dd4277d9e294f8fe73e48bf2a0024"),
    ("59137e38152350b195c9718d39673d519838055ad908dd4757152fd8255c09bf",
     "41192d2813e79561e6a1d6f53c8bc1a433a199c835e141b05a74a97b0faeb922",
     "1af98cc45e98a7e041b01cf35f462b7562281351c8ebf3ffa02e33a0722a1328",
     "19d44c8d63e8e8dd12c22a87b8cd4ece27acdde04dbf47f7f27537a6999a8e62"),
]

# NIST CAVP ECDSA SigVer (FIPS 186-4), the five [P-256,SHA-*] sections: tests/data/p256_sigver.rsp.
SIGVER = Path(__file__).resolve().parent / "data" / "p256_sigver.rsp"


def sigver_vectors() -> dict[str, list[dict[str, str]]]:
    """The .rsp file's vectors by hash name (Msg, Qx, Qy, R, S, Result)."""
    sections: dict[str, list[dict[str, str]]] = {}
    current: list[dict[str, str]] = []
    for line in SIGVER.read_text().splitlines():
        if line.startswith("[P-256,"):
            current = sections.setdefault(line[7:-1], [])
        elif " = " in line:
            key, value = line.split(" = ", 1)
            if key == "Msg":
                current.append({})
            current[-1][key] = value
    return sections


# NIST's worked example "ECDSA with P-256 and SHA-256" (CSRC examples, P256_SHA256.pdf):
# message "Example of ECDSA with P-256", a fixed K, so the signature checks verification.
NIST_EXAMPLE = {
    "D": "c477f9f65c22cce20657faa5b2d1d8122336f851a508a1ed04e479c34985bf96",
    "Q": "04b7e08afdfe94bad3f1dc8c734798ba1c62b3a0ad1e9ea2a38201cd0889bc7a19"
         "3603f747959dbf7a4bb226e41928729063adc7ae43529e61b563bbc606cc5e09",
    "H": "a41a41a12a799548211c410c65d8133afde34d28bdd542e4b680cf2899c8a8c4",
    "RS": "2b42f576d07f4165ff65d1f3b1500f81e44c316f1f0b3ef57325b69aca46104f"
          "dc42c2122d6392cd3e3a993a89502a8198c1886fe69d262c4b329bdb6b63faf1",
}


@pytest.mark.parametrize("k, u, out", RFC7748)
def test_x25519_gives_the_rfc7748_vectors(pka, k, u, out):
    r = pka.run(Op.X25519, key=bytes.fromhex(k), peer=bytes.fromhex(u))
    assert r.ok and r.out.hex() == out


def test_x25519_gives_the_rfc7748_vector_after_1000_iterations(pka):
    """RFC 7748 5.2: k = u = 9, then k, u = X25519(k, u), k; after 1,000 iterations."""
    k = u = bytes([9]) + bytes(31)
    for _ in range(1000):
        r = pka.run(Op.X25519, key=k, peer=u)
        assert r.ok
        k, u = r.out, k
    assert k.hex() == "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51"


def rfc8032_more() -> list[tuple[str, str, str, str]]:
    """RFC 8032 7.1's TEST 1024 (a 1023-byte message, tests/data) and TEST SHA(abc)."""
    fields = dict(line.split(": ", 1) for line in (Path(__file__).resolve().parent / "data" /
                  "rfc8032_test1024.txt").read_text().splitlines() if ": " in line and not line.startswith("#"))
    return [(fields["SECRET KEY"], fields["PUBLIC KEY"], fields["MESSAGE"], fields["SIGNATURE"]),
            ("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
             "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf", hashlib.sha512(b"abc").hexdigest(),
             "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589"
             "09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704")]


@pytest.mark.parametrize("seed, pub, msg, sig", RFC8032 + rfc8032_more(),
                         ids=["test1", "test2", "test3", "test1024", "test_sha_abc"])
def test_ed25519_gives_the_rfc8032_vectors(pka, seed, pub, msg, sig):
    key = ed25519.Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed))
    assert key.sign(bytes.fromhex(msg)).hex() == sig  # the vector as transcribed is `cryptography`'s too
    assert pka.run(Op.ED25519_PUBLIC, key=bytes.fromhex(seed)).out.hex() == pub
    assert pka.run(Op.ED25519_SIGN, key=bytes.fromhex(seed), msg=bytes.fromhex(msg)).out.hex() == sig
    assert pka.run(Op.ED25519_VERIFY, peer=bytes.fromhex(pub), msg=bytes.fromhex(msg), sig=bytes.fromhex(sig)).ok


@pytest.mark.parametrize("msg", sorted(RFC6979_SIGS))
def test_p256_gives_the_rfc6979_vectors(pka, msg):
    digest = hashlib.sha256(msg).digest()
    assert pka.run(Op.P256_PUBLIC, key=bytes.fromhex(RFC6979_D)).out.hex() == RFC6979_Q
    assert pka.run(Op.P256_SIGN, key=bytes.fromhex(RFC6979_D), msg=digest).out.hex() == RFC6979_SIGS[msg]
    assert pka.run(Op.P256_VERIFY, peer=bytes.fromhex(RFC6979_Q), msg=digest, sig=bytes.fromhex(RFC6979_SIGS[msg])).ok


def test_p256_ecdh_gives_the_nist_cavp_vector(pka):
    d = bytes.fromhex(CAVP_CDH["dIUT"])
    assert pka.run(Op.P256_PUBLIC, key=d).out.hex() == CAVP_CDH["QIUT"]
    assert pka.run(Op.P256_ECDH, key=d, peer=bytes.fromhex(CAVP_CDH["QCAVS"])).out.hex() == CAVP_CDH["ZIUT"]


@pytest.mark.parametrize("d, qx, qy, z", CAVP_CDH_MORE, ids=[f"count{i}" for i in range(1, 5)])
def test_p256_ecdh_gives_more_nist_cavp_vectors(pka, d, qx, qy, z):
    key = ec.derive_private_key(int(d, 16), ec.SECP256R1())
    peer = bytes.fromhex("04" + qx + qy)
    assert key.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), peer)).hex() == z
    assert pka.run(Op.P256_PUBLIC, key=bytes.fromhex(d)).out == key.public_key().public_bytes(*X962)
    assert pka.run(Op.P256_ECDH, key=bytes.fromhex(d), peer=peer).out.hex() == z


@pytest.mark.parametrize("hash_name", ["SHA-1", "SHA-224", "SHA-256", "SHA-384", "SHA-512"])
def test_p256_verify_gives_the_nist_cavp_sigver_results(pka, hash_name):
    """15 vectors, 3 valid and 12 with the message, R, S or Q altered: the firmware's
    verdict is NIST's (and `cryptography`'s). The firmware takes the hash's leftmost 256
    bits, a shorter hash as a number (FIPS 186-4 6.4)."""
    algorithm = getattr(hashes, hash_name.replace("-", ""))()
    vectors = sigver_vectors()[hash_name]
    assert len(vectors) == 15
    for v in vectors:
        digest = hashlib.new(hash_name.replace("-", "").lower(), bytes.fromhex(v["Msg"])).digest()
        point = bytes.fromhex("04" + v["Qx"] + v["Qy"])
        r, s = int(v["R"], 16), int(v["S"], 16)
        try:
            ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point).verify(
                encode_dss_signature(r, s), digest, ec.ECDSA(Prehashed(algorithm)))
            theirs = "P"
        except (InvalidSignature, ValueError):
            theirs = "F"
        assert theirs == v["Result"][0]
        status = pka.run(Op.P256_VERIFY, peer=point, msg=digest[:32].rjust(32, b"\0"),
                         sig=r.to_bytes(32, "big") + s.to_bytes(32, "big")).status
        assert (status == 0) == (v["Result"] == "P"), v
        assert status in (0, ERR_SIGNATURE, ERR_POINT), v


def test_p256_verifies_nists_worked_example(pka):
    assert pka.run(Op.P256_PUBLIC, key=bytes.fromhex(NIST_EXAMPLE["D"])).out.hex() == NIST_EXAMPLE["Q"]
    assert pka.run(Op.P256_VERIFY, peer=bytes.fromhex(NIST_EXAMPLE["Q"]), msg=bytes.fromhex(NIST_EXAMPLE["H"]),
                   sig=bytes.fromhex(NIST_EXAMPLE["RS"])).ok
    assert hashlib.sha256(b"Example of ECDSA with P-256").hexdigest() == NIST_EXAMPLE["H"]


# --------------------------------------------------------------------------- bad inputs

def _p256_fixture():
    key = p256_key(random.Random(9))
    digest = hashlib.sha256(b"bad inputs").digest()
    return key, key.public_key().public_bytes(*X962), digest, rfc6979(key, digest)


def test_p256_rejects_a_public_point_not_on_the_curve(pka):
    key, pub, digest, sig = _p256_fixture()
    off = bytearray(pub)
    off[64] ^= 1  # y + 1 or y - 1: no longer on the curve
    assert pka.run(Op.P256_VERIFY, peer=bytes(off), msg=digest, sig=sig).status == ERR_POINT
    assert pka.run(Op.P256_ECDH, key=d_bytes(key), peer=bytes(off)).status == ERR_POINT


def test_p256_rejects_coordinates_at_or_above_p_and_other_encodings(pka):
    key, pub, digest, sig = _p256_fixture()
    x = int.from_bytes(pub[1:33], "big")
    above = b"\x04" + (x + P256_P).to_bytes(33, "big")[1:] if x + P256_P < 2**256 else None
    y_big = b"\x04" + pub[1:33] + (int.from_bytes(pub[33:], "big") + P256_P).to_bytes(32, "big") \
        if int.from_bytes(pub[33:], "big") + P256_P < 2**256 else b"\x04" + pub[1:33] + P256_P.to_bytes(32, "big")
    for bad in [b for b in (above, y_big) if b is not None]:
        assert pka.run(Op.P256_VERIFY, peer=bad, msg=digest, sig=sig).status == ERR_POINT
    compressed = key.public_key().public_bytes(serialization.Encoding.X962,
                                               serialization.PublicFormat.CompressedPoint)
    assert pka.run(Op.P256_ECDH, key=d_bytes(key), peer=compressed).status == ERR_POINT


def test_p256_rejects_the_point_at_infinity(pka):
    key, _, digest, sig = _p256_fixture()
    assert pka.run(Op.P256_VERIFY, peer=b"\x00", msg=digest, sig=sig).status == ERR_INFINITY
    assert pka.run(Op.P256_ECDH, key=d_bytes(key), peer=b"\x00").status == ERR_INFINITY
    # (0, 0) as an uncompressed point is not on the curve either
    assert pka.run(Op.P256_ECDH, key=d_bytes(key), peer=b"\x04" + bytes(64)).status == ERR_POINT


@pytest.mark.parametrize("r, s", [(0, 1), (1, 0), (P256_N, 1), (1, P256_N), (2**256 - 1, 1)])
def test_p256_verify_rejects_r_or_s_outside_1_to_n_minus_1(pka, r, s):
    _, pub, digest, _ = _p256_fixture()
    sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    assert pka.run(Op.P256_VERIFY, peer=pub, msg=digest, sig=sig).status == ERR_RANGE


@pytest.mark.parametrize("d", [0, P256_N, 2**256 - 1])
def test_p256_refuses_private_keys_outside_1_to_n_minus_1(pka, d):
    _, pub, digest, _ = _p256_fixture()
    key = d.to_bytes(32, "big")
    for op, kw in ((Op.P256_PUBLIC, {}), (Op.P256_SIGN, {"msg": digest}), (Op.P256_ECDH, {"peer": pub})):
        assert pka.run(op, key=key, **kw).status == ERR_KEY


def test_p256_accepts_the_edge_keys_1_and_n_minus_1(pka):
    for d in (1, P256_N - 1):
        key = ec.derive_private_key(d, ec.SECP256R1())
        assert pka.run(Op.P256_PUBLIC, key=d.to_bytes(32, "big")).out == key.public_key().public_bytes(*X962)


@pytest.mark.parametrize("u", [0, 1, F25519_P, F25519_P + 1])
def test_x25519_rejects_an_all_zero_result(pka, u):
    """u = 0 and 1 (and p, p + 1, their non-canonical forms) are of small order: every
    scalar gives 0, which RFC 7748 section 6.1 says to reject."""
    k = random.Random(10).randbytes(32)
    assert pka.run(Op.X25519, key=k, peer=u.to_bytes(32, "little")).status == ERR_ZERO


def test_x25519_masks_the_top_bit_and_reduces_a_noncanonical_u(pka):
    """RFC 7748 section 5: the top bit of u is ignored, and u in [p, 2^255) is taken mod p."""
    rng = random.Random(11)
    a = x25519.X25519PrivateKey.from_private_bytes(rng.randbytes(32))
    u = int.from_bytes(x25519.X25519PrivateKey.from_private_bytes(rng.randbytes(32)).public_key()
                       .public_bytes(*RAW), "little")
    ref = pka.run(Op.X25519, key=a.private_bytes_raw(), peer=u.to_bytes(32, "little")).out
    assert pka.run(Op.X25519, key=a.private_bytes_raw(), peer=(u | 1 << 255).to_bytes(32, "little")).out == ref
    two = pka.run(Op.X25519, key=a.private_bytes_raw(), peer=(2).to_bytes(32, "little")).out
    assert pka.run(Op.X25519, key=a.private_bytes_raw(), peer=(F25519_P + 2).to_bytes(32, "little")).out == two


def _ed_fixture():
    key = ed25519.Ed25519PrivateKey.from_private_bytes(random.Random(12).randbytes(32))
    msg = b"bad inputs"
    return key.public_key().public_bytes(*RAW), msg, key.sign(msg)


def test_ed25519_rejects_a_noncanonical_public_key_encoding(pka):
    """RFC 8032 5.1.3: y >= p fails to decode (here y = p + 1, the non-canonical 1), and
    x = 0 with the sign bit set (the identity's other encoding)."""
    _, msg, sig = _ed_fixture()
    noncanonical = (F25519_P + 1).to_bytes(32, "little")
    assert pka.run(Op.ED25519_VERIFY, peer=noncanonical, msg=msg, sig=sig).status == ERR_ENCODING
    minus_zero = (1 | 1 << 255).to_bytes(32, "little")
    assert pka.run(Op.ED25519_VERIFY, peer=minus_zero, msg=msg, sig=sig).status == ERR_ENCODING


def test_ed25519_rejects_a_public_key_that_is_not_a_point(pka):
    _, msg, sig = _ed_fixture()
    y = 2  # (y^2 - 1) / (d y^2 + 1) has no square root mod p for y = 2
    assert pka.run(Op.ED25519_VERIFY, peer=y.to_bytes(32, "little"), msg=msg, sig=sig).status == ERR_POINT


def test_ed25519_rejects_s_at_or_above_l(pka):
    pub, msg, sig = _ed_fixture()
    s = int.from_bytes(sig[32:], "little")
    assert pka.run(Op.ED25519_VERIFY, peer=pub, msg=msg, sig=sig[:32] + (s + ED_L).to_bytes(32, "little")).status \
        == ERR_RANGE


def test_ed25519_rejects_a_noncanonical_r(pka):
    """R is compared as encoded: a non-canonical encoding of the right point fails."""
    pub, msg, sig = _ed_fixture()
    y = int.from_bytes(sig[:32], "little") & (2**255 - 1)
    if y + F25519_P < 2**255:
        bad = ((y + F25519_P) | (int.from_bytes(sig[:32], "little") >> 255) << 255).to_bytes(32, "little")
        assert pka.run(Op.ED25519_VERIFY, peer=pub, msg=msg, sig=bad + sig[32:]).status == ERR_SIGNATURE


# --------------------------------------------------------------------------- the software build, the strict PKA

def test_software_build_gives_the_same_results_without_the_pka(soft):
    rng = random.Random(13)
    for _ in range(N_SOFT):
        pk = p256_key(rng)
        digest = hashlib.sha256(rng.randbytes(40)).digest()
        r = soft.run(Op.P256_SIGN, key=d_bytes(pk), msg=digest)
        assert r.out == rfc6979(pk, digest) and not r.pka_operations
        assert soft.run(Op.P256_VERIFY, peer=pk.public_key().public_bytes(*X962), msg=digest, sig=r.out).ok
        other = p256_key(rng)
        assert soft.run(Op.P256_ECDH, key=d_bytes(pk), peer=other.public_key().public_bytes(*X962)).out == \
            pk.exchange(ec.ECDH(), other.public_key())
        a = x25519.X25519PrivateKey.from_private_bytes(rng.randbytes(32))
        b = x25519.X25519PrivateKey.from_private_bytes(rng.randbytes(32))
        assert soft.run(Op.X25519, key=a.private_bytes_raw(), peer=b.public_key().public_bytes(*RAW)).out == \
            a.exchange(b.public_key())
        e = ed25519.Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
        sig = soft.run(Op.ED25519_SIGN, key=e.private_bytes_raw(), msg=digest).out
        assert sig == e.sign(digest)
        assert soft.run(Op.ED25519_VERIFY, peer=e.public_key().public_bytes(*RAW), msg=digest, sig=sig).ok


def test_every_operation_runs_on_a_pka_with_strict_operands(strict):
    """Every modular operand stays below its modulus: nothing for the strict PKA to refuse."""
    rng = random.Random(14)
    pk, other = p256_key(rng), p256_key(rng)
    digest = hashlib.sha256(b"strict").digest()
    sig = strict.run(Op.P256_SIGN, key=d_bytes(pk), msg=digest)
    assert sig.out == rfc6979(pk, digest)
    assert strict.run(Op.P256_VERIFY, peer=pk.public_key().public_bytes(*X962), msg=digest, sig=sig.out).ok
    assert strict.run(Op.P256_ECDH, key=d_bytes(pk), peer=other.public_key().public_bytes(*X962)).out == \
        pk.exchange(ec.ECDH(), other.public_key())
    u = (F25519_P + 3).to_bytes(32, "little")  # non-canonical: reduced by the CPU before the PKA sees it
    a = x25519.X25519PrivateKey.from_private_bytes(rng.randbytes(32))
    assert strict.run(Op.X25519, key=a.private_bytes_raw(), peer=u).out == \
        a.exchange(x25519.X25519PublicKey.from_public_bytes((3).to_bytes(32, "little")))
    e = ed25519.Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
    esig = strict.run(Op.ED25519_SIGN, key=e.private_bytes_raw(), msg=digest)
    assert esig.out == e.sign(digest)
    assert strict.run(Op.ED25519_VERIFY, peer=e.public_key().public_bytes(*RAW), msg=digest, sig=esig.out).ok
    assert strict.machine.peripherals["pka"].stats()["errors"] == {"OPERRF": 0, "ADDRERRF": 0, "RAMERRF": 0}


# --------------------------------------------------------------------------- the issue's targets (modeled)

@pytest.mark.parametrize("op", sorted(TARGETS))
def test_operation_meets_the_issues_cycle_target_on_the_default_chip(pka, op):
    rng = random.Random(15)
    if op == Op.X25519:
        r = pka.run(op, key=rng.randbytes(32), peer=(9).to_bytes(32, "little"))
    elif op == Op.P256_SIGN:
        r = pka.run(op, key=d_bytes(p256_key(rng)), msg=rng.randbytes(32))
    else:
        r = pka.run(op, key=rng.randbytes(32), msg=rng.randbytes(32))
    assert r.ok and r.cycles < TARGETS[op]


def test_x25519_takes_under_a_third_of_the_published_cortex_m0_software_record(pka):
    """3,229,950 cycles: Pornin's x25519-cm0 (docs/ecc.md)."""
    r = pka.run(Op.X25519, key=bytes(range(32)), peer=(9).to_bytes(32, "little"))
    assert r.cycles < 0.31 * 3_229_950


def test_ed25519_signs_messages_of_every_length_around_the_sha512_padding_edges(pka):
    """SHA-512's 16-byte length field: a last block with 112 to 119 bytes of data needs one
    more block (k hashes 64 + len bytes, r 32 + len: len 48-55 and 80-87 end there)."""
    key = ed25519.Ed25519PrivateKey.from_private_bytes(random.Random(16).randbytes(32))
    for n in [*range(44, 60), *range(76, 92)]:
        msg = bytes(range(n))
        assert pka.run(Op.ED25519_SIGN, key=key.private_bytes_raw(), msg=msg).out == key.sign(msg), n
