"""ARM semihosting: console, exit codes and stop reasons, errno, files inside the host
directory, command line, stdin, heap and time (docs/semihosting.md)."""

from __future__ import annotations

import errno
import io
import logging
import re
from pathlib import Path

import pytest

from pkasim.core.machine import StopReason
from pkasim.host import semihosting as sh
from pkasim.host.guest_errno import NEWLIB, guest_errno
from pkasim.host.hostfiles import HostDir

SRAM_CODE = 0x20002000


def test_hello_writes_stdout_and_stderr(make_machine, elf):
    m = make_machine()
    m.load(elf("hello"))
    r = m.run(max_cycles=10**6)
    assert m.stdout.getvalue().startswith(b"Hello from pkasim")
    assert b"stderr" in m.stderr.getvalue()
    assert r.reason == StopReason.EXIT and r.exit_code == 0


def test_firmware_exit_code_is_kept(make_machine, elf):
    m = make_machine()
    m.load(elf("fault"))
    m.write_symbol("fault_kind", (99).to_bytes(4, "little"))  # unknown kind: main returns 2
    r = m.run(max_cycles=10**6)
    assert r.exit_code == 2


def run_exit(make_machine, elf, reason_code_bytes: str):
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex(reason_code_bytes))
    m.set_reg("pc", SRAM_CODE)
    return m.run(max_cycles=10**5)


def test_sys_exit_with_application_exit_is_success(make_machine, elf):
    """``movs r0,#0x18`` (2018); r1 = 0x20026: ``movs r1,#2`` (2102), ``lsls r1,r1,#16``
    (0409), ``adds r1,#0x26`` (3126); ``bkpt 0xab`` (beab)."""
    r = run_exit(make_machine, elf, "182002210904263189be"[:16] + "abbe")
    assert r.reason == StopReason.EXIT and r.exit_code == 0


def test_sys_exit_with_another_reason_is_failure(make_machine, elf):
    """As above with ``adds r1,#0x24`` (3124): ADP_Stopped_RunTimeErrorUnknown."""
    r = run_exit(make_machine, elf, "1820022109042431abbe")
    assert r.reason == StopReason.EXIT and r.exit_code == 1


def test_semihosting_call_costs_one_bkpt_cycle(make_machine, elf):
    r = run_exit(make_machine, elf, "1820022109042631abbe")
    assert r.cycles == 5 and r.instructions == 5  # four 1-cycle ALU ops and the BKPT


# --------------------------------------------------------------------------- one call at a time
# A two-instruction stub in SRAM (``bkpt 0xab; b .``) makes one semihosting call with
# r0 = the call and r1 = a parameter block at BLOCK, then stops before the loop.

BLOCK = 0x20003000
BUF = 0x20003100
UNMAPPED = 0x10000000  # between flash and SRAM on the default chip
STUB = bytes.fromhex("abbefee7")


@pytest.fixture
def m(make_machine, elf):
    machine = make_machine()
    machine.load(elf("bench"))
    machine.write_memory(SRAM_CODE, STUB)
    yield machine
    machine.semihosting.close_files()


def call(m, op: int, *words: int, r1: int | None = None) -> int:
    """Make semihosting call ``op`` with ``words`` as its parameter block; r0 as signed."""
    for i, word in enumerate(words):
        m.write_u32(BLOCK + 4 * i, word)
    m.set_reg("r0", op)
    m.set_reg("r1", BLOCK if r1 is None else r1)
    m.set_reg("pc", SRAM_CODE)
    r = m.run(max_cycles=1000, until=SRAM_CODE + 2)
    assert r.reason == StopReason.UNTIL, r.message
    value = m.reg("r0")
    return value - (1 << 32) if value & 0x80000000 else value


def put(m, addr: int, text: bytes) -> tuple[int, int]:
    """``text`` NUL-terminated at ``addr``; (address, length) as SYS_OPEN takes them."""
    m.write_memory(addr, text + b"\0")
    return addr, len(text)


