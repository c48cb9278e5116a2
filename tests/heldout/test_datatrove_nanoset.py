"""A Nanoset folder written by datatrove's own `DocumentTokenizer` and read by its own
`DatatroveFolderDataset` (what current Nanotron's Nanoset reads through) gives the held-out windows.

Skipped where datatrove is not installed (it is no dependency of this project): `pip install datatrove`.
"""

import pytest

from lighteval_nanotron.heldout import HeldOutSpec, build_held_out_set
from tests.helpers.tiny_model import VOCAB_SIZE, tiny_tokenizer
from tests.hook.training_runs import TOKENIZER
from tests.models.held_out_cases import write_text_jsonl

pytest.importorskip("datatrove")

LENGTH = 16


def test_datatrove_written_nanoset_reads_as_datatrove_reads_it(tmp_path):
    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer
    from datatrove.utils.dataset import DatatroveFolderDataset

    source = tmp_path / "text"
    source.mkdir()
    write_text_jsonl(source / "web.jsonl", documents=30)
    output = tmp_path / "nanoset"
    LocalPipelineExecutor(
        pipeline=[
            JsonlReader(data_folder=str(source)),
            DocumentTokenizer(
                output_folder=str(output),
                local_working_dir=str(tmp_path / "work"),
                save_filename="web",
                tokenizer_name_or_path=str(TOKENIZER / "tokenizer.json"),
                eos_token="<|endoftext|>",
            ),
        ],
        tasks=1,
        workers=1,
        logging_dir=str(tmp_path / "logs"),
    ).run()
    theirs = DatatroveFolderDataset(str(output), seq_len=LENGTH, filename_pattern="*.ds", recursive=False, token_size=2)
    expected = [theirs[i]["input_ids"].tolist() for i in range(len(theirs))]
    held_out = build_held_out_set(
        HeldOutSpec("web", str(output), tokens=10**6), tiny_tokenizer(), LENGTH, VOCAB_SIZE, 256
    )
    assert held_out.windows.tolist() == expected and len(expected) > 10
    assert held_out.description["kind"] == "nanoset"
