"""The wheel as a user gets it (docs/packaging.md): an sdist of the checkout, a wheel
built from the unpacked sdist alone, `twine check`, then a fresh virtual environment in
a temporary folder outside the repository, where the installed pkasim (with only its
declared dependencies, from the package registry) runs a freshly compiled user ELF, a
bench job and a signature with a new key, from an empty working directory."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

import pkasim

REPO = Path(__file__).resolve().parent.parent


def _clean_env() -> dict[str, str]:
    """The environment without anything that would lead Python back to the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def _run(argv: list, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=_clean_env(), capture_output=True, text=True)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory, build_dir) -> dict[str, Path]:
    """The sdist of the checkout and the wheel built from that sdist, unpacked elsewhere
    (build_dir: the firmware images and their manifest are up to date first)."""
    out = tmp_path_factory.mktemp("dist")
    # setuptools adds the files an old pkasim.egg-info/SOURCES.txt lists to a new sdist:
    # start from none, as a fresh clone does (it is a build product, ignored by git).
    shutil.rmtree(REPO / "pkasim.egg-info", ignore_errors=True)
    _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", out, REPO])
    sdist = next(out.glob("pkasim-*.tar.gz"))
    unpacked = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    source = next(unpacked.glob("pkasim-*"))
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", out, source])
    return {"sdist": sdist, "wheel": next(out.glob("pkasim-*.whl"))}


@pytest.fixture(scope="module")
def user(dist, tmp_path_factory) -> dict[str, Path]:
    """A fresh venv with the wheel installed (its dependencies from the registry), and
    an empty working directory; both in a temporary folder outside the repository."""
    root = tmp_path_factory.mktemp("user")
    assert REPO not in root.resolve().parents
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", venv])
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", dist["wheel"]])
    work = root / "work"
    work.mkdir()
    return {"bin": venv / "bin", "work": work, "root": root}


# --------------------------------------------------------------------------- what is built

def test_twine_check_passes_for_the_sdist_and_the_wheel(dist) -> None:
    done = _run([sys.executable, "-m", "twine", "check", "--strict", dist["sdist"], dist["wheel"]])
    assert done.stdout.count("PASSED") == 2


def test_the_wheel_installs_one_import_package_pkasim(dist) -> None:
    names = zipfile.ZipFile(dist["wheel"]).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"pkasim", f"pkasim-{pkasim.__version__}.dist-info"}


def test_the_wheel_carries_the_native_library_the_chips_and_every_bundled_image(dist) -> None:
    wheel = zipfile.ZipFile(dist["wheel"])
    names = set(wheel.namelist())
    assert any(n.startswith("pkasim/native/_cyclehook") and n.endswith(".so") for n in names)
    assert {"pkasim/configs/ciu98320b.yaml", "pkasim/configs/presets/victor-radix16.yaml",
            "pkasim/configs/sweeps/rsa4096-10ops.yaml", "pkasim/firmware/link.ld",
            "pkasim/firmware/template/Makefile", "pkasim/firmware/keys/demo-2048.pem"} <= names
    manifest = json.loads(wheel.read("pkasim/firmware/build/manifest.json"))
    for image, entry in manifest["images"].items():
        assert hashlib.sha256(wheel.read(f"pkasim/firmware/build/{image}")).hexdigest() == entry["sha256"], image


def test_the_sdist_carries_the_firmware_sources_images_and_manifest(dist) -> None:
    with tarfile.open(dist["sdist"]) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"setup.py", "pyproject.toml", "firmware/Makefile", "firmware/tools/manifest.py",
            "firmware/build/manifest.json", "firmware/build/memory.ld", "firmware/build/xrsa.elf",
            "firmware/src/rsa.c", "emulator/native/cyclehook.c", "peripherals/pka_fast.c"} <= names


ENGINE_LIBRARY = REPO / "emulator" / "native" / "_engine" / "libunicorn.so.2"


def _needs_engine() -> None:
    if not ENGINE_LIBRARY.exists():
        pytest.skip("pkasim's engine could not be built on this machine (emulator/native/_engine/engine.json says why)")


def test_the_wheel_carries_pkasims_engine_built_from_the_sdists_patches(dist) -> None:
    _needs_engine()
    from pkasim.native import engine
    wheel = zipfile.ZipFile(dist["wheel"])
    assert "pkasim/native/_engine/libunicorn.so.2" in wheel.namelist()
    manifest = json.loads(wheel.read("pkasim/native/_engine/engine.json"))
    assert "failed" not in manifest and manifest["patchset"] == engine.expected_patchset()


