"""Which (task, max_samples) already have results at each step, the same answer on every rank.

The reporting rank writes the results; its output folder may be node-local. So local rank 0 of
each node reads its node's folder and every rank gets the union: a restart (the hook) or a
backfill (`eval`) whose reporting rank moved to another node still skips what was evaluated; and
whether a step's file was scored with other settings than a run that would merge into it.

A step's results count only under this run's identity (`setup.step.run_identity`, the weights left
out: a file of another identity holds nothing done, and writing into it is refused). A task or
held-out domain is done at a step only on the data this run prepared: its recorded digest (a task's
`docs_sha256`, a domain's `windows_sha256`) equals theirs, so a task whose docs changed, or a domain
whose file, budget, seed or sequence length changed, is evaluated again (a file without a digest,
written before digests were recorded, counts as done).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.parallel.launch_env import local_rank
from lighteval_nanotron.parallel.once import from_every_rank

Evaluated = dict[tuple[str, int | None], str | None]
"""`{(task, max_samples): data digest recorded, or None}` of one step's results."""
Done = dict[int, Evaluated]


def finished_tasks_by_step(output_dir: str, model_name: str, world: Any, identity: dict[str, Any]) -> Done:
    """`{step: {(task, max_samples): digest}}` of the results files of `identity` any node sees
    (collective on `world`)."""
    from lighteval_nanotron.tracking.paths import evaluated_tasks_by_step

    mine = evaluated_tasks_by_step(output_dir, model_name, identity) if local_rank() == 0 else {}
    done: Done = {}
    for part in from_every_rank(mine, world):
        for step, pairs in part.items():
            done.setdefault(step, {}).update(pairs)
    return done


def is_done(evaluated: Evaluated, name: str, max_samples: int | None, digests: Mapping[str, str]) -> bool:
    """Whether `name` has results at this `max_samples` in `evaluated`, on the windows whose digest
    `digests` gives for it (held-out domains this run prepared; any results when it gives none)."""
    if (name, max_samples) not in evaluated:
        return False
    recorded, wanted = evaluated[(name, max_samples)], digests.get(name)
    return recorded is None or wanted is None or recorded == wanted


def finished_steps(done: Done, tasks: Iterable[str], max_samples: int | None, digests: Mapping[str, str]) -> set[int]:
    """The steps whose results hold every one of `tasks` at this `max_samples` (`is_done`)."""
    names = list(tasks)
    return {step for step, evaluated in done.items() if all(is_done(evaluated, n, max_samples, digests) for n in names)}


def check_step_settings(
    output_dir: str, model_name: str, step: int, identity: dict[str, Any], evaluated: list[str], world: Any
) -> None:
    """A `ConfigError` on every rank (collective on `world`) when the step's results file holds
    another identity than this run's (`tracking.results_file.settings_conflict`): the results
    logger would refuse to write this run into it, after the evaluation."""
    from lighteval_nanotron.tracking.paths import results_file_content, step_results_file
    from lighteval_nanotron.tracking.results_file import settings_conflict

    mine = None
    if local_rank() == 0:
        path = step_results_file(output_dir, model_name, step)
        earlier = results_file_content(path)[0] if path is not None else None
        mine = settings_conflict(earlier, identity, evaluated) if earlier is not None else None
    conflict = next((found for found in from_every_rank(mine, world) if found), None)
    if conflict is not None:
        raise ConfigError(f"Step {step} of {model_name} in {output_dir}: {conflict}")


def check_done_step(output_dir: str, model_name: str, step: int, identity: dict[str, Any], world: Any) -> None:
    """A `ConfigError` on every rank (collective on `world`) when a step this run skips as already
    evaluated holds results that were not measured on this run's model: other weights (another
    run under this model name) or another identity (`tracking.results_file.differing_settings`)."""
    from lighteval_nanotron.tracking.paths import results_file_content, step_results_file
    from lighteval_nanotron.tracking.results_file import differing_settings

    mine: list[str] = []
    if local_rank() == 0:
        path = step_results_file(output_dir, model_name, step)
        earlier = results_file_content(path)[0] if path is not None else None
        if earlier is not None:
            mine = differing_settings(earlier, identity)
    differing = next((found for found in from_every_rank(mine, world) if found), None)
    if differing:
        raise ConfigError(
            f"Step {step} of {model_name} in {output_dir} already has results, so this run skips it, but they were "
            f"not measured on this run's model ({'; '.join(differing)}): another run wrote them under this model name, "
            "or this run differs from the one that did (other settings, or a replay after a resume that did not "
            "reproduce the weights bit for bit). They are kept. Give this run another model_name or output_dir, "
            "or move that step's results folder away to evaluate it again."
        )