def open_(m, name: bytes, mode: int = 0) -> int:
    ptr, length = put(m, BUF, name)
    return call(m, sh.SYS_OPEN, ptr, mode, length)


def errno_(m) -> int:
    return call(m, sh.SYS_ERRNO)


@pytest.fixture
def host_dir(m, tmp_path):
    m.semihosting.host_dir = HostDir(tmp_path)
    return tmp_path


def test_features_file_offers_exit_extended_and_stdout_stderr(m):
    handle = open_(m, b":semihosting-features")
    assert handle >= 3
    assert call(m, sh.SYS_FLEN, handle) == 5
    assert call(m, sh.SYS_READ, handle, BUF, 8) == 3  # 5 of 8 bytes read
    assert m.read_memory(BUF, 5) == b"SHFB\x03"
    assert call(m, sh.SYS_CLOSE, handle) == 0


def test_features_file_opens_for_reading_only(m):
    assert open_(m, b":semihosting-features", mode=4) == -1
    assert errno_(m) == NEWLIB["EACCES"]


def test_console_opens_with_nonzero_handles_by_mode_stdin_stdout_stderr(make_machine, elf):
    """The specification: SYS_OPEN returns "a nonzero handle"; QEMU gives each :tt
    open a new one. Read mode is stdin, write stdout, append stderr."""
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, STUB)
    m.semihosting.stdin = io.BytesIO(b"in")
    handles = [open_(m, b":tt", mode) for mode in (0, 4, 8)]
    assert 0 not in handles and -1 not in handles and len(set(handles)) == 3
    tin, tout, terr = handles
    m.write_memory(BUF + 0x80, b"out\nerr\n")
    assert call(m, sh.SYS_WRITE, tout, BUF + 0x80, 4) == 0
    assert call(m, sh.SYS_WRITE, terr, BUF + 0x84, 4) == 0
    assert m.stdout.getvalue() == b"out\n" and m.stderr.getvalue() == b"err\n"
    assert call(m, sh.SYS_READ, tin, BUF + 0x90, 2) == 0 and m.read_memory(BUF + 0x90, 2) == b"in"
    assert [call(m, sh.SYS_ISTTY, h) for h in handles] == [1, 1, 1]
    assert call(m, sh.SYS_WRITE, tin, BUF + 0x80, 4) == -1 and errno_(m) == NEWLIB["EBADF"]
    assert call(m, sh.SYS_FLEN, tout) == -1 and errno_(m) == NEWLIB["EINVAL"]
    assert [call(m, sh.SYS_CLOSE, h) for h in handles] == [0, 0, 0]
    assert call(m, sh.SYS_WRITE, tout, BUF + 0x80, 4) == -1 and errno_(m) == NEWLIB["EBADF"]


def test_write_goes_to_the_console_stream_of_its_handle(m):
    m.write_memory(BUF, b"out\nerr\n")
    assert call(m, sh.SYS_WRITE, 1, BUF, 4) == 0
    assert call(m, sh.SYS_WRITE, 2, BUF + 4, 4) == 0
    assert m.stdout.getvalue() == b"out\n" and m.stderr.getvalue() == b"err\n"


def test_istty_is_1_for_the_console_0_for_files_and_minus_1_for_unknown_handles(m, host_dir):
    (host_dir / "f").write_bytes(b"x")
    handle = open_(m, b"f")
    assert [call(m, sh.SYS_ISTTY, h) for h in (0, 1, 2, handle)] == [1, 1, 1, 0]
    assert call(m, sh.SYS_ISTTY, 77) == -1
    assert errno_(m) == NEWLIB["EBADF"]


