"""gdb-multiarch on the bundled images: backtraces, locals and `finish` at a few
breakpoints, with no "(Internal error: pc ... in read in CU, but not in symtab.)".

That warning came from the DWARF the linker keeps for code --gc-sections discarded
(compiler_rt's __udivmoddi4 claimed 0x000-0x5b4, over bn_muladdc_thumb):
firmware/tools/dwarf_dead.py empties those ranges at link time.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from elftools.elf.elffile import ELFFile
from gdbserver_util import Server

GDB = shutil.which("gdb-multiarch")
needs_gdb = pytest.mark.skipif(GDB is None, reason="gdb-multiarch is not installed (.ci/run installs it)")
WARNING = re.compile(r"Internal error|not in symtab|warning:", re.I)


def gdb_session(elf_path, commands: list[str]) -> str:
    server = Server(elf_path)
    try:
        argv = [GDB, "-batch", "-nx", "-ex", "set pagination off", "-ex", "set confirm off",
                "-ex", f"target remote 127.0.0.1:{server.port}"]
        for c in commands:
            argv += ["-ex", c]
        argv += ["-ex", "detach"]
        proc = subprocess.run([*argv, str(elf_path)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=300)
        server.wait()
    finally:
        server.close()
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def soft_session(elf):
    """bn_mla (inlined into bn_mod_wide) calls bn_muladdc_thumb, the assembly the
    bogus compiler_rt range covered."""
    return gdb_session(elf("rsa_soft"), [
        "break bn_mla", "break bn_muladdc_thumb", "continue", "bt", "info locals",
        "continue", "bt", "finish", "finish", "info locals", "bt"])


@pytest.fixture(scope="module")
def xrsa_session(elf):
    """A compiler_rt function (__aeabi_uidiv), then the PKA driver (pka_run inlined
    into pka_exec) and its interrupt."""
    return gdb_session(elf("xrsa"), [
        "break __aeabi_uidiv", "continue", "bt", "info locals", "finish", "bt",
        "break pka_run", "continue", "bt", "info locals", "finish", "bt", "finish"])


def test_dead_code_leaves_no_debug_ranges_at_address_zero(elf):
    """No debugging entry but a CU's base claims [0, size): the vector table is there."""
    for name in ("rsa_soft", "xrsa", "card"):
        with open(elf(name), "rb") as fh:
            dwarf = ELFFile(fh).get_dwarf_info()
            for cu in dwarf.iter_CUs():
                top = cu.get_top_DIE()
                for die in cu.iter_DIEs():
                    low, high = die.attributes.get("DW_AT_low_pc"), die.attributes.get("DW_AT_high_pc")
                    if die is not top and low is not None and low.value == 0 and high is not None:
                        assert high.value == 0, f"{name}: {die.tag} at 0 with length {high.value}"


@needs_gdb
def test_gdb_prints_no_internal_error_on_the_software_rsa(soft_session):
    assert not WARNING.search(soft_session), soft_session


@needs_gdb
def test_gdb_prints_no_internal_error_on_xrsa(xrsa_session):
    assert not WARNING.search(xrsa_session), xrsa_session


@needs_gdb
def test_backtrace_shows_the_inlined_frame_and_reaches_main(soft_session):
    first = soft_session.split("#0  bn_mla", 1)[1]
    assert re.search(r"^#1  bn_mod_wide \(", first, re.M), soft_session  # bn_mla is inlined: no address
    assert re.search(r"^#5  0x[0-9a-f]+ in main \(\) at images/rsa_soft\.c:\d+", first, re.M), soft_session


@needs_gdb
def test_backtrace_from_the_assembly_multiplier_unwinds_to_its_caller(soft_session):
    assert re.search(r"^#0  0x[0-9a-f]+ in bn_muladdc_thumb \(\)\n#1  0x[0-9a-f]+ in bn_mla \(", soft_session,
                     re.M), soft_session


@needs_gdb
def test_finish_leaves_the_assembly_then_the_inlined_function(soft_session):
    after = soft_session.split("in main () at images/rsa_soft.c", 2)[2]  # after the second bt
    assert re.search(r"^0x[0-9a-f]+ in bn_mla \(.*\) at src/bn\.c:\d+\n.*\nbn_mod_wide \(r=.*\) at src/bn\.c:\d+",
                     after, re.M), soft_session


@needs_gdb
def test_info_locals_shows_the_values_dwarf_has(soft_session, xrsa_session):
    assert re.search(r"^i = 0$", soft_session, re.M), soft_session  # bn_mod_wide's loop counter
    assert re.search(r"^n_uword_bits = 32$", xrsa_session, re.M), xrsa_session  # in compiler_rt


@needs_gdb
def test_finish_from_compiler_rt_returns_to_the_c_caller(xrsa_session):
    assert re.search(r"^#1  compiler_rt\.int\.__aeabi_uidiv \(n=48000000, d=1000\)", xrsa_session, re.M), xrsa_session
    assert re.search(r"^stopwatch_start \(\) at src/stopwatch\.c:\d+\n.*\n#0  stopwatch_start \(\)", xrsa_session,
                     re.M), xrsa_session


@needs_gdb
def test_backtrace_in_the_pka_driver_shows_inlined_pka_run(xrsa_session):
    assert re.search(r"^#0  pka_run \(.*\) at src/pka\.c:\d+\n#1  pka_exec \(", xrsa_session, re.M), xrsa_session
