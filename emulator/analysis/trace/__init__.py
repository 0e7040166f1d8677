"""Trace writers: each turns a run into a file an existing viewer opens (docs/traces.md).

- ``folded``: folded stacks weighted by cycles (speedscope, flamegraph.pl);
- ``trace_events``: Chrome trace-event JSON on the modeled-time axis (Perfetto,
  chrome://tracing, speedscope);
- ``vcd``: value-change dump of the chip's signals (GTKWave);
- ``tarmac``: an instruction trace in the spirit of Arm's Tarmac text format.

Every writer reads the observation API (pkasim.core.observe) or, for Tarmac, the
machine's per-instruction hook over a bounded range. None writes host data (dates,
paths of the host, wall time): two runs give byte-identical files.
"""
