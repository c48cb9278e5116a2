"""Nanotron's own `lighteval:` training-config section (`LightEvalConfig`) mapped onto ours.

Nanotron 0.4 parses that section and then never uses it, so a run with it trained without any
evaluation. Here it becomes a `lighteval_nanotron:` section, evaluated at every checkpoint and at
the end as Nanotron's lighteval runner would (or every `eval_interval` steps, where set), through
the table shared with `eval --lighteval-config-path` (`lighteval_options.FIELDS`), with a log of
what mapped and what has no effect. Both sections at once are refused: which one wins would be a guess.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.hook.config import EvaluationConfig
from lighteval_nanotron.lighteval_options import Consumer, map_lighteval_options

MESH = "the hook evaluates on the training mesh"
HOOK = Consumer(
    name="the training hook",
    takes=frozenset(field.name for field in dataclasses.fields(EvaluationConfig)),
    no_use={"tp": MESH, "pp": MESH, "dp": MESH, "checkpoints_dir": "the hook evaluates the live model"},
)
WHERE = "Nanotron's lighteval: section"


def evaluation_from_nanotron_section(section: Any) -> EvaluationConfig:
    """The hook's section equivalent to Nanotron's `lighteval:` section; logs what did not map."""
    options = HOOK.select(map_lighteval_options(section, WHERE), WHERE)
    if not options.get("tasks"):
        raise ConfigError(f"{WHERE}: tasks.tasks is empty: set it to task specs, e.g. 'lighteval|arc:easy|0'.")
    options["loggers"] = [*options["loggers"], "log"]
    at_checkpoints = options.get("eval_interval") is None
    return EvaluationConfig(**options, eval_at_checkpoints=at_checkpoints, eval_at_end=True)


def merge_sections(nanotron_section: Any, ours: EvaluationConfig | None) -> EvaluationConfig | None:
    """Our section, or the one mapped from Nanotron's; refused when both are present."""
    if nanotron_section is None:
        return ours
    if ours is not None:
        raise ConfigError(
            "The training config has both a lighteval: section (Nanotron's) and a lighteval_nanotron: section: "
            "keep one (lighteval_nanotron: has every option of the hook)."
        )
    return evaluation_from_nanotron_section(nanotron_section)
