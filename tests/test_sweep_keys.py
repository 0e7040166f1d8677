"""The sweep's random keys and messages (emulator/sweep/keys.py): the same on every
run, of the size asked for, and usable by the RSA firmware."""

from __future__ import annotations

from pkasim.sweep.cache import ResultCache
from pkasim.sweep.keys import KEY_SCHEMA, cached_key, sweep_key, sweep_message


def test_a_key_has_two_primes_of_half_the_size_and_n_of_the_full_size():
    key = sweep_key(2048, 0)
    assert key.n.bit_length() == 2048 and key.p.bit_length() == key.q.bit_length() == 1024
    for prime in (key.p, key.q):
        assert all(pow(base, prime - 1, prime) == 1 for base in (2, 3, 5, 7))
        assert (prime - 1) % key.e
    assert key.private(pow(12345, key.e, key.n)) == 12345


def test_keys_and_messages_are_the_same_on_every_run():
    first = sweep_key(2048, 0)
    assert sweep_key.__wrapped__(2048, 0) == first  # made again, past the in-process cache
    assert sweep_message(first, 3) == sweep_message(first, 3) != sweep_message(first, 4)
    assert 0 < sweep_message(first, 0) < first.n


def test_a_key_is_made_once_per_cache_then_read_back(tmp_path):
    cache = ResultCache(tmp_path / "c.sqlite")
    key = cached_key(cache, 2048, 0)
    assert cache.get(f"{KEY_SCHEMA}/2048/0") == {"e": key.e, "p": str(key.p), "q": str(key.q)}
    assert cached_key(cache, 2048, 0) == key


def test_a_stored_key_of_the_wrong_size_is_made_again(tmp_path):
    cache = ResultCache(tmp_path / "c.sqlite")
    cache.put(f"{KEY_SCHEMA}/2048/0", {"e": 65537, "p": "11", "q": "13"})
    assert cached_key(cache, 2048, 0) == sweep_key(2048, 0)