def test_errno_is_the_c_library_number_not_the_hosts(m, host_dir):
    assert open_(m, b"missing.txt") == -1
    assert errno_(m) == NEWLIB["ENOENT"] == 2
    (host_dir / "full").mkdir()
    (host_dir / "full" / "f").write_bytes(b"")
    put(m, BUF, b"full")
    put(m, BUF + 0x40, b"empty")
    (host_dir / "empty").mkdir()
    assert call(m, sh.SYS_RENAME, BUF + 0x40, 5, BUF, 4) == -1  # rename a directory onto a non-empty one
    assert errno_(m) == NEWLIB["ENOTEMPTY"] == 90  # Linux says 39


def test_errno_keeps_its_value_across_successful_calls(m):
    assert call(m, sh.SYS_ISTTY, 77) == -1
    assert call(m, sh.SYS_ISTTY, 1) == 1
    assert errno_(m) == NEWLIB["EBADF"]


def test_iserror_tells_negative_status_words(m):
    assert call(m, sh.SYS_ISERROR, 0xFFFFFFFF) == 1
    assert call(m, sh.SYS_ISERROR, 0) == 0
    assert call(m, sh.SYS_ISERROR, 5) == 0


def test_write_of_4_gib_is_refused_without_touching_the_host(m):
    assert call(m, sh.SYS_WRITE, 1, BUF, 0xFFFFFFFF) == -1
    assert errno_(m) == NEWLIB["EFAULT"]
    assert m.stdout.getvalue() == b""


def test_read_of_4_gib_is_refused(m, host_dir):
    (host_dir / "f").write_bytes(b"data")
    assert call(m, sh.SYS_READ, open_(m, b"f"), BUF, 0xFFFFFFFF) == -1
    assert errno_(m) == NEWLIB["EFAULT"]


@pytest.mark.parametrize("ptr,why", [(UNMAPPED, "unmapped"), (0x20003FF0, "runs past the end of SRAM")])
def test_write_from_a_buffer_outside_memory_is_refused(m, ptr, why):
    assert call(m, sh.SYS_WRITE, 1, ptr, 0x20) == -1, why
    assert errno_(m) == NEWLIB["EFAULT"]


def test_read_into_flash_is_refused(m, host_dir):
    (host_dir / "f").write_bytes(b"data")
    assert call(m, sh.SYS_READ, open_(m, b"f"), 0x100, 4) == -1
    assert errno_(m) == NEWLIB["EFAULT"]


def test_parameter_block_in_unmapped_memory_fails_the_call(m):
    assert call(m, sh.SYS_WRITE, r1=UNMAPPED) == -1
    assert errno_(m) == NEWLIB["EFAULT"]


def test_large_write_from_flash_reaches_the_file_in_full(m, host_dir):
    size = 200 * 1024  # more than one 64 KiB piece
    handle = open_(m, b"flash.bin", mode=4)
    assert call(m, sh.SYS_WRITE, handle, 0, size) == 0
    assert call(m, sh.SYS_CLOSE, handle) == 0
    assert (host_dir / "flash.bin").read_bytes() == m.read_memory(0, size)


def test_read_past_the_end_returns_the_bytes_not_read(m, host_dir):
    (host_dir / "f").write_bytes(b"0123456789")
    handle = open_(m, b"f")
    assert call(m, sh.SYS_READ, handle, BUF, 64) == 54
    assert m.read_memory(BUF, 10) == b"0123456789"
    assert call(m, sh.SYS_READ, handle, BUF, 64) == 64  # at the end: nothing read


def test_seek_and_flen_on_a_host_file(m, host_dir):
    (host_dir / "f").write_bytes(b"0123456789")
    handle = open_(m, b"f")
    assert call(m, sh.SYS_FLEN, handle) == 10
    assert call(m, sh.SYS_SEEK, handle, 7) == 0
    assert call(m, sh.SYS_READ, handle, BUF, 3) == 0
    assert m.read_memory(BUF, 3) == b"789"


def test_console_has_no_position_or_length(m):
    assert call(m, sh.SYS_SEEK, 1, 0) == -1
    assert errno_(m) == NEWLIB["ESPIPE"]
    assert call(m, sh.SYS_FLEN, 1) == -1


