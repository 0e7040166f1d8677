"""Starting ``pkasim gdbserver`` for a test, and a raw remote-protocol client."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from pkasim.debugger.gdbserver.packets import Packet, Reader, frame


class Server:
    """``pkasim gdbserver ELF --port 0`` in a child process; ``port`` once it listens."""

    def __init__(self, elf: Path, *extra: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "pkasim.cli.main", "gdbserver", str(elf), "--port", "0",
                                      *extra], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"the server did not start: {line}{self.proc.stderr.read()}")
        self.port = int(m.group(1))

    def wait(self, timeout: float = 60) -> tuple[int, str]:
        """The exit status and the rest of stderr."""
        _, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


class Client:
    """A bare remote-protocol client: send frames or raw bytes, read replies."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.reader = Reader()
        self.events: list = []

    def raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def next_event(self) -> object:
        deadline = time.monotonic() + 60
        while not self.events:
            if time.monotonic() > deadline:
                raise AssertionError("no reply")
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError("the server closed the connection")
            self.events += self.reader.feed(data)
        return self.events.pop(0)

    def reply(self) -> str:
        """The next packet's payload, skipping acks and console output ('O' packets)."""
        while True:
            ev = self.next_event()
            if isinstance(ev, Packet):
                text = ev.data.decode("latin-1")
                if text.startswith("O") and text != "OK" and re.fullmatch(r"O[0-9a-f]+", text):
                    continue
                return text

    def ask(self, payload: str | bytes) -> str:
        self.raw(frame(payload))
        return self.reply()

    def close(self) -> None:
        self.sock.close()


class InProcess:
    """The same server on a thread of the test process (no start-up cost): for tests
    of the protocol rather than of the command line."""

    def __init__(self, machine) -> None:
        from pkasim.debugger.gdbserver.server import Target, listen, serve

        self.target = Target(machine, interval_cycles=1_000_000)
        self.srv = listen("127.0.0.1", 0)
        self.port = self.srv.getsockname()[1]
        self.thread = threading.Thread(target=serve, args=(self.srv, self.target, lambda _: None), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.thread.join(timeout=60)
        self.srv.close()
