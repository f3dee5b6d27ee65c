"""``python -m trainkit``: the same as the ``trainkit`` command."""

import sys

from trainkit.cli.main import main

sys.exit(main())
