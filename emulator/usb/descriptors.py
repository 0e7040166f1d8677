"""USB descriptors as the host reads them, printed the way ``lsusb -v`` prints them."""

from __future__ import annotations

from dataclasses import dataclass, field

CLASS_NAMES = {0x00: "(Defined at Interface level)", 0x0B: "Chip/SmartCard", 0xFF: "Vendor Specific Class"}
TYPE_NAMES = {0: "Control", 1: "Isochronous", 2: "Bulk", 3: "Interrupt"}


@dataclass
class Descriptors:
    device: bytes
    config: bytes
    strings: dict[int, str] = field(default_factory=dict)

    def endpoints(self) -> list[bytes]:
        return [d for d in split(self.config) if d[1] == 5]

    def interrupt_interval(self) -> int:
        """bInterval of the first interrupt IN endpoint (frames at full speed), 0 if none."""
        for ep in self.endpoints():
            if ep[3] & 3 == 3 and ep[2] & 0x80:
                return ep[6]
        return 0


def split(blob: bytes) -> list[bytes]:
    """The descriptors of a configuration, each by its bLength (a bad one ends the list)."""
    out = []
    i = 0
    while i + 2 <= len(blob):
        n = blob[i]
        if n < 2 or i + n > len(blob):
            break
        out.append(blob[i:i + n])
        i += n
    return out


def _u16(d: bytes, i: int) -> int:
    return d[i] | d[i + 1] << 8


def _u32(d: bytes, i: int) -> int:
    return int.from_bytes(d[i:i + 4], "little")


def parse_string(d: bytes) -> str:
    return d[2:d[0] if d else 0].decode("utf-16-le", "replace")


def lsusb(desc: Descriptors, bus: int = 1, address: int = 1) -> str:
    """The text ``lsusb -v`` would print for this device."""
    d = desc.device
    s = desc.strings
    lines = [f"Bus {bus:03d} Device {address:03d}: ID {_u16(d, 8):04x}:{_u16(d, 10):04x} {s.get(d[14], '')} "
             f"{s.get(d[15], '')}".rstrip(), "Device Descriptor:"]

    def row(indent: int, name: str, value: int | str, note: str = "") -> None:
        lines.append(f"{' ' * indent}{name:<20}{value!s:>6} {note}".rstrip())

    row(2, "bLength", d[0])
    row(2, "bDescriptorType", d[1])
    row(2, "bcdUSB", f"{d[3]:x}.{d[2]:02x}")
    row(2, "bDeviceClass", d[4], CLASS_NAMES.get(d[4], ""))
    row(2, "bDeviceSubClass", d[5])
    row(2, "bDeviceProtocol", d[6])
    row(2, "bMaxPacketSize0", d[7])
    row(2, "idVendor", f"0x{_u16(d, 8):04x}")
    row(2, "idProduct", f"0x{_u16(d, 10):04x}")
    row(2, "bcdDevice", f"{d[13]:x}.{d[12]:02x}")
    row(2, "iManufacturer", d[14], s.get(d[14], ""))
    row(2, "iProduct", d[15], s.get(d[15], ""))
    row(2, "iSerial", d[16], s.get(d[16], ""))
    row(2, "bNumConfigurations", d[17])
    indent = 2
    for part in split(desc.config):
        kind = part[1]
        if kind == 2:
            lines.append("  Configuration Descriptor:")
            indent = 4
            row(4, "bLength", part[0])
            row(4, "bDescriptorType", part[1])
            row(4, "wTotalLength", f"0x{_u16(part, 2):04x}")
            row(4, "bNumInterfaces", part[4])
            row(4, "bConfigurationValue", part[5])
            row(4, "iConfiguration", part[6])
            row(4, "bmAttributes", f"0x{part[7]:02x}", "(Bus Powered)" if not part[7] & 0x40 else "Self Powered")
            row(4, "MaxPower", f"{part[8] * 2}mA")
        elif kind == 4:
            lines.append("    Interface Descriptor:")
            indent = 6
            row(6, "bLength", part[0])
            row(6, "bDescriptorType", part[1])
            row(6, "bInterfaceNumber", part[2])
            row(6, "bAlternateSetting", part[3])
            row(6, "bNumEndpoints", part[4])
            row(6, "bInterfaceClass", part[5], CLASS_NAMES.get(part[5], ""))
            row(6, "bInterfaceSubClass", part[6])
            row(6, "bInterfaceProtocol", part[7])
            row(6, "iInterface", part[8])
        elif kind == 0x21 and len(part) >= 54:
            lines.append("      ChipCard Interface Descriptor:")
            row(8, "bLength", part[0])
            row(8, "bDescriptorType", part[1])
            row(8, "bcdCCID", f"{part[3]:x}.{part[2]:02x}")
            row(8, "nMaxSlotIndex", part[4])
            row(8, "bVoltageSupport", part[5])
            row(8, "dwProtocols", _u32(part, 6), "T=1" if _u32(part, 6) == 2 else "")
            row(8, "dwDefaultClock", f"{_u32(part, 10) / 1000:.3f}MHz")
            row(8, "dwMaxiumumClock", f"{_u32(part, 14) / 1000:.3f}MHz")
            row(8, "bNumClockSupported", part[18])
            row(8, "dwDataRate", f"{_u32(part, 19)} bps")
            row(8, "dwMaxDataRate", f"{_u32(part, 23)} bps")
            row(8, "bNumDataRatesSupp.", part[27])
            row(8, "dwMaxIFSD", _u32(part, 28))
            row(8, "dwSyncProtocols", f"{_u32(part, 32):08x}")
            row(8, "dwMechanical", f"{_u32(part, 36):08x}")
            feats = _u32(part, 40)
            row(8, "dwFeatures", f"{feats:08x}")
            for bit, text in ((0x2, "Auto configuration based on ATR"), (0x4, "Auto activation on insert"),
                              (0x8, "Auto voltage selection"), (0x10, "Auto clock change"),
                              (0x20, "Auto baud rate change"), (0x40, "Auto parameter negotiation made by CCID"),
                              (0x80, "Auto PPS made by CCID"), (0x40000, "Short and extended APDU level exchange")):
                if feats & bit:
                    lines.append(f"{' ' * 10}{text}")
            row(8, "dwMaxCCIDMsgLen", _u32(part, 44))
            row(8, "bClassGetResponse", "echo" if part[48] == 0xFF else f"{part[48]:02X}")
            row(8, "bClassEnvelope", "echo" if part[49] == 0xFF else f"{part[49]:02X}")
            row(8, "wlcdLayout", "none" if not _u16(part, 50) else f"{_u16(part, 50):04x}")
            row(8, "bPINSupport", part[52])
            row(8, "bMaxCCIDBusySlots", part[53])
        elif kind == 5:
            lines.append(f"{' ' * indent}Endpoint Descriptor:")
            i = indent + 2
            row(i, "bLength", part[0])
            row(i, "bDescriptorType", part[1])
            row(i, "bEndpointAddress", f"0x{part[2]:02x}", f"EP {part[2] & 0xF} {'IN' if part[2] & 0x80 else 'OUT'}")
            row(i, "bmAttributes", part[3])
            lines.append(f"{' ' * (i + 2)}Transfer Type{'':>12}{TYPE_NAMES[part[3] & 3]}")
            row(i, "wMaxPacketSize", f"0x{_u16(part, 4):04x}", f"1x {_u16(part, 4)} bytes")
            row(i, "bInterval", part[6])
    return "\n".join(lines)
