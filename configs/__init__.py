"""``pkasim.configs``: the bundled chip files, presets and sweep examples, as package data.

setup.py maps this folder into the package so that ``importlib.resources`` finds the
files in a checkout and in an installed wheel alike (pkasim.base.resources); no code.
"""
