"""`python -m lighteval_nanotron ...` runs the `lighteval-nanotron` command line."""

from lighteval_nanotron.cli.main import run

run()
