"""Remote-protocol packets to the gdb server (`pkasim gdbserver`), as a broken or
hostile client sends them.

A session is a sequence of packets drawn from a grammar of the commands the server
knows, with hostile arguments: addresses of 0, the top of memory, 33 to 64 bits,
negative or spelled with '0x'; lengths of 0 and past the packet size; hex that is
not hex, odd digit counts, register numbers past the table, breakpoints and
watchpoints of every type set and removed out of order, continue/step from hostile
PCs, reverse execution, qXfer windows, monitor commands, bytes that are not ASCII.
It runs in-process: the server's Session on one end of a socket pair, the fuzzer on
the other. The property: every packet gets one reply, never E03 (an exception inside
a handler), never longer than the PacketSize the server advertises; the server keeps
serving; and no breakpoint outside the 32-bit address space is ever left set.
"""

from __future__ import annotations

import random
import socket
import threading
from dataclasses import dataclass, field

from pkasim.debugger.gdbserver.packets import MAX_PACKET, Packet, Reader, frame

ADDRESSES = ("0", "20000000", "20003ffc", "ffffffff", "100000000", "ffffffffffffffff", "1" + "0" * 16, "-4", "0x10",
             "", "zz", "c0", "40010000", "e000e010")
LENGTHS = ("0", "1", "4", "10", "1000", "4000", "8000", "ffffffff", "-1", "", "zz")


def _packet(rng: random.Random) -> str | bytes:
    a, n = rng.choice(ADDRESSES), rng.choice(LENGTHS)
    choices = [
        lambda: f"m{a},{n}", lambda: f"M{a},{n}:{rng.choice(['', 'ab', 'abc', 'deadbeef', 'zz'])}",
        lambda: f"X{a},{n}:" + "".join(rng.choice("ab}#*$") for _ in range(rng.randint(0, 6))),
        lambda: f"{rng.choice('Zz')}{rng.choice('012345x')},{a},{rng.choice(['2', '4', '0', '-1', ''])}",
        lambda: f"p{rng.choice(['0', 'f', '15', '16', '99', '-1', 'x', ''])}",
        lambda: f"P{rng.choice(['0', 'f', '99', ''])}={rng.choice(['78563412', '00', 'zz', ''])}",
        lambda: "g", lambda: "G" + rng.choice(["00" * 84, "00" * 4, "zz", ""]),
        lambda: f"{rng.choice('cs')}{rng.choice(['', a])}", lambda: f"vCont;{rng.choice(['c', 's', 'x', ''])}",
        lambda: f"vCont;r{a},{rng.choice(ADDRESSES)}", lambda: "vCont?",
        lambda: rng.choice(["bs", "bc"]),
        lambda: f"qXfer:features:read:{rng.choice(['target.xml', 'other.xml', ''])}:{rng.choice(LENGTHS)},{n}",
        lambda: "qRcmd," + rng.choice(["cycles", "pka", "reset", "profile", "profile stop", "help", "nosuch",
                                        "\xff"]).encode("latin-1").hex() + rng.choice(["", "z"]),
        lambda: rng.choice(["?", "qSupported", "qAttached", "qC", "qfThreadInfo", "qsThreadInfo", "Hg0", "T1",
                            "vMustReplyEmpty", "qSymbol::", "qNoSuch", "", "QStartNoAckMode"]),
        lambda: bytes(rng.randrange(256) for _ in range(rng.randint(1, 20))),
    ]
    return rng.choice(choices)()


@dataclass
class SessionOutcome:
    packets: int = 0
    problems: list[str] = field(default_factory=list)


def session(rng: random.Random, machine, packets: int) -> SessionOutcome:
    """Serve ``machine`` on a socket pair and send ``packets`` packets; what went wrong."""
    from pkasim.debugger.gdbserver.server import Session, Target

    ours, theirs = socket.socketpair()
    ours.settimeout(120)  # a server that stopped answering fails the case rather than the run
    target = Target(machine, interval_cycles=100_000, max_cycles=2_000_000)
    server = Session(theirs, target)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    reader, events = Reader(), []
    out = SessionOutcome()
    try:
        for _ in range(packets):
            pkt = _packet(rng)
            if pkt in ("D", "k") or (isinstance(pkt, str) and pkt.startswith("vKill")):
                continue
            ours.sendall(frame(pkt))
            while True:
                while not any(isinstance(e, Packet) for e in events):
                    data = ours.recv(1 << 16)
                    if not data:
                        out.problems.append(f"the server closed the connection after {pkt!r}")
                        return out
                    events += reader.feed(data)
                reply = next(e for e in events if isinstance(e, Packet))
                events = events[events.index(reply) + 1:]
                text = reply.data.decode("latin-1")
                if text.startswith("O") and text != "OK" and all(c in "0123456789abcdef" for c in text[1:]):
                    continue  # console output before the reply
                break
            out.packets += 1
            if len(reply.data) > MAX_PACKET:
                out.problems.append(f"{pkt!r}: a reply of {len(reply.data)} bytes, over PacketSize {MAX_PACKET}")
            if text == "E03":
                out.problems.append(f"{pkt!r}: E03 (an exception in the handler)")
            stray = [b for b in machine._loop.breakpoints if not 0 <= b <= 0xFFFFFFFF]
            if stray:
                out.problems.append(f"{pkt!r}: a breakpoint left at {stray}")
            head = pkt[:1] if isinstance(pkt, str) else pkt[:1].decode("latin-1")
            if head == "D":  # any packet starting with D is a detach: the session is over
                break
    except OSError as exc:
        out.problems.append(f"socket: {exc}")
    finally:
        ours.close()
        thread.join(timeout=120)  # the server sees the connection end and returns
        theirs.close()
    if thread.is_alive():
        out.problems.append("the server did not end when the connection did")
    return out