def test_open_modes_follow_fopen(m, host_dir):
    (host_dir / "f").write_bytes(b"old")
    handle = open_(m, b"f", mode=8)  # "a"
    m.write_memory(BUF + 0x40, b"new")
    assert call(m, sh.SYS_WRITE, handle, BUF + 0x40, 3) == 0
    call(m, sh.SYS_CLOSE, handle)
    assert (host_dir / "f").read_bytes() == b"oldnew"
    handle = open_(m, b"f", mode=4)  # "w" truncates
    call(m, sh.SYS_CLOSE, handle)
    assert (host_dir / "f").read_bytes() == b""


def test_mode_outside_0_to_11_is_invalid(m, host_dir):
    assert open_(m, b"f", mode=12) == -1
    assert errno_(m) == NEWLIB["EINVAL"]


def test_writing_a_file_opened_for_reading_fails(m, host_dir):
    (host_dir / "f").write_bytes(b"x")
    assert call(m, sh.SYS_WRITE, open_(m, b"f"), BUF, 1) == -1
    assert errno_(m) == NEWLIB["EBADF"]


def test_close_of_an_unknown_handle_fails(m):
    assert call(m, sh.SYS_CLOSE, 42) == -1
    assert errno_(m) == NEWLIB["EBADF"]


def test_open_files_are_bounded(m, host_dir):
    (host_dir / "f").write_bytes(b"x")
    handles = [open_(m, b"f") for _ in range(sh.MAX_OPEN)]
    assert -1 not in handles
    assert open_(m, b"f") == -1
    assert errno_(m) == NEWLIB["EMFILE"]


def test_host_files_are_refused_without_a_host_dir(m, caplog):
    with caplog.at_level(logging.WARNING, logger="pkasim.guest"):
        assert open_(m, b"out.txt", mode=4) == -1
    assert errno_(m) == NEWLIB["EACCES"]
    assert "--host-dir" in caplog.text


@pytest.mark.parametrize("name", [b"../escape.txt", b"sub/../../escape.txt", b"/tmp/escape.txt", b"link/escape.txt"])
def test_names_leading_outside_the_host_dir_are_refused(m, tmp_path, name):
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (inside / "sub").mkdir()
    (inside / "link").symlink_to(outside)
    m.semihosting.host_dir = HostDir(inside)
    assert open_(m, name, mode=4) == -1
    assert errno_(m) == NEWLIB["EACCES"]
    assert not list(outside.iterdir()) and not (tmp_path / "escape.txt").exists()


def test_symlink_to_a_file_outside_is_refused(m, tmp_path):
    (tmp_path / "secret").write_bytes(b"secret")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "f").symlink_to(tmp_path / "secret")
    m.semihosting.host_dir = HostDir(tmp_path / "dir")
    assert open_(m, b"f") == -1
    assert errno_(m) == NEWLIB["EACCES"]


def test_symlink_inside_the_host_dir_is_followed(m, host_dir):
    (host_dir / "target").write_bytes(b"abc")
    (host_dir / "alias").symlink_to("target")
    assert call(m, sh.SYS_FLEN, open_(m, b"alias")) == 3


def test_remove_and_rename_inside_the_host_dir(m, host_dir):
    (host_dir / "a").write_bytes(b"1")
    put(m, BUF, b"a")
    put(m, BUF + 0x40, b"b")
    assert call(m, sh.SYS_RENAME, BUF, 1, BUF + 0x40, 1) == 0
    assert (host_dir / "b").read_bytes() == b"1" and not (host_dir / "a").exists()
    assert call(m, sh.SYS_REMOVE, BUF + 0x40, 1) == 0
    assert not (host_dir / "b").exists()
    assert call(m, sh.SYS_REMOVE, BUF + 0x40, 1) == -1
    assert errno_(m) == NEWLIB["ENOENT"]


