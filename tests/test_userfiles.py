"""Reading files from user paths (emulator/base/userfiles.py): opens that never wait for a
FIFO's writer, special files refused where a file is expected, reads with a bound,
outputs checked before the work and written atomically."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pkasim.base.userfiles import NotARegularFile, check_output_path, open_input, read_bounded, write_atomically


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_fifo_with_no_writer_is_refused_where_a_file_is_expected_without_waiting(fifo: Path) -> None:
    with pytest.raises(NotARegularFile) as info:
        read_bounded(fifo, 100)
    assert info.value.strerror == "not a regular file but a FIFO (named pipe)"


def test_a_fifo_with_no_writer_is_refused_where_a_stream_will_do(fifo: Path) -> None:
    """Nothing will come; a writer that opens it later must not find its data unread."""
    with pytest.raises(NotARegularFile, match="a FIFO \\(named pipe\\) with no writer"):
        read_bounded(fifo, 100, streams=True)


def test_a_fifo_whose_writer_has_not_written_yet_is_waited_for(fifo: Path) -> None:
    import threading

    writer_fd = os.open(fifo, os.O_RDWR)  # a writer before the read (Linux: O_RDWR never blocks)
    late = threading.Timer(0.05, lambda: (os.write(writer_fd, b"late"), os.close(writer_fd)))
    late.start()
    assert read_bounded(fifo, 100, streams=True) == b"late"
    late.join()


def test_a_fifo_with_a_writer_is_read_where_a_stream_will_do(fifo: Path) -> None:
    writer_fd = os.open(fifo, os.O_RDWR)  # a writer present before the read (Linux: O_RDWR never blocks)
    try:
        os.write(writer_fd, b"data")
        with open_input(fifo, streams=True) as fh:
            assert fh.read(4) == b"data"
    finally:
        os.close(writer_fd)


def test_dev_zero_is_read_only_to_the_bound_plus_one(tmp_path: Path) -> None:
    assert read_bounded("/dev/zero", 1000, streams=True) == bytes(1001)


def test_dev_zero_is_refused_where_a_file_is_expected() -> None:
    with pytest.raises(NotARegularFile, match="a character device"):
        read_bounded("/dev/zero", 1000)


def test_a_directory_is_refused_as_open_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError) as info:
        read_bounded(tmp_path, 10, streams=True)
    assert info.value.strerror == "Is a directory"


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_bounded(tmp_path / "missing", 10)


def test_a_regular_file_is_read_whole_below_the_bound(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x" * 10)
    assert read_bounded(f, 10) == b"x" * 10
    assert read_bounded(f, 9) == b"x" * 10  # one more than the bound: the caller refuses it


@pytest.mark.parametrize(("make", "error", "code"), [
    (lambda d: d / "missing" / "out", FileNotFoundError, errno.ENOENT),
    (lambda d: d, IsADirectoryError, errno.EISDIR),
    (lambda d: (d / "file").write_bytes(b"") or d / "file" / "out", NotADirectoryError, errno.ENOTDIR),
])
def test_an_output_path_that_cannot_be_written_is_refused_before_any_work(tmp_path: Path, make, error,
                                                                          code) -> None:
    with pytest.raises(error) as info:
        check_output_path(make(tmp_path))
    assert info.value.errno == code


def test_an_output_path_in_an_existing_directory_is_accepted(tmp_path: Path) -> None:
    check_output_path(tmp_path / "new")


def test_an_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    f = tmp_path / "state"
    f.write_bytes(b"old")
    write_atomically(f, b"new")
    assert f.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_an_atomic_write_that_fails_leaves_the_old_file(tmp_path: Path, monkeypatch) -> None:
    f = tmp_path / "state"
    f.write_bytes(b"old")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        write_atomically(f, b"new")
    assert f.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
