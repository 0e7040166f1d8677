"""Write the suite's --load inputs for RSA-2048 (traces/suite.yaml): the demo key as
rsa_key_t bytes, the bench's fixed message, and the signature the firmware must
produce (it compares its result with rsa_expected and exits 1 on a mismatch).

    .venv/bin/python traces/inputs/make_inputs.py    # rewrites traces/inputs/*.bin
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from pkasim.rsa.bench import _message  # noqa: E402
from pkasim.rsa.rsakey import demo_key  # noqa: E402


def main() -> int:
    key = demo_key(2048)
    msg = _message(key)
    (HERE / "rsa2048-key.bin").write_bytes(key.pack())
    (HERE / "rsa2048-msg.bin").write_bytes(msg.to_bytes(256, "big"))
    (HERE / "rsa2048-sig.bin").write_bytes(key.private(msg).to_bytes(256, "big"))
    print(f"wrote {HERE}/rsa2048-{{key,msg,sig}}.bin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
