"""The elliptic-curve workloads: the ECC firmware's inputs and outputs (``image``),
its bench jobs (``bench``) and EC keys for the tools (``keys``). docs/ecc.md."""
