"""Which (task, max_samples) already have results at each step, the same answer on every rank.

The reporting rank writes the results; its output folder may be node-local. So local rank 0 of
each node reads its node's folder and every rank gets the union: a restart (the hook) or a
backfill (`eval`) whose reporting rank moved to another node still skips what was evaluated.
"""

from __future__ import annotations

from typing import Any

from lighteval_nanotron.parallel.launch_env import local_rank
from lighteval_nanotron.parallel.once import from_every_rank

Done = dict[int, set[tuple[str, int | None]]]


def finished_tasks_by_step(output_dir: str, model_name: str, world: Any) -> Done:
    """`{step: {(task, max_samples), ...}}` of the results files any node sees (collective on `world`)."""
    from lighteval_nanotron.tracking.paths import evaluated_tasks_by_step

    mine = evaluated_tasks_by_step(output_dir, model_name) if local_rank() == 0 else {}
    done: Done = {}
    for part in from_every_rank(mine, world):
        for step, pairs in part.items():
            done.setdefault(step, set()).update(pairs)
    return done


def finished_steps(done: Done, tasks: list[str], max_samples: int | None) -> set[int]:
    """The steps whose results hold every one of `tasks` at this `max_samples`."""
    wanted = {(task, max_samples) for task in tasks}
    return {step for step, pairs in done.items() if wanted <= pairs}
