"""Docs, few-shot examples and prompts are identical in every process and leave global RNGs alone."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from tests.tasks.toy_paths import DATA_DIR, TOY_TASKS

SPECS = (
    "toy_mc,custom|toy_gen|2,toy_mc_random|4,toy_mc_sequential|2,toy_mc_from_train|3,"
    "toy|toy_mc:train_fs|5,toy_mc_filtered|2"
)

SCRIPT = f"""
import json
from lighteval_nanotron.tasks import PromptManager, Registry, set_data_dirs
set_data_dirs([{str(DATA_DIR)!r}])
tasks = Registry({SPECS!r}, custom_tasks={str(TOY_TASKS)!r}).load_tasks()
out = {{}}
manager = PromptManager(system_prompt="sys")
for draws in ("per_doc", "lighteval"):
    for name, task in tasks.items():
        task.set_fewshot_draws(draws)
        docs = task.get_docs(max_samples=7)
        out[f"{{name}} {{draws}}"] = [[doc.id, manager.prepare_prompt(doc), doc.get_golds()] for doc in docs]
print(json.dumps(out))
"""


def _run_both(*hash_seeds: str) -> list[dict]:
    """Run SCRIPT once per hash seed, concurrently, and return the parsed outputs."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT],
            env={**os.environ, "PYTHONHASHSEED": seed, "OMP_NUM_THREADS": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        for seed in hash_seeds
    ]
    outputs = []
    for process in processes:
        try:
            stdout, stderr = process.communicate(timeout=120)
        finally:
            process.kill()
        assert process.returncode == 0, stderr
        outputs.append(json.loads(stdout))
    return outputs


def test_same_output_whatever_the_hash_seed():
    first, second = _run_both("0", "4242")
    assert list(first) == list(second)
    assert len(first) == 18
    assert first == second


def _rng_states():
    return random.getstate(), np.random.get_state()[1].tolist(), torch.get_rng_state().tolist()


def test_global_rngs_are_untouched(load_toy):
    random.seed(123)
    np.random.seed(123)
    torch.manual_seed(123)
    before = _rng_states()
    tasks = load_toy(SPECS)
    for task in tasks.values():
        for draws in ("per_doc", "lighteval"):  # lighteval itself reseeds `random` for balanced few-shots
            task.set_fewshot_draws(draws)
            first = task.get_docs(max_samples=5)
            assert task.get_docs(max_samples=5) == first
            task.get_docs()
    assert _rng_states() == before
