"""The gdb server: pkasim's machine behind GDB's remote serial protocol (docs/gdbserver.md)."""