def test_rename_out_of_the_host_dir_is_refused(m, host_dir):
    (host_dir / "a").write_bytes(b"1")
    put(m, BUF, b"a")
    put(m, BUF + 0x40, b"../a")
    assert call(m, sh.SYS_RENAME, BUF, 1, BUF + 0x40, 4) == -1
    assert errno_(m) == NEWLIB["EACCES"]
    assert (host_dir / "a").exists()


def test_tmpnam_names_a_file_inside_the_host_dir(m, host_dir):
    assert call(m, sh.SYS_TMPNAM, BUF, 7, 64) == 0
    name = m.read_memory(BUF, 64).split(b"\0")[0]
    assert name == b"pkasim-tmp-07"
    handle = open_(m, name, mode=4)
    assert handle >= 3 and (host_dir / name.decode()).exists()


def test_tmpnam_fails_when_the_buffer_is_too_small(m, host_dir):
    assert call(m, sh.SYS_TMPNAM, BUF, 7, 4) == -1


def test_stdin_feeds_sys_read_on_handle_0(make_machine, elf):
    machine = make_machine()
    machine.load(elf("bench"))
    machine.write_memory(SRAM_CODE, STUB)
    machine.semihosting.stdin = io.BytesIO(b"abc")
    assert call(machine, sh.SYS_READ, 0, BUF, 10) == 7
    assert machine.read_memory(BUF, 3) == b"abc"
    assert call(machine, sh.SYS_READ, 0, BUF, 10) == 10  # end of input: nothing read


def test_readc_reads_one_byte_and_minus_1_at_end_of_input(m):
    m.semihosting.stdin = io.BytesIO(b"Z")
    assert call(m, sh.SYS_READC, r1=0) == ord("Z")
    assert call(m, sh.SYS_READC, r1=0) == -1


def test_without_stdin_the_console_is_at_end_of_input(m):
    assert call(m, sh.SYS_READ, 0, BUF, 10) == 10


def test_get_cmdline_defaults_to_the_image_path(m, elf):
    assert call(m, sh.SYS_GET_CMDLINE, BUF, 256) == 0
    length = m.read_u32(BLOCK + 4)
    assert m.read_memory(BUF, length + 1) == str(elf("bench")).encode() + b"\0"


def test_get_cmdline_quotes_arguments_with_spaces(m):
    m.semihosting.argv = ["fw.elf", "a", "b c", 'say "hi"', ""]
    assert call(m, sh.SYS_GET_CMDLINE, BUF, 256) == 0
    length = m.read_u32(BLOCK + 4)
    assert m.read_memory(BUF, length) == b"""fw.elf a "b c" 'say "hi"' \"\""""


def test_get_cmdline_too_long_for_the_buffer_is_e2big(m):
    m.semihosting.argv = ["fw.elf", "x" * 300]
    assert call(m, sh.SYS_GET_CMDLINE, BUF, 255) == -1
    assert errno_(m) == NEWLIB["E2BIG"]


class _Image:
    """An image with only the sections SYS_HEAPINFO looks at."""

    def __init__(self, *spans: tuple[int, int]) -> None:
        from pkasim.chip.loader import Section

        self.sections = [Section(f".s{i}", base, base, size, True) for i, (base, size) in enumerate(spans)]
        self.path = Path("fw.elf")


def _heap(config, *spans: tuple[int, int]) -> tuple[int, int, int, int]:
    image = _Image(*spans)
    host = sh.Semihosting(lambda a, n: bytes(n), lambda a, d: None, lambda: 0, 48_000_000, io.BytesIO(),
                          io.BytesIO(), memory=list(config.memory.values()), image=lambda: image)
    return host.heap_layout()


def test_heapinfo_aligns_both_ends_of_the_gap_to_8_bytes(config):
    """A 4-byte object at the top of SRAM: the gap's top is 0x20003ffc; the stack base
    (= heap limit) is 8-byte aligned below it, the heap base above the object below."""
    top = config.memory["sram"].end
    assert _heap(config, (0x20000000, 0x13), (top - 4, 4)) == (0x20000018, top - 8, top - 8, 0x20000018)


