"""The debugger: time travel (snapshots and re-execution), the command engine, the
TUI and the scripted front end; the gdb server lives in ``gdbserver/``."""
