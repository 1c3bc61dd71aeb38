"""``python -m crowdlearn``: the ``crowdlearn`` command, for environments where the console
script is not on ``PATH`` (a checkout run with ``PYTHONPATH=src``, a venv not activated)."""

import sys

from .cli import main

if __name__ == "__main__":  # pragma: no cover - run through ``python -m``
    sys.exit(main())
