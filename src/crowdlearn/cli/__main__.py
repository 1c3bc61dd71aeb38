"""``python -m crowdlearn.cli``: the ``crowdlearn`` command, as ``python -m crowdlearn`` runs it."""

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover - run through ``python -m``
    sys.exit(main())
