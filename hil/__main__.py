"""`python -m hil ...` is the `hil` command."""
import sys

from .cli import main

sys.exit(main())
