"""``python -m streamscope ARGS...``: the bundled CLI, as ``streamscope ARGS...``."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
