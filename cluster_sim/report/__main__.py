"""``python -m cluster_sim.report``: the ``cluster-sim-report`` command."""
import sys

from .cli import main

sys.exit(main())
