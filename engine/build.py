"""Build pkasim's engine: Unicorn 2.1.4 from the registry's source distribution, with
the patch series in engine/patches/ applied, ARM only (docs/engine.md).

    python engine/build.py            # what `make` runs (its `engine` target)
    python engine/build.py --force    # build again even if the library is current

The sdist comes through pip (``pip download --no-binary :all: unicorn==2.1.4``) and is
checked against its SHA-256; cmake and ninja come from pip too (pkasim's dev extras),
else from PATH. The result is ``emulator/native/_engine/libunicorn.so.2`` with a manifest
``engine.json`` naming the Unicorn version and the patch set it was built from
(emulator/engine.py loads it and refuses a library whose patch set is not the one in
this checkout). Work files go to ``.venv/pkasim-engine/``.

A build that cannot be done (no network for the sdist, no compiler, a patch that no
longer applies) is not an error: this prints one warning line saying why and exits 0,
and pkasim runs on the stock Unicorn wheel, with the same cycle counts, more slowly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "engine" / "patches"
OUT = ROOT / "emulator" / "native" / "_engine"
LIBRARY = "libunicorn.so.2"
VERSION = "2.1.4"
SDIST = f"unicorn-{VERSION}.tar.gz"
SDIST_SHA256 = "00567a70e323f749b419cd86bee4f9115beab7ebba32194581c090cbb7c59cff"
# The images engine/train.py runs (the profile-guided build needs them).
TRAINING_IMAGES = ("xrsa.elf", "xrsa_opt.elf", "xrsa_win.elf", "xrsa_pair.elf", "rsa_soft.elf",
                   "ecc.elf", "kernels.elf", "compute.elf", "systick.elf")


class BuildFailed(Exception):
    """Why the engine could not be built (one line)."""


def patch_files() -> list[Path]:
    return sorted(PATCHES.glob("*.patch"))


def patchset_id(files: list[Path] | None = None) -> str:
    """The identity of a patch series: the Unicorn version, then a hash of the patch
    files' names and contents (emulator/engine.py computes the same)."""
    h = hashlib.sha256()
    for f in files if files is not None else patch_files():
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return f"{VERSION}+pkasim.{h.hexdigest()[:16]}"


def run(cmd: list[str], log: Path, cwd: Path | None = None, what: str = "") -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise BuildFailed(f"{what or cmd[0]} failed (exit {done.returncode}: {tail[0][:160]}; log {log})")


