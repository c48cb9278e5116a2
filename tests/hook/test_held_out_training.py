"""Held-out loss in the training hook: with the training data itself as the held-out set, the loss
the hook measures on the live model equals the loss Nanotron's trainer reports for those sequences."""

import json
from pathlib import Path

import yaml

from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import TOKENIZER, results_files, train_worker, write_config
from tests.models.held_out_cases import WORDS

SEQUENCE_LENGTH = 32
ROWS = 4  # the global batch: micro-batch 2 x DP 2, one step consumes every row


def _training_text(folder: Path) -> Path:
    """A jsonl folder whose text gives exactly ROWS training rows of SEQUENCE_LENGTH + 1 tokens (each
    text, then the end-of-text token, concatenated: the training loader's `token_chunks`)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
    texts, total, index = [], 0, 0
    while (total - 1) // SEQUENCE_LENGTH < ROWS:
        text = " ".join(WORDS[(index * 7 + k) % len(WORDS)] for k in range(5 + index % 4))
        texts.append(text)
        total += len(tokenizer(text)["input_ids"]) + 1
        index += 1
    assert (total - 1) // SEQUENCE_LENGTH == ROWS
    folder.mkdir(parents=True)
    (folder / "train.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    return folder


def _config(folder: Path, data: Path) -> Path:
    section = {"tasks": "", "held_out": {"train": str(data)}, "eval_interval": None, "eval_at_start": True}
    path = write_config(folder, dp=2, train_steps=1, micro_batch_size=2, section=section)
    content = yaml.safe_load(path.read_text())
    dataset = {
        "hf_dataset_or_datasets": str(data),
        "hf_dataset_splits": "train",
        "text_column_name": "text",
        "dataset_processing_num_proc_per_process": 1,
    }
    stages = content.get("data_stages")
    data_section = stages[0]["data"] if stages else content["data"]
    data_section.update(dataset=dataset, num_loading_workers=0)
    path.write_text(yaml.safe_dump(content))
    return path


def test_training_data_as_held_out_equals_the_trainers_loss(tmp_path):
    config = _config(tmp_path, _training_text(tmp_path / "text"))
    ranks = run_distributed(train_worker, 2, str(config), timeout=300)
    (reported,) = {rank["losses"][0] for rank in ranks if rank["losses"] and rank["losses"][0] is not None}
    results = results_files(tmp_path / "eval")
    before = results[0]  # step 0: the weights step 1's loss was computed with
    held_out = before["results"]["heldout|train"]["loss"]
    assert abs(held_out - reported) / reported < 1e-5
    described = before["config_tasks"]["heldout|train"]
    assert described["sequences"] == ROWS and described["sequence_length"] == SEQUENCE_LENGTH
    assert described["notes"] and "larger than the data" in described["notes"][0]
    assert "heldout|train" in results[1]["results"]  # eval_at_end too
