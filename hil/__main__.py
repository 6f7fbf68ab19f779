"""`python -m hil ...` is the `hil` command."""
import sys

from hil.cli.main import main

sys.exit(main())