def tool(name: str) -> str:
    """A build tool: the venv's (pip's cmake and ninja), else PATH's."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise BuildFailed(f"no {name} (pip install {name}, or install it on PATH)")
    return found


def fetch_sdist(work: Path, log: Path) -> Path:
    sdist = work / SDIST
    if not sdist.exists():
        run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-binary", ":all:",
             "--no-deps", f"unicorn=={VERSION}", "-d", str(work)], log, what="pip download of the unicorn sdist")
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        sdist.unlink()
        raise BuildFailed(f"{SDIST} has SHA-256 {digest[:16]}..., not the expected {SDIST_SHA256[:16]}...")
    return sdist


def apply_patches(src: Path, log: Path) -> None:
    for f in patch_files():
        if shutil.which("patch"):
            cmd = ["patch", "-p1", "--forward", "--batch", "-i", str(f)]
        else:
            cmd = ["git", "apply", "-p1", str(f)]
        run(cmd, log, cwd=src, what=f"applying {f.name}")


def compile_unicorn(src: Path, build_dir: Path, flags: str, log: Path) -> None:
    """Configure and build the library in ``build_dir`` with ``flags`` (all of it again
    when the flags changed: cmake's cache tells ninja)."""
    cmake, ninja = tool("cmake"), tool("ninja")
    run([cmake, "-S", str(src), "-B", str(build_dir), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
         "-DCMAKE_BUILD_TYPE=Release", "-DUNICORN_ARCH=arm", "-DUNICORN_BUILD_TESTS=OFF",
         "-DUNICORN_INSTALL=OFF", "-DUNICORN_LEGACY_STATIC_ARCHIVE=OFF", f"-DCMAKE_C_FLAGS={flags}"],
        log, what="cmake")
    jobs = os.environ.get("PKASIM_ENGINE_JOBS", "2")
    run([ninja, "-C", str(build_dir), "-j", jobs, "unicorn"], log, what="ninja (the Unicorn build)")


def pgo_possible() -> str | None:
    """Why the build cannot be profile-guided, or None. It needs GCC 10 or later (for
    -fprofile-partial-training: code the training never ran stays optimised as usual),
    the firmware images the training runs (`make` builds them first), and not
    PKASIM_ENGINE_PGO=0."""
    if os.environ.get("PKASIM_ENGINE_PGO", "1") == "0":
        return "PKASIM_ENGINE_PGO=0"
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return "no C compiler found to ask"
    try:
        done = subprocess.run([cc, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                              check=False, timeout=30)
        banner = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{cc} did not answer ({exc})"
    if "Free Software Foundation" not in banner or "clang" in banner.lower():
        return f"{cc} is not GCC"
    try:
        major = int(done.stdout.strip().split(".")[0])
    except ValueError:
        return f"{cc} gave no version"
    if major < 10:
        return f"GCC {major} (10 or later needed)"
    missing = [n for n in TRAINING_IMAGES if not (ROOT / "firmware" / "build" / n).exists()]
    if missing:
        return f"no firmware images to train on (firmware/build/{missing[0]}; `make firmware` builds them)"
    try:
        found = subprocess.run([sys.executable, "-c", "import pkasim.rsa.bench"], capture_output=True,
                               check=False, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        found = False
    if not found:
        return f"{sys.executable} cannot import pkasim to train with (a wheel built in an isolated environment)"
    return None


def training_run(library: Path, log: Path) -> str | None:
    """Run engine/train.py on the instrumented ``library``; None when it ran through."""
    cmd = [sys.executable, str(ROOT / "engine" / "train.py"), str(library)]
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        env = {**os.environ, "PKASIM_ENGINE": "patched"}
        try:
            done = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True, env=env, check=False,
                                  timeout=900)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"the training run did not run ({exc})"
        out.write(done.stderr)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return f"the training run failed (exit {done.returncode}: {lines[-1][:160] if lines else ''})"
    return None


def build(force: bool = False) -> Path:
    files = patch_files()
    ident = patchset_id(files)
    manifest = OUT / "engine.json"
    if not force and manifest.exists():
        try:
            known = json.loads(manifest.read_text())
        except ValueError:
            known = {}
        if known.get("patchset") == ident and known.get("failed"):
            raise BuildFailed(f"{known['failed']} (as last time; 'make engine' tries again)")
        if known.get("patchset") == ident and (OUT / LIBRARY).exists():
            os.utime(manifest)  # current: make need not ask again
            return OUT / LIBRARY
    work = ROOT / ".venv" / "pkasim-engine"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "build.log"
    log.write_text("")
    sdist = fetch_sdist(work, log)
    tree = work / f"unicorn-{VERSION}"
    shutil.rmtree(tree, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        try:
            tar.extractall(work, filter="data")
        except TypeError:  # a Python without extraction filters: the archive is checked by hash
            tar.extractall(work)
    src = tree / "src"
    apply_patches(src, log)
    build_dir = src / "build"
    flags = f'-DPKASIM_PATCHSET=\\"{ident}\\"'
    profile, pgo = work / "profile", "off"
    why = pgo_possible()
    if why is None:
        # Profile-guided (docs/engine.md): an instrumented build, a training run of pkasim
        # on it, then the build that uses the profile. The profile's file names follow the
        # object files', so both passes build in the same folder.
        shutil.rmtree(profile, ignore_errors=True)  # gcc would add to old counts
        trained = work / "instrumented"
        shutil.rmtree(trained, ignore_errors=True)
        try:
            compile_unicorn(src, build_dir, f"{flags} -fprofile-generate={profile} -fprofile-update=single", log)
            trained.mkdir()
            shutil.copy2(build_dir / LIBRARY, trained / LIBRARY)
        except (BuildFailed, OSError) as exc:
            why = f"the instrumented build failed: {exc}"
        else:
            why = training_run(trained / LIBRARY, log)
        shutil.rmtree(trained, ignore_errors=True)
        if why is None:
            flags += f" -fprofile-use={profile} -fprofile-partial-training -Wno-missing-profile"
            pgo = "trained by engine/train.py"
    if why is not None:
        with log.open("a") as out:
            out.write(f"# built without a profile: {why}\n")
        pgo = f"off ({why})"
    compile_unicorn(src, build_dir, flags, log)
    built = build_dir / LIBRARY
    if not built.exists():
        raise BuildFailed(f"the build made no {LIBRARY}")
    OUT.mkdir(exist_ok=True)
    tmp = OUT / (LIBRARY + ".tmp")
    shutil.copy2(built, tmp)
    tmp.replace(OUT / LIBRARY)
    manifest.write_text(json.dumps({"unicorn": VERSION, "patchset": ident, "pgo": pgo,
                                    "patches": [f.name for f in files]}, indent=1) + "\n")
    shutil.rmtree(tree, ignore_errors=True)  # the sdist stays as a cache
    return OUT / LIBRARY


def _remember_failure(reason: str) -> None:
    """Note the failed build, so that `make` does not try again on every run (the
    loader finds no library and uses the stock wheel); `make engine` retries."""
    try:
        OUT.mkdir(exist_ok=True)
        (OUT / LIBRARY).unlink(missing_ok=True)
        (OUT / "engine.json").write_text(json.dumps({"unicorn": VERSION, "patchset": patchset_id(),
                                                     "failed": reason.split(" (as last time")[0]}, indent=1) + "\n")
    except OSError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="build even if the library matches the patches")
    args = parser.parse_args()
    try:
        path = build(args.force)
    except (BuildFailed, OSError, tarfile.TarError) as exc:
        _remember_failure(str(exc))
        print(f"warning: pkasim's engine was not built ({exc}); pkasim runs on the stock Unicorn wheel "
              "(same cycle counts, slower; docs/engine.md)", file=sys.stderr)
        return 0
    print(f"engine: {path.relative_to(ROOT)} ({patchset_id()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
