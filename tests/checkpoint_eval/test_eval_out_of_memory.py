"""`eval` of an evaluation that no micro-batch fits: one `error:` line naming the memory a row needs,
and the results already in the output folder untouched."""

from __future__ import annotations

import pytest

from tests.checkpoint_eval.test_output_failures import _cli_cases, _errors
from tests.helpers.distributed import run_distributed


def test_eval_that_fits_no_micro_batch_is_one_error_line_and_keeps_what_was_written(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    out = tmp_path / "out"

    def argv(task: str, *extra: str) -> list:
        return ["eval", str(checkpoint), "--cpu", "--tasks", task, "--max-samples", "2", "--data-dir", "bundled",
                "--output-dir", str(out), "--model-name", "run", "--loggers", "json", "details", *extra]  # fmt: skip

    refused = argv("lighteval|piqa|0", "--memory-budget-gb", "1e-6")
    cases = [(argv("lighteval|arc:easy|0"), None, {}), (refused, None, {})]
    first, refused = run_distributed(_cli_cases, 1, cases, timeout=300)[0]
    assert first[0] == 0, first[1][-2000:]
    written = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    assert any(path.name.startswith("results_") for path in written)
    rc, err = refused
    assert rc == 2 and len(_errors(err)) == 1 and "Traceback" not in err, err[-3000:]
    (line,) = _errors(err)
    assert "out of memory: loglikelihood of one row of " in line and "over memory_budget_gb (1.05 KiB)" in line
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == written