def test_heapinfo_without_an_8_byte_gap_is_all_zeros(config):
    """SRAM filled but for 6 bytes (0x20000001-0x20000007): no aligned room; zeros tell
    the C library to fall back to its own symbols, instead of a heap base above its limit."""
    sram = config.memory["sram"]
    assert _heap(config, (sram.base, 1), (sram.base + 7, sram.size - 7)) == (0, 0, 0, 0)


def test_heapinfo_takes_the_largest_gap_in_the_largest_ram(config):
    """.bss in the middle of SRAM: the larger gap, above it, is heap and stack."""
    top = config.memory["sram"].end
    assert _heap(config, (0x20001000, 0x100)) == (0x20001100, top, top, 0x20001100)


def test_heapinfo_gives_the_ram_the_image_leaves_free(m, config):
    bss = max(s.vma + s.size for s in m.image.sections if s.vma >= config.memory["sram"].base)
    top = config.memory["sram"].end
    m.write_u32(BLOCK, BUF)  # the block holds a pointer to the four result words
    assert call(m, sh.SYS_HEAPINFO, r1=BLOCK) == 0
    assert [m.read_u32(BUF + 4 * i) for i in range(4)] == [(bss + 7) & ~7, top, top, (bss + 7) & ~7]


def test_time_calls_answer_in_modeled_time(m, config, elf):
    hz = config.core.clock_hz
    m.load(elf("compute"))
    assert m.run(max_cycles=10**8).reason == StopReason.EXIT  # 6.7 M cycles: 0.14 modeled seconds
    m.write_memory(SRAM_CODE, STUB)
    assert m.cycles > hz // 10
    assert call(m, sh.SYS_TICKFREQ) == hz
    assert call(m, sh.SYS_CLOCK) == m.cycles * 100 // hz
    assert call(m, sh.SYS_TIME) == m.cycles // hz
    assert call(m, sh.SYS_ELAPSED, r1=BUF) == 0
    assert int.from_bytes(m.read_memory(BUF, 8), "little") == m.cycles  # the BKPT's cycle counted first


@pytest.mark.parametrize("op,name", [(sh.SYS_SYSTEM, "SYS_SYSTEM"), (sh.SYS_SYNCCACHE, "SYS_SYNCCACHE"),
                                     (0x55, "0x55")])
def test_calls_not_served_return_minus_1_and_are_named_on_the_unimp_log(m, caplog, op, name):
    with caplog.at_level(logging.WARNING, logger="pkasim.unimp"):
        assert call(m, op) == -1
    assert name in caplog.text and "operation" not in caplog.text
    assert errno_(m) == NEWLIB["ENOSYS"]


def exit_with(m, reason: int, subcode: int):
    for i, word in enumerate((reason, subcode)):
        m.write_u32(BLOCK + 4 * i, word)
    m.set_reg("r0", sh.SYS_EXIT_EXTENDED)
    m.set_reg("r1", BLOCK)
    m.set_reg("pc", SRAM_CODE)
    return m.run(max_cycles=1000)


def test_exit_extended_application_exit_carries_the_status(m):
    r = exit_with(m, sh.ADP_STOPPED_APPLICATION_EXIT, 3)
    assert r.reason == StopReason.EXIT and r.exit_code == 3
    assert r.message == "firmware exited with code 3"


def test_exit_extended_with_sigabrt_reports_an_abort_and_exits_1(m):
    r = exit_with(m, 0x20023, 6)
    assert r.reason == StopReason.EXIT and r.exit_code == 1
    assert r.message == "firmware aborted: ADP_Stopped_RunTimeErrorUnknown, SIGABRT (exit code 1)"


def test_exit_extended_with_another_reason_names_it(m):
    r = exit_with(m, 0x20028, 0)
    assert r.exit_code == 1 and "ADP_Stopped_DivisionByZero" in r.message


