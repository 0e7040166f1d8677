"""The emulated card as a vsmartcard virtual ICC: pcscd's ``vpcd`` driver listens on
a TCP port (35963 by default, /etc/reader.conf.d/vpcd) and the card connects to it.

Protocol (vsmartcard, "Creating a virtual smart card"): every message is a 2-byte
big-endian length and its bytes. From vpcd, a 1-byte message is a command: 0x00 power
off, 0x01 power on, 0x02 reset (no reply to these three), 0x04 the ATR (the reply is
the ATR); a longer one is a command APDU, answered by the response APDU.

Each APDU goes to the card over the emulated USB bus (IccPowerOn, XfrBlock), so every
exchange has its modeled timing; ``on_apdu`` sees them.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

from pkasim.usb.session import CardSession, Exchange

VPCD_PORT = 35963
CTRL_OFF, CTRL_ON, CTRL_RESET, CTRL_ATR = 0, 1, 2, 4


class VpcdUnavailable(Exception):
    """Nothing listens where vpcd should."""


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def serve(session: CardSession, host: str = "127.0.0.1", port: int = VPCD_PORT,
          on_apdu: Callable[[bytes, bytes, Exchange], None] | None = None,
          connect_timeout: float = 10.0, wait: float = 0.0) -> int:
    """Serve vpcd until it closes the connection; returns the APDUs answered. With
    ``wait``, a refused connection is tried again for that many (wall) seconds: pcscd
    may still be starting."""
    deadline = time.monotonic() + wait
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout)
            break
        except ConnectionRefusedError as exc:
            if time.monotonic() >= deadline:
                raise VpcdUnavailable(f"no vpcd at {host}:{port} ({exc.strerror})") from None
            time.sleep(0.2)
        except OSError as exc:
            raise VpcdUnavailable(f"cannot reach vpcd at {host}:{port} ({exc.strerror or exc})") from None
    sock.settimeout(None)
    atr = session.power_on()
    answered = 0
    try:
        while True:
            head = _recv_exact(sock, 2)
            if head is None:
                return answered
            (length,) = struct.unpack(">H", head)
            msg = _recv_exact(sock, length)
            if msg is None:
                return answered
            if length == 1:
                if msg[0] in (CTRL_ON, CTRL_RESET):
                    atr = session.power_on()
                elif msg[0] == CTRL_OFF:
                    session.ccid(0x63)
                elif msg[0] == CTRL_ATR:
                    sock.sendall(struct.pack(">H", len(atr)) + atr)
                continue
            ex = session.ccid(0x6F, msg)
            if ex.reply[0] != 0x80 or ex.status >> 6:
                response = b"\x6f\x00"  # the reader failed: "no precise diagnosis"
            else:
                response = ex.data
            sock.sendall(struct.pack(">H", len(response)) + response)
            answered += 1
            if on_apdu is not None:
                on_apdu(msg, response, ex)
    finally:
        sock.close()
