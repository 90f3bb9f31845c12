"""``python -m bayesirt``: the command-line tool."""

import sys

from bayesirt.cli.main import main

sys.exit(main())