def test_the_sdist_carries_the_engine_patches_and_no_built_library(dist) -> None:
    with tarfile.open(dist["sdist"]) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    patches = {f"engine/patches/{p.name}" for p in (REPO / "engine" / "patches").glob("*.patch")}
    assert patches and patches | {"engine/build.py"} <= names
    assert not any("_engine/" in name for name in names)


def test_the_wheel_and_sdist_declare_the_gpl_and_carry_its_text(dist) -> None:
    wheel = zipfile.ZipFile(dist["wheel"])
    metadata = wheel.read(f"pkasim-{pkasim.__version__}.dist-info/METADATA").decode()
    assert "License-Expression: GPL-2.0-or-later" in metadata.splitlines()
    assert any(n.endswith("licenses/LICENSE") for n in wheel.namelist())
    with tarfile.open(dist["sdist"]) as tar:
        assert any(name.endswith("/LICENSE") for name in tar.getnames())


# --------------------------------------------------------------------------- the installed pkasim

def test_the_installed_pkasim_is_the_one_in_the_new_venv(user) -> None:
    done = _run([user["bin"] / "python", "-c", "import pkasim, pkasim.native; print(pkasim.__file__); "
                 "print(pkasim.native.find_library('_cyclehook'))"], cwd=user["work"])
    module, library = done.stdout.split()
    assert Path(module).is_relative_to(user["root"]) and Path(library).is_relative_to(user["root"])


def test_the_installed_version_names_the_bundled_chip(user) -> None:
    out = _run([user["bin"] / "pkasim", "--version"], cwd=user["work"]).stdout
    assert out.startswith(f"pkasim {pkasim.__version__}\nunicorn ")
    assert "chip ciu98320b: CIU98320B" in out and str(user["root"]) in out


def test_the_installed_pkasim_runs_on_its_engine_from_the_wheel(user) -> None:
    _needs_engine()
    out = _run([user["bin"] / "pkasim", "--version"], cwd=user["work"]).stdout.splitlines()
    assert out[1].startswith("unicorn 2.1.4 (pkasim's engine 2.1.4+pkasim.")


def test_the_installed_pkasim_runs_a_freshly_compiled_user_elf(user) -> None:
    work = user["work"]
    _run([user["bin"] / "pkasim", "init", "proj"], cwd=work)
    # The pinned clang of this checkout's venv; the memory map from the installed pkasim.
    _run(["make", "-s", "-C", "proj", f"CC={sys.executable} -m ziglang cc"], cwd=work)
    done = _run([user["bin"] / "pkasim", "run", "proj/build/app.elf", "--json", "run.json"], cwd=work)
    assert "sum of squares 1..100 = 338350" in done.stdout
    assert json.loads((work / "run.json").read_text())["exit_code"] == 0


def test_the_installed_pkasim_runs_a_bench_job(user) -> None:
    done = _run([user["bin"] / "pkasim", "bench", "--only", "rsa2048-win", "--json", "-"], cwd=user["work"])
    doc = json.loads(done.stdout)
    jobs = [job for config in doc["configs"] for job in config["jobs"]]
    assert [(j["job"], j["verified"]) for j in jobs] == [("rsa2048-win", True)]


def test_the_installed_pkasim_signs_with_a_new_key_on_the_bundled_card(user) -> None:
    work = user["work"]
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (work / "new.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))
    (work / "message.txt").write_bytes(b"signed by an installed pkasim\n")
    _run([user["bin"] / "pkasim", "sign", "--key", "new.pem", "--message", "message.txt", "--out", "sig.bin"], cwd=work)
    key.public_key().verify((work / "sig.bin").read_bytes(), b"signed by an installed pkasim\n", padding.PKCS1v15(),
                            hashes.SHA256())


def test_an_installed_pkasim_without_its_extras_says_which_to_install(user, tmp_path) -> None:
    done = _run([user["bin"] / "pkasim", "sweep", "sweeps/rsa4096-10ops", "--out", tmp_path], cwd=user["work"],
                check=False)
    assert done.returncode == 69
    assert done.stderr.strip() == "pkasim: error: pkasim sweep needs pyarrow, which is not installed: " \
                                  "pip install 'pkasim[sweep]'"
