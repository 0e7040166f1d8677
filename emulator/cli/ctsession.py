"""``pkasim ct-check --apdus FILE``: a card image checked through its own command path.

A card image (``card.elf``, docs/usb.md) never exits: it sleeps until the USB host sends
it a command. With ``--apdus``, each ct-check run is a card session instead of a run to
exit: the image is attached to the emulated USB bus and enumerated, the card powered
(IccPowerOn), and the APDUs of FILE (``pkasim apdu``'s format) sent one after the other;
the run ends when the last one is answered.

What is compared is everything the firmware did from reset to the moment it hands the
last answer to the USB (arms the bulk IN pipe with the reply's first packet), and the
status words of every run. Not after: from then on the firmware waits for the host,
and a packet's time on the wire depends on its bits (bit stuffing, docs/usb.md), so
the device wakes at a moment that depends on the answer, which is the output (a
signature, a public key), not the secret. docs/ct-check.md, "Card images"; docs/ecc.md
has the checks of the card's ECC keys.
"""

from __future__ import annotations

from collections.abc import Callable

from pkasim.base import limits
from pkasim.base.errors import LoadError, PkasimError
from pkasim.cli.apdu import parse_apdus
from pkasim.cli.common import read_file
from pkasim.core.machine import Machine
from pkasim.usb.session import CardError, CardSession

EXIT_NO_ANSWER = 124  # the README's "stuck" code: the card stopped answering
BULK_IN = 3  # pkasim.peripherals.usb's pipe of EP1 IN, where CCID replies go


class SessionFailed(PkasimError):
    """A card session that did not get to its last answer (exit 124)."""

    exit_code = EXIT_NO_ANSWER


def read_apdus(path: str) -> list[bytes]:
    """The session's commands: one hex APDU a line, '#' comments (LoadError 65 otherwise)."""
    text = read_file(path, limits.APDU_FILE_MAX_BYTES, "too many APDUs")
    apdus = parse_apdus(text.decode("utf-8", "replace"), path)
    if not apdus:
        raise LoadError(f"{path}: no APDU in the file (one hex line each)")
    return apdus


def run_session(machine: Machine, apdus: list[bytes], name: str, at_answer: Callable[[], None]) -> list[int]:
    """Attach, enumerate, power on and send ``apdus`` on a loaded machine; the status
    words. ``at_answer`` is called once, when the firmware arms the first packet of the
    last APDU's reply (a CCID message that is not a time extension, CCID 1.1 6.2.7)."""
    try:
        session = CardSession(machine)
        session.attach()
        session.power_on()
        words = [session.apdu(apdu)[1] for apdu in apdus[:-1]]
        dev, armed = session.dev, session.dev.on_arm
        called = False

        def watch(pipe: int) -> None:
            nonlocal called
            buf = dev.buffers[pipe]
            if not called and pipe == BULK_IN and buf[0] == 0x80 and buf[7] >> 6 != 2:
                called = True
                at_answer()
            if armed is not None:
                armed(pipe)

        dev.on_arm = watch
        words.append(session.apdu(apdus[-1])[1])
        if not called:
            raise SessionFailed(f"input {name}: the last answer was never armed on the bulk IN pipe")
        return words
    except CardError as exc:
        raise SessionFailed(f"input {name}: the card session did not finish: {exc}") from None
