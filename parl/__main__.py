"""``python -m parl``: the ``parl`` command line (see :mod:`parl.experiment.cli.commands`)."""

import sys

from parl.experiment.cli.commands import main

sys.exit(main())
