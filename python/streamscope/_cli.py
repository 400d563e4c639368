"""The ``streamscope`` console script and ``python -m streamscope``: runs
the CLI binary bundled in the wheel (``streamscope/_bin/``, beside the
collector library and the GPU sampler, where ``record`` finds them)."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

BIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin")


def binary() -> str:
    """The bundled CLI executable."""
    return os.path.join(BIN_DIR, "streamscope")


def main(argv: Optional[List[str]] = None) -> int:
    exe = binary()
    args = sys.argv[1:] if argv is None else argv
    if not os.path.isfile(exe):
        sys.stderr.write(
            f"streamscope: error: the CLI binary is not in this install ({exe} missing); "
            "install the wheel built by python/build-wheel.sh\n"
        )
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    # Replaces this Python process: signals, exit codes and `record`'s
    # child processes are the binary's own.
    os.execv(exe, ["streamscope", *args])
    return 0  # pragma: no cover (execv does not return)
