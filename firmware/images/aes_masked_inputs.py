"""Inputs of aes_masked.elf for pkasim power and tvla: the plaintext in two shares.

    pkasim tvla firmware/build/aes_masked.elf --inputs firmware/images/aes_masked_inputs.py:shares \\
        --traces 20000 --noise 20

Each trace draws a fresh 16-byte mask u and gives the firmware p ^ u and u; in a TVLA
the fixed group's plaintext p is FIXED (FIPS-197 C.1's), the random group's is random.
A fixed-versus-random test of a masked implementation must feed it shares: the
unmasked plaintext itself differs between the groups wherever it is handled.
"""

INPUTS = ["aes_pt_share0", "aes_pt_share1"]
FIXED = bytes.fromhex("00112233445566778899aabbccddeeff")


def shares(rng, fixed):
    p = FIXED if fixed else rng.bytes(16)
    u = rng.bytes(16)
    return {"aes_pt_share0": bytes(a ^ b for a, b in zip(p, u)), "aes_pt_share1": u}
