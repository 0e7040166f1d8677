"""``pkasim sweep``: design-space exploration over chips, firmware images, key sizes,
keys and inputs (docs/sweep.md).

One job per module: ``spec`` reads and checks a sweep file, ``keys`` makes the
repeatable random keys and messages, ``grid`` expands the axes into points,
``point`` runs one point (through ``pkasim.rsa.bench.run_job``), ``cache`` keeps every
result by what determines it, ``engines`` runs the points on local processes or a
Dask cluster, ``results`` writes the table, plots and summary.
"""
