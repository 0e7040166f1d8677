"""``pkasim.firmware``: the firmware sources, linker script, project template, demo keys
and prebuilt images (``build/``, listed in ``build/manifest.json``), as package data.

setup.py maps this folder into the package so that ``importlib.resources`` finds the
files in a checkout and in an installed wheel alike (pkasim.base.resources); no code.
"""
