"""The USB host side: the wire's timing, a host controller on the machine's clock,
enumeration, the CCID host and a card session (docs/usb.md)."""
