"""Which steps a restarted training (the hook) skips: a held-out domain is done at a step only on
the windows this run prepared. Real held-out sets of the tests' text and real results files."""

import json

import numpy as np

from lighteval_nanotron.heldout import HeldOutSpec, build_held_out_set
from lighteval_nanotron.pipeline.held_out import HeldOutRun, PreparedHeldOut, held_out_results
from lighteval_nanotron.requests.held_out import WINDOWS_DIGEST, HeldOutLosses
from lighteval_nanotron.setup.finished_steps import finished_steps
from lighteval_nanotron.tracking import evaluated_tasks_by_step
from tests.helpers.tiny_model import VOCAB_SIZE, tiny_tokenizer
from tests.models.held_out_cases import write_text_jsonl


def _write_step(output_dir, step: int, prepared: PreparedHeldOut) -> dict:
    runs = [
        HeldOutRun(HeldOutLosses(np.full(len(s.windows), 3.0 * s.sequence_length), s.sequence_length), 1.0)
        for s in prepared.sets
    ]
    out = held_out_results(prepared, runs)
    samples = dict.fromkeys(out.results)
    content = {
        "config_general": {"max_samples_by_task": samples},
        "results": out.results,
        "config_tasks": out.config_tasks,
    }
    path = output_dir / "results" / "run" / str(step) / "results_2025-01-01T00-00-00.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(content))
    return content


def test_a_restart_skips_a_step_only_for_domains_on_the_same_windows(tmp_path):
    web = write_text_jsonl(tmp_path / "web.jsonl")

    def prepared(length: int) -> PreparedHeldOut:
        held_out = build_held_out_set(
            HeldOutSpec("web", str(web), 4 * length), tiny_tokenizer(), length, VOCAB_SIZE, 64
        )
        return PreparedHeldOut([held_out], [None])

    evaluated = prepared(16)
    _write_step(tmp_path, 10, evaluated)
    older = _write_step(tmp_path, 20, evaluated)
    older["config_tasks"]["heldout|web"].pop(WINDOWS_DIGEST)  # written before domains recorded a digest
    (tmp_path / "results" / "run" / "20" / "results_2025-01-01T00-00-00.json").write_text(json.dumps(older))
    done = evaluated_tasks_by_step(tmp_path, "run")

    assert finished_steps(done, ["heldout|web"], None, prepared(16).digests) == {10, 20}  # the same windows
    assert finished_steps(done, ["heldout|web"], None, prepared(32).digests) == {20}  # another sequence length
    assert finished_steps(done, ["heldout|web"], None, {}) == {10, 20}  # no windows prepared (asynchronous)
