"""``python -m bayesirt``: the command-line tool."""

import sys

from bayesirt.cli import main

sys.exit(main())
