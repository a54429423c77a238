"""`python -m blosa ...`: the blosa command (blosa.cli)."""
import sys

from blosa.cli import main

sys.exit(main())
