"""``python -m parl``: the ``parl`` command line (see :mod:`parl.experiment.cli`)."""

import sys

from parl.experiment.cli import main

sys.exit(main())
