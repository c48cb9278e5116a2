"""The package version (written into every results file), below every room that reports it."""

__version__ = "0.1.0"
