"""Rank functions of the held-out engine tests (module level, so they can be pickled)."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = (
    "the river ran past the old mill where children played each summer while their parents worked in the "
    "fields and the baker sold warm bread to travellers who came from distant towns to trade wool salt and "
    "copper tools before the winter snow closed every road across the high mountain pass"
).split()


def write_text_jsonl(path: Path, documents: int = 40, seed: int = 0) -> Path:
    """`documents` rows of English-like text (a `text` column), some with non-ASCII characters."""
    import random

    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for index in range(documents):
            words = [rng.choice(WORDS) for _ in range(rng.randint(20, 90))]
            if index % 5 == 0:
                words.insert(3, "café")
            out.write(json.dumps({"text": " ".join(words).capitalize() + ".", "id": index}) + "\n")
    return path


def text_token_documents(lengths: list, seed: int = 0) -> list:
    """Documents of these lengths in token ids: English-like text tokenized with the tests' tiny
    tokenizer, as a Nanoset of the model's own tokenization holds (random ids are another tokenizer's
    to the held-out check)."""
    import random

    from tests.helpers.tiny_model import tiny_tokenizer

    rng, tokenizer = random.Random(seed), tiny_tokenizer()
    documents = []
    for length in lengths:
        ids: list = []
        while len(ids) < length:
            text = " ".join(rng.choice(WORDS) for _ in range(60))
            ids += tokenizer(text, add_special_tokens=False)["input_ids"]
        documents.append(ids[: int(length)])
    return documents


def nanotron_window_losses(model, context, windows) -> list[float]:
    """Nanotron's own training forward (`LlamaForTraining` with labels: its sharded cross-entropy,
    masked mean) on each window alone; summed NLL per window (mean x targets)."""
    import torch
    import torch.distributed as dist
    from nanotron.parallel.pipeline_parallel.tensor_pointer import TensorPointer

    losses = []
    model.eval()
    with torch.inference_mode():
        for row in windows:
            tokens = torch.as_tensor(row, dtype=torch.long)[None]
            inputs = {
                "input_ids": tokens[:, :-1],
                "input_mask": torch.ones_like(tokens[:, :-1], dtype=torch.bool),
                "label_ids": tokens[:, 1:],
                "label_mask": torch.ones_like(tokens[:, 1:], dtype=torch.bool),
            }
            pp_rank = dist.get_rank(context.pp_pg)
            for key in ("input_ids", "input_mask"):
                if pp_rank != model.input_pp_rank:
                    inputs[key] = TensorPointer(group_rank=model.input_pp_rank)
            for key in ("label_ids", "label_mask"):
                if pp_rank != model.output_pp_rank:
                    inputs[key] = TensorPointer(group_rank=model.output_pp_rank)
            out = model(**inputs)["loss"]
            model.model.p2p.wait_pending() if hasattr(model.model, "p2p") else None
            losses.append(None if isinstance(out, TensorPointer) else float(out) * (len(row) - 1))
    return losses


def held_out_run(
    checkpoint: str, source: str, tp: int, pp: int, dp: int, sequence_length: int, tokens: int, config: dict
):
    """Rank function: the engine's per-window NLL of `source` at (tp, pp, dp); at TP1/PP1/DP1 also
    Nanotron's own forward on the same windows."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.heldout import HeldOutSpec, build_held_out_set
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.parallel.vocab_parallel import record_logits_width
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), EngineConfig(gather_to="all", **config))
    spec = HeldOutSpec(name="web", path=source, tokens=tokens)
    held_out = engine.computed_once(
        lambda: build_held_out_set(spec, engine.tokenizer, sequence_length, engine.vocab_size, engine.max_length)
    )
    plan = engine.prepare_held_out(held_out)
    with record_logits_width() as widths:
        (losses,) = engine.run(plan)
    reference = None
    if (tp, pp, dp) == (1, 1, 1):
        reference = nanotron_window_losses(model, context, held_out.windows)
    return {
        "nll": losses.nll.tolist(),
        "windows": held_out.windows.tolist(),
        "target_bytes": held_out.target_bytes.tolist(),
        "reference": reference,
        "max_logits_width": widths.max_width,
        "batches": len(plan.batches),
    }


def write_nanoset(folder: Path, token_files: list, token_size: int = 2, tokenizer_name: str = "tiny") -> Path:
    """A Nanoset folder as datatrove's `DocumentTokenizer` writes one: per file `<name>.ds` (little-endian
    token ids, `token_size` bytes each), `<name>.ds.index` (uint64 document ends) and `<name>.ds.metadata`
    (`tokenizer_name|token_size`, then the token count). `token_files`: per file, a list of documents
    (lists of token ids)."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    dtype = {2: "<u2", 4: "<u4"}[token_size]
    for index, documents in enumerate(token_files):
        name = f"held_out_{index:05d}_shuffled.ds"
        tokens = np.concatenate([np.asarray(doc, dtype=np.int64) for doc in documents]).astype(dtype)
        tokens.tofile(folder / name)
        np.cumsum([len(doc) for doc in documents]).astype("<u8").tofile(folder / f"{name}.index")
        (folder / f"{name}.metadata").write_text(f"{tokenizer_name}|{token_size}\n{len(tokens)}\n{len(tokens)}T")
    return folder


def pipeline_run(checkpoint: str, held_out: dict, sequence_length: int, tasks: str, output_dir: str) -> dict:
    """Rank function: `EvaluationPipeline` with held-out domains (and `tasks`) at TP1, results written
    with the json, details and tensorboard loggers."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.heldout import held_out_specs
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings
    from lighteval_nanotron.tasks.data_dirs import set_data_dirs
    from lighteval_nanotron.tracking import TrackingConfig, format_results_table
    from lighteval_nanotron.tracking.scalars import result_scalars
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    set_data_dirs(["bundled"])
    context = parallel_context(1, 1, 1)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), EngineConfig())
    specs = held_out_specs(held_out, tokens=10 * sequence_length)
    pipeline = EvaluationPipeline.prepare(
        engine, tasks, PipelineSettings(max_samples=4, held_out_specs=specs, held_out_sequence_length=sequence_length)
    )
    result = pipeline.run(step=3)
    tracker = TrackingConfig(output_dir=output_dir, loggers=["json", "details", "tensorboard"]).build()
    tracker.log(result)
    tracker.close()
    return {
        "table": format_results_table(result),
        "content": result.to_dict(),
        "scalars": result_scalars(result),
        "details": {key: [row.to_dict() for row in rows] for key, rows in result.details.items()},
        "windows": {s.name: s.windows.tolist() for s in pipeline.held_out.sets},
        "bytes": {s.name: s.target_bytes.tolist() for s in pipeline.held_out.sets},
        "result_names": pipeline.result_names,
    }
