"""The same docs through transformers on the same device: the baseline a user would otherwise run.

transformers' `LlamaForCausalLM` on the checkpoint's weights (mapped back to HF names), fed the
token ids the engine used (the details' `input_tokens` and `cont_tokens`): every (context,
choice) sequence scored in batches of BATCH sorted by length, right-padded (what lighteval's
transformers backend does), log-softmax in fp32; each generative doc's prompt through greedy
`generate` in left-padded batches of BATCH, as many new tokens as the engine produced for it.
Timed with the device synchronised; the engine's time for the same docs is its
`EvaluationResult.wall_time_s` (model calls and metrics, no dataset or tokenization work).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

BATCH = 32


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _model(checkpoint: Path, dtype: Any, device: Any) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    from lighteval_nanotron.convert import nanotron_to_hf

    hf_config, weights = nanotron_to_hf(checkpoint)
    model = LlamaForCausalLM(LlamaConfig(**hf_config))
    check_same_model(model, hf_config, model.load_state_dict(weights, strict=False))
    model.tie_weights()
    return model.to(device=device, dtype=dtype).eval()


def check_same_model(model: Any, hf_config: dict[str, Any], loaded: Any) -> None:
    """RuntimeError unless transformers' model holds every converted weight (the tied `lm_head`
    excepted) and rotates with the checkpoint's RoPE base: otherwise it would time another model
    (its own random init, transformers 5's `rope_parameters` at a default base) without a word."""
    tied = {"lm_head.weight"} if hf_config.get("tie_word_embeddings") else set()
    missing = sorted(set(loaded.missing_keys) - tied)
    if missing or loaded.unexpected_keys:
        unknown = list(loaded.unexpected_keys)
        raise RuntimeError(f"transformers baseline: weights not loaded {missing}, unknown {unknown}")
    config = model.config
    theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", getattr(config, "rope_theta", None))
    if "rope_theta" in hf_config and theta != hf_config["rope_theta"]:
        raise RuntimeError(f"transformers baseline: RoPE base {theta}, the checkpoint's is {hf_config['rope_theta']}")


def _score(model: Any, sequences: list[tuple[list[int], list[int]]], device: Any) -> list[float]:
    """Summed log-prob of each continuation after its context."""
    import torch

    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i][0]) - len(sequences[i][1]))
    scores = [0.0] * len(sequences)
    for start in range(0, len(order), BATCH):
        batch = order[start : start + BATCH]
        rows = [sequences[i][0] + sequences[i][1] for i in batch]
        width = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for j, row in enumerate(rows):
            ids[j, : len(row)] = torch.tensor(row)
            mask[j, : len(row)] = 1
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
        for j, i in enumerate(batch):
            context, continuation = sequences[i]
            positions = torch.arange(len(context) - 1, len(context) + len(continuation) - 1, device=device)
            logprobs = torch.log_softmax(logits[j, positions].float(), dim=-1)
            target = torch.tensor(continuation, device=device)
            scores[i] = float(logprobs.gather(-1, target[:, None]).sum())
    return scores


def _generate(model: Any, prompts: list[tuple[list[int], int]], pad_id: int, device: Any) -> list[list[int]]:
    import torch

    outputs: list[list[int]] = [[] for _ in prompts]
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i][0]))
    for start in range(0, len(order), BATCH):
        batch = order[start : start + BATCH]
        width = max(len(prompts[i][0]) for i in batch)
        ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        mask = torch.zeros(len(batch), width, dtype=torch.long)
        for j, i in enumerate(batch):
            ids[j, width - len(prompts[i][0]) :] = torch.tensor(prompts[i][0])
            mask[j, width - len(prompts[i][0]) :] = 1
        new = max(prompts[i][1] for i in batch)
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            pad_token_id=pad_id,
        )
        for j, i in enumerate(batch):
            outputs[i] = out[j, width : width + prompts[i][1]].tolist()
    return outputs


def transformers_baseline(checkpoint: Path, output_dir: Path, dtype: Any, device: Any) -> dict[str, Any]:
    """Seconds, docs/s and agreement with the engine of transformers on the docs of `output_dir`."""
    import torch

    from device_check.evaluations import read_details

    details = read_details(output_dir)
    sequences, engine_scores, prompts, engine_tokens = [], [], [], []
    scored_docs = generated_docs = 0
    for rows in details.values():
        for row in rows.values():
            if row["logprobs"]:
                scored_docs += 1
                for continuation, logprob in zip(row["cont_tokens"], row["logprobs"]):
                    sequences.append((list(row["input_tokens"]), list(continuation)))
                    engine_scores.append(logprob)
            elif row["cont_tokens"] and row["cont_tokens"][0]:
                generated_docs += 1
                prompts.append((list(row["input_tokens"]), len(row["cont_tokens"][0])))
                engine_tokens.append(list(row["cont_tokens"][0]))
    model = _model(checkpoint, dtype, device)
    with torch.no_grad():
        _score(model, sequences[:BATCH], device)  # warm-up: kernels and allocator
        _sync(device)
        started = time.perf_counter()
        scores = _score(model, sequences, device)
        _sync(device)
        scoring_s = time.perf_counter() - started
        started = time.perf_counter()
        tokens = _generate(model, prompts, model.config.eos_token_id or 0, device) if prompts else []
        _sync(device)
        generation_s = time.perf_counter() - started
    diffs = [abs(a - b) for a, b in zip(scores, engine_scores)]
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "batch": BATCH,
        "scored_docs": scored_docs,
        "scored_sequences": len(sequences),
        "scoring_s": scoring_s,
        "generated_docs": generated_docs,
        "new_tokens": sum(n for _, n in prompts),
        "generation_s": generation_s,
        "seconds": scoring_s + generation_s,
        "docs_per_s": (scored_docs + generated_docs) / max(scoring_s + generation_s, 1e-9),
        "max_abs_logprob_diff_vs_engine": max(diffs, default=0.0),
        "generations_equal_to_engine": sum(a == b for a, b in zip(tokens, engine_tokens)) / max(1, len(tokens)),
    }


def baseline_worker(job_file: str) -> None:
    """In its own process: `transformers_baseline` of the job, written to its `figures` file."""
    import torch

    job = json.loads(Path(job_file).read_text())
    device = torch.device("cpu") if job["cpu"] else torch.device("cuda", 0)
    figures = transformers_baseline(
        Path(job["checkpoint"]), Path(job["output_dir"]), getattr(torch, job["dtype"]), device
    )
    figures["engine_model_seconds"] = job["engine_model_seconds"]
    Path(job["figures"]).write_text(json.dumps(figures))