def test_exit_status_is_its_low_byte_like_qemu(m):
    r = exit_with(m, sh.ADP_STOPPED_APPLICATION_EXIT, 0xFFFFFFFF)
    assert r.exit_code == 255 and "code -1" in r.message


def test_exit_status_whose_low_byte_is_0_warns(m, caplog):
    with caplog.at_level(logging.WARNING, logger="pkasim.guest"):
        r = exit_with(m, sh.ADP_STOPPED_APPLICATION_EXIT, 256)
    assert r.exit_code == 0 and "256" in caplog.text


def test_errno_table_is_newlibs(repo):
    header = Path("/usr/include/newlib/sys/errno.h")
    if not header.exists():
        pytest.skip("newlib's sys/errno.h is not installed (apt-get install libnewlib-arm-none-eabi; .ci/run does)")
    defined = dict(re.findall(r"^#define\s+(E[A-Z0-9]+)\s+(\d+)\b", header.read_text(), re.M))
    assert {k: int(v) for k, v in defined.items()} == NEWLIB


def test_host_errno_maps_by_name():
    assert guest_errno(errno.ENAMETOOLONG) == 91 and guest_errno(errno.ENOENT) == 2
    assert guest_errno(10**6) == NEWLIB["EIO"]  # no such host error: EIO


# --------------------------------------------------------------------------- hostile host files and arguments

def test_flen_of_a_file_over_2_gib_is_eoverflow_not_a_wrapped_length(m, host_dir):
    """A sparse 5 GiB file: its length does not fit the signed 32-bit answer (QEMU: -1,
    EOVERFLOW), where the low 32 bits would say 1 GiB."""
    with open(host_dir / "big", "wb") as fh:
        fh.truncate(5 << 30)
    handle = open_(m, b"big")
    assert call(m, sh.SYS_FLEN, handle) == -1
    assert errno_(m) == NEWLIB["EOVERFLOW"]


def test_flen_of_a_file_of_2_gib_less_1_is_its_length(m, host_dir):
    with open(host_dir / "edge", "wb") as fh:
        fh.truncate(sh.FLEN_MAX)
    assert call(m, sh.SYS_FLEN, open_(m, b"edge")) == 0x7FFFFFFF


@pytest.mark.parametrize("mode", [0, 4, 8])
def test_open_of_a_fifo_in_the_host_dir_is_refused_without_waiting_for_a_writer(m, host_dir, caplog, mode):
    """A FIFO nobody writes to would block the open for ever, and a cycle budget cannot
    end a host call. A thread opens the other end so that the old behaviour (an
    open that waits) fails the assertion instead of hanging the test."""
    import os
    import threading

    fifo = host_dir / "fifo"
    os.mkfifo(fifo)
    other = threading.Thread(target=lambda: os.close(os.open(fifo, os.O_WRONLY if mode == 0 else os.O_RDONLY)),
                             daemon=True)
    other.start()
    assert open_(m, b"fifo", mode) == -1
    assert errno_(m) == NEWLIB["EACCES"]
    assert "a FIFO: only regular files are served" in caplog.text
    both = os.open(fifo, os.O_RDWR)  # both ends at once (Linux): the thread's open returns, whenever it comes
    other.join()
    os.close(both)


def test_get_cmdline_passes_arguments_that_are_not_utf8_as_their_bytes(m):
    """``pkasim run fw.elf -- $'a\\xffb'``: Python holds the word with a surrogate;
    the firmware gets the bytes the shell passed."""
    import os

    m.semihosting.argv = [os.fsdecode(b"fw\xfe.elf"), os.fsdecode(b"a\xffb")]
    assert call(m, sh.SYS_GET_CMDLINE, BUF, 256) == 0
    length = m.read_u32(BLOCK + 4)
    assert m.read_memory(BUF, length + 1) == b"fw\xfe.elf a\xffb\0"
