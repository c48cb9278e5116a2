"""`python -m lighteval_nanotron ...` runs the `lighteval-nanotron` command line."""

import sys

from lighteval_nanotron.cli.main import run

sys.exit(run())
