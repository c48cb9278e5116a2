"""A checkpoint whose files do not hold the whole model its config describes is refused, through
`lighteval-nanotron eval`, with a message naming the files, before any weight is loaded."""

import contextlib
import io
import json
import shutil
from pathlib import Path

import yaml

from tests.helpers.distributed import run_distributed

TASK = "lighteval|arc:easy|0"
SHARD = "model_weight_pp-rank-0-of-1_tp-rank-1-of-2.safetensors"
QKV_1 = Path("model/model/decoder/1/pp_block/attn/qkv_proj")


def _save_at_tp2(source: str, target: str) -> None:
    """run_distributed worker (2 ranks): load a TP1 checkpoint at TP2 and save it there (sharded files)."""
    import torch.distributed as dist

    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint, save_nanotron_checkpoint
    from tests.helpers.distributed import parallel_context

    context = parallel_context(2, 1, 1)
    model, model_config = load_nanotron_checkpoint(source, context)
    save_nanotron_checkpoint(model, model_config, context, target)
    if dist.get_rank() == 0:
        for name in ("model_config.json", "config.yaml", "tokenizer.json", "tokenizer_config.json"):
            shutil.copy(Path(source) / name, Path(target) / name)


def _eval_each(checkpoints: list, output_dir: str) -> list:
    """run_distributed worker (1 rank): `lighteval-nanotron eval` on each folder; (rc, stderr) each."""
    from lighteval_nanotron.cli.main import main

    outcomes = []
    for checkpoint in checkpoints:
        stderr = io.StringIO()
        argv = ["eval", checkpoint, "--cpu", "--tasks", TASK, "--max-samples", "2", "--data-dir", "bundled",
                "--output-dir", output_dir, "--loggers", "json"]  # fmt: skip
        with contextlib.redirect_stderr(stderr):
            rc = main(argv)
        outcomes.append((rc, stderr.getvalue()))
    return outcomes


def _edit_model_config(folder: Path, yaml_too: bool, **changes) -> None:
    fields = json.loads((folder / "model_config.json").read_text())
    (folder / "model_config.json").write_text(json.dumps({**fields, **changes}))
    if yaml_too:
        config = yaml.safe_load((folder / "config.yaml").read_text())
        config["model"]["model_config"].update(changes)
        (folder / "config.yaml").write_text(yaml.safe_dump(config))


def test_incomplete_or_mismatched_checkpoints_are_refused(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    tp2 = tmp_path / "tp2"
    run_distributed(_save_at_tp2, 2, str(checkpoint), str(tp2), timeout=180)
    assert (tp2 / QKV_1 / SHARD).is_file()
    cases = {name: tmp_path / name for name in ("no_tp_shard", "no_layer_file", "fewer_layers", "narrower", "heads")}
    shutil.copytree(tp2, cases["no_tp_shard"])
    (cases["no_tp_shard"] / QKV_1 / SHARD).unlink()
    for name in ("no_layer_file", "fewer_layers", "narrower", "heads"):
        shutil.copytree(checkpoint, cases[name])
    (lost,) = (cases["no_layer_file"] / QKV_1).iterdir()
    lost.unlink()
    _edit_model_config(cases["fewer_layers"], yaml_too=True, num_hidden_layers=1)  # 1-layer config, 2-layer weights
    _edit_model_config(cases["narrower"], yaml_too=True, hidden_size=32)
    _edit_model_config(cases["heads"], yaml_too=False, num_attention_heads=8, num_key_value_heads=4)  # same shapes

    folders = [str(tp2), *map(str, cases.values())]
    outcomes = run_distributed(_eval_each, 1, folders, str(tmp_path / "out"), timeout=300)[0]
    assert outcomes[0][0] == 0, outcomes[0][1][-2000:]  # the complete TP2-saved checkpoint evaluates at TP1
    expected = {
        "no_tp_shard": ["missing shard file", str(cases["no_tp_shard"] / QKV_1 / SHARD)],
        "no_layer_file": ["no file for 1 weight", "model.decoder.1.pp_block.attn.qkv_proj.weight"],
        "fewer_layers": ["the model config does not have", "model.decoder.1.pp_block.attn.qkv_proj.weight"],
        "narrower": ["saved with full shape", "but its model config gives"],
        "heads": ["disagree", "num_attention_heads=8 vs 4"],
    }
    for (name, texts), (rc, stderr) in zip(expected.items(), outcomes[1:], strict=True):
        lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
        assert rc == 2 and len(lines) == 1, (name, stderr[-2000:])
        assert "is not loaded" in lines[0] and all(text in lines[0] for text in texts), (name, lines[0])
    assert not (tmp_path / "out" / "results" / "no_tp_shard").exists()
