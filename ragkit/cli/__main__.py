"""``python -m ragkit.cli``: the same as the ``ragkit`` command."""

import sys

from ragkit.cli import main

sys.exit(main())
