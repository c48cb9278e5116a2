"""Launching a checkpoint's evaluation elsewhere while training goes on: `lighteval_nanotron eval
CHECKPOINT` as a local process group or a Slurm job, at most N in flight. The training hook's
asynchronous mode decides when (`hook/asynchronous.py`); this package decides how. See docs/hook.md.
"""
