"""``python -m trainkit``: the same as the ``trainkit`` command."""

import sys

from trainkit.cli import main

sys.exit(main())
