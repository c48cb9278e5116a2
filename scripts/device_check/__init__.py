"""The parts of the device check (scripts/gpu_check.py): the models it evaluates, the evaluation
and training workers with their comparisons, the figures and the report."""
