"""Read the details Parquet files an evaluation wrote and compare them with transformers."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from lighteval_nanotron.tracking import details_task_name
from tests.checkpoint_eval.tiny_hf import transformers_logprob


def read_details(details_dir: Path) -> dict[str, list[dict]]:
    """{task: rows} of every details_<task>_<date>.parquet in one step's details folder."""
    files = sorted(Path(details_dir).rglob("details_*.parquet"))
    assert files, f"no details in {details_dir}"
    return {details_task_name(f): pq.read_table(f).to_pylist() for f in files}


def max_logprob_difference(model, details: dict[str, list[dict]], tokenizer=None) -> float:
    """Largest |engine log-prob - transformers log-prob| over every (doc, choice), scoring the
    same context / continuation tokens; with `tokenizer`, also checks those boundaries are
    lighteval's: context + continuation is the tokenization of prompt + choice."""
    worst = 0.0
    for rows in details.values():
        for row in rows:
            assert row["truncated"] == [0]
            assert len(row["logprobs"]) == len(row["choices"]) == len(row["cont_tokens"])
            scored = zip(row["choices"], row["cont_tokens"], row["logprobs"], strict=True)
            for choice, continuation, logprob in scored:
                if tokenizer is not None:
                    assert row["input_tokens"] + continuation == tokenizer(row["full_prompt"] + choice)["input_ids"]
                expected = transformers_logprob(model, row["input_tokens"], continuation)
                worst = max(worst, abs(expected - logprob))
    return worst
