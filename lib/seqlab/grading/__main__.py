"""``python -m seqlab.grading grade ...`` / ``selfcheck ...``: see :mod:`seqlab.grading.cli`."""

import sys

from seqlab.grading.cli import main

sys.exit(main())
