"""Count, in one process, how often the setup work runs: a task's dataset opened (the real
`datasets` loading still happens) and a request group's prompts tokenized by the engine."""

from __future__ import annotations

import functools
from collections import Counter

COUNTED = {
    "dataset_opens": ("lighteval_nanotron.tasks.lighteval_task", "load_source"),
    "tokenizations": ("lighteval_nanotron.models.engine.model", "loglikelihood_rows"),
}


def count_setup_work() -> Counter:
    """Wrap the counted functions where they are called; the returned Counter fills as they run."""
    import importlib

    counts: Counter = Counter()
    for key, (module_name, attribute) in COUNTED.items():
        module = importlib.import_module(module_name)
        original = getattr(module, attribute)

        @functools.wraps(original)
        def counted(*args, _original=original, _key=key, **kwargs):
            counts[_key] += 1
            return _original(*args, **kwargs)

        setattr(module, attribute, counted)
    return counts
