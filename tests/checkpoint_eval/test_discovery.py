"""Finding checkpoints, their steps and names, the tokenizer and dtype: pure file reads, no model."""

import json
import re
from pathlib import Path

import pytest
import torch
import yaml

from lighteval_nanotron.checkpoint_eval.discovery import (
    CheckpointInfo,
    checkpoint_info,
    default_model_name,
    find_checkpoints,
    pending_tasks,
)
from lighteval_nanotron.checkpoint_eval.loading import check_same_model, resolve_dtype, tokenizer_source
from lighteval_nanotron.checkpoint_eval.mesh_setup import check_world
from lighteval_nanotron.checkpoints.format import CheckpointModel
from lighteval_nanotron.checkpoints.nanotron_builder import check_model_layout
from lighteval_nanotron.cli.main import build_parser
from lighteval_nanotron.errors import CheckpointError, ConfigError, LayoutError
from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig


def _checkpoint(folder: Path, metas: dict | None = None, config: dict | None = None) -> Path:
    (folder / "model").mkdir(parents=True)
    (folder / "checkpoint_metadata.json").write_text(
        json.dumps({"tp": 1, "dp": 1, "metas": metas or {}, "version": "1.4"})
    )
    if config is not None:
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


def test_find_checkpoints_in_step_order_skipping_incomplete_and_other_folders(tmp_path):
    for step in (100, 2, 10):
        _checkpoint(tmp_path / str(step))
    (tmp_path / "7" / "model").mkdir(parents=True)  # no metadata: still being written
    (tmp_path / "final").mkdir()
    (tmp_path / "latest.txt").write_text("100")
    assert [(info.step, info.path.name) for info in find_checkpoints(tmp_path)] == [(2, "2"), (10, "10"), (100, "100")]


def test_find_checkpoints_errors(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        find_checkpoints(tmp_path / "missing")
    (tmp_path / "5").mkdir()
    with pytest.raises(CheckpointError, match="No checkpoint in"):
        find_checkpoints(tmp_path)


def test_what_is_not_a_checkpoint_is_named_with_the_command_that_makes_one(tmp_path):
    gguf = tmp_path / "SmolLM2.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(CheckpointError, match=r"GGUF.*convert gguf .*SmolLM2.Q4_1.gguf"):
        checkpoint_info(gguf)
    with pytest.raises(CheckpointError, match="is a GGUF file.*convert gguf"):
        find_checkpoints(gguf)
    hf = tmp_path / "hf_llama"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"Hugging Face.*convert hf "):
        checkpoint_info(hf)
    run = tmp_path / "checkpoints"
    for step in (10, 20):
        _checkpoint(run / str(step))
    with pytest.raises(CheckpointError, match=r"step folders .*\(10, 20\).*--checkpoints-"):
        checkpoint_info(run)
    with pytest.raises(CheckpointError, match="one checkpoint, not .*step folders"):
        find_checkpoints(run / "20")
    with pytest.raises(CheckpointError, match="is a file: .*checkpoint folder"):
        checkpoint_info(run / "20" / "checkpoint_metadata.json")


def test_checkpoint_info_reads_step_and_consumed_tokens(tmp_path):
    trained = _checkpoint(
        tmp_path / "run" / "300",
        {"last_train_step": 300, "consumed_train_samples": 1200},
        {"tokens": {"sequence_length": 256}},
    )
    assert checkpoint_info(trained) == CheckpointInfo(trained, 300, 1200 * 256, 1200)
    assert checkpoint_info(_checkpoint(tmp_path / "45")).step == 45
    converted = _checkpoint(tmp_path / "smollm2", config={"tokens": None})
    assert checkpoint_info(converted) == CheckpointInfo(converted, None, None)
    # current Nanotron's metadata has a step and stages: converted weights are written as step 0 of one
    # "converted" stage (nanotron_builder.save_checkpoint_metadata), which is no training step
    stage = {"name": "converted", "start_training_step": 1, "consumed_train_samples": 0}
    main_converted = _checkpoint(tmp_path / "main_converted", {"last_train_step": 0, "consumed_train_samples": 0,
                                                                "data_stages": [stage]})  # fmt: skip
    assert checkpoint_info(main_converted) == CheckpointInfo(main_converted, None, None)
    initial = _checkpoint(tmp_path / "initial", {"last_train_step": 0, "consumed_train_samples": 0,
                                                  "data_stages": [{**stage, "name": "stable"}]})  # fmt: skip
    assert checkpoint_info(initial).step == 0
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="has no model"):
        checkpoint_info(tmp_path / "empty")
    (tmp_path / "smollm2" / "checkpoint_metadata.json").write_text("{")
    with pytest.raises(CheckpointError, match="incomplete or corrupt"):
        checkpoint_info(tmp_path / "smollm2")


def test_pending_tasks_are_decided_per_step_task_fewshot_and_max_samples(tmp_path):
    infos = [CheckpointInfo(tmp_path / str(s), s) for s in (10, 20, 30)] + [CheckpointInfo(tmp_path / "x", None)]
    tasks = ["lighteval|arc:easy|0", "lighteval|arc:easy|5"]
    done = {10: {(tasks[0], 4): None, (tasks[1], 4): None}, 20: {(tasks[0], 4): None, (tasks[1], None): None}}
    done[99] = {(tasks[0], 4): None}
    assert pending_tasks(infos, tasks, done, 4, {}) == {20: [tasks[1]], 30: tasks, None: tasks}
    assert pending_tasks(infos, tasks[:1], done, 4, {}) == {30: tasks[:1], None: tasks[:1]}
    assert pending_tasks(infos, tasks, done, None, {}) == {10: tasks, 20: tasks[:1], 30: tasks, None: tasks}


def test_a_held_out_domain_is_done_only_on_the_windows_this_run_prepared(tmp_path):
    infos = [CheckpointInfo(tmp_path / str(s), s) for s in (10, 20, 30)]
    names = ["lighteval|arc:easy|0", "heldout|web"]
    done = {
        10: {(names[0], None): None, (names[1], None): "aaaa"},  # the same windows
        20: {(names[0], None): None, (names[1], None): "bbbb"},  # other windows (file, budget, seed, length)
        30: {(names[0], None): None, (names[1], None): None},  # written before domains recorded a digest
    }
    assert pending_tasks(infos, names, done, None, {"heldout|web": "aaaa"}) == {20: ["heldout|web"]}
    assert pending_tasks(infos, names, done, None, {}) == {}  # no windows prepared: any results count


def test_default_model_name_matches_the_training_hook(tmp_path):
    assert default_model_name(_checkpoint(tmp_path / "a", config={"general": {"project": "p", "run": "r"}})) == "p/r"
    assert default_model_name(_checkpoint(tmp_path / "b", config={"general": {"project": "p", "run": None}})) == "p"
    hooked = {"general": {"project": "p", "run": "r"}, "lighteval_nanotron": {"model_name": "mine", "tasks": "x"}}
    assert default_model_name(_checkpoint(tmp_path / "c", config=hooked)) == "mine"
    assert default_model_name(_checkpoint(tmp_path / "plain")) == "plain"
    for index, general in enumerate([{"project": ["a"]}, {"project": "p", "run": 5}]):  # filed under `['a']/`, `p/5/`
        key = "general.project" if index == 0 else "general.run"
        with pytest.raises(CheckpointError, match=rf"config.yaml's {key} .*--model-name"):
            default_model_name(_checkpoint(tmp_path / f"bad{index}", config={"general": general}))
    with pytest.raises(CheckpointError, match=r"'general' .*'p/r', not a mapping"):
        default_model_name(_checkpoint(tmp_path / "flat", config={"general": "p/r"}))


def test_tokenizer_source_order(tmp_path):
    folder = _checkpoint(tmp_path / "ckpt", config={"tokenizer": {"tokenizer_name_or_path": "/data/tok"}})
    assert tokenizer_source("given", folder) == "given"
    assert tokenizer_source(None, folder) == "/data/tok"
    (folder / "tokenizer.json").write_text("{}")
    assert tokenizer_source(None, folder) == str(folder)
    bare = _checkpoint(tmp_path / "bare")
    with pytest.raises(ConfigError, match="--tokenizer"):
        tokenizer_source(None, bare)


def test_relative_tokenizer_path_resolved_against_the_training_folder(tmp_path, monkeypatch):
    import shutil

    from lighteval_nanotron.setup.tokenizer import load_tokenizer

    repo = Path(__file__).resolve().parents[2]
    training_cwd = tmp_path / "project"
    shutil.copytree(repo / "configs" / "tiny_tokenizer", training_cwd / "configs" / "tok")
    config = {
        "tokenizer": {"tokenizer_name_or_path": "configs/tok"},
        "checkpoints": {"checkpoints_path": "runs/tiny/checkpoints"},
    }
    checkpoint = _checkpoint(training_cwd / "runs/tiny/checkpoints/30", config=config)
    monkeypatch.chdir(tmp_path)  # evaluated from another folder: "configs/tok" does not exist here
    assert tokenizer_source(None, checkpoint) == str(training_cwd / "configs" / "tok")
    assert load_tokenizer(tokenizer_source(None, checkpoint)).vocab_size == 1024

    moved = tmp_path / "copied" / "30"  # the run moved, checkpoints_path no longer matches: ancestors
    shutil.copytree(checkpoint, moved)
    shutil.copytree(training_cwd / "configs", tmp_path / "copied" / "configs")
    assert tokenizer_source(None, moved) == str(tmp_path / "copied" / "configs" / "tok")

    hub_name = _checkpoint(tmp_path / "hub" / "1", config={"tokenizer": {"tokenizer_name_or_path": "org/tok"}})
    assert tokenizer_source(None, hub_name) == "org/tok"  # found nowhere: a Hub name, left as it is


def test_resolve_dtype(tmp_path):
    folder = _checkpoint(tmp_path / "ckpt", config={"model": {"dtype": "bfloat16"}})
    assert resolve_dtype(None, folder) == torch.bfloat16
    assert resolve_dtype("float32", folder) == torch.float32
    assert resolve_dtype(None, _checkpoint(tmp_path / "bare")) == torch.float32
    with pytest.raises(ConfigError, match="Unknown dtype"):
        resolve_dtype("int8", folder)


def _spec(**overrides) -> CheckpointModel:
    from lighteval_nanotron.models.families.llama.tiny import tiny_llama_config

    return CheckpointModel(tiny_llama_config(**overrides), 10000.0)


def test_layout_and_architecture_checks():
    check_model_layout(_spec().model_config, tp=2, pp=4)
    with pytest.raises(LayoutError, match="num_key_value_heads=2"):
        check_model_layout(_spec().model_config, tp=4, pp=1)
    with pytest.raises(LayoutError, match="num_hidden_layers=4"):
        check_model_layout(_spec().model_config, tp=1, pp=8)
    with pytest.raises(CheckpointError, match="hidden_size"):
        check_same_model(_spec(), _spec(hidden_size=128), Path("ckpt/20"))
    with pytest.raises(CheckpointError, match="rope_theta"):
        check_same_model(_spec(), CheckpointModel(_spec().model_config, 1e5), Path("ckpt/20"))


def test_world_size_check(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    check_world(1, 1, 1)
    with pytest.raises(LayoutError, match="torchrun --nproc-per-node 4"):
        check_world(2, 2, 1)
    monkeypatch.setenv("WORLD_SIZE", "4")
    check_world(1, 2, 2)
    with pytest.raises(LayoutError, match="but 4 were launched"):
        check_world(2, 1, 1)


def test_config_and_cli_validation(capsys):
    with pytest.raises(ConfigError, match="exactly one"):
        CheckpointEvalConfig(tasks="x")
    with pytest.raises(ConfigError, match="exactly one"):
        CheckpointEvalConfig(tasks="x", checkpoint="a", checkpoints_dir="b")
    with pytest.raises(ConfigError, match="max-samples"):
        CheckpointEvalConfig(tasks="x", checkpoint="a", max_samples=0)
    parser = build_parser()
    args = parser.parse_args(["eval", "--checkpoints-dir", "ckpts", "--tasks", "t", "--tp", "2", "--cpu"])
    assert (args.checkpoint, args.checkpoints_dir, args.tp, args.cpu) == (None, "ckpts", 2, True)
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", "ckpt/10", "--checkpoints-dir", "ckpts", "--tasks", "t"])
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", "ckpt/10", "--checkpoint-config-path", "ckpt/10/config.yaml", "--tasks", "t"])
    capsys.readouterr()
    from lighteval_nanotron.cli.main import main

    assert main(["eval", "--tasks", "t", "--cpu"]) == 2  # no checkpoint: one error line, before any process group
    assert capsys.readouterr().err.strip().startswith("error: Give exactly one of a checkpoint folder")


def test_damaged_metadata_and_config_sections_are_named(tmp_path):
    """Files of the right syntax and the wrong content: one CheckpointError naming the file and key."""
    from lighteval_nanotron.checkpoints.format import read_checkpoint_model

    with pytest.raises(CheckpointError, match=r"last_train_step is 'ten'"):
        checkpoint_info(_checkpoint(tmp_path / "a", metas={"last_train_step": "ten"}))
    for index, step in enumerate([True, 10.5, "10", -1]):  # int() filed them as steps 1, 10, 10 and -1
        with pytest.raises(CheckpointError, match=rf"last_train_step is {re.escape(repr(step))}, .*>= 0"):
            checkpoint_info(_checkpoint(tmp_path / f"s{index}", metas={"last_train_step": step}))
    with pytest.raises(CheckpointError, match=r"tokens.sequence_length is 256.5"):
        tokens = {"tokens": {"sequence_length": 256.5}}
        checkpoint_info(_checkpoint(tmp_path / "t", metas={"consumed_train_samples": 4}, config=tokens))
    with pytest.raises(CheckpointError, match=r"'tokens' .*'long', not a mapping"):
        checkpoint_info(_checkpoint(tmp_path / "b", metas={"consumed_train_samples": 4}, config={"tokens": "long"}))
    damaged = _checkpoint(tmp_path / "c", config={"model": "llama", "tokenizer": ["gpt2"]})
    with pytest.raises(CheckpointError, match=r"'tokenizer' .*\['gpt2'\], not a mapping"):
        tokenizer_source(None, damaged)
    import dataclasses

    from lighteval_nanotron.models.families.llama.tiny import tiny_llama_config

    fields = json.dumps(dataclasses.asdict(tiny_llama_config()))
    (damaged / "model_config.json").write_bytes(b"\xef\xbb\xbf" + fields.encode())
    with pytest.raises(CheckpointError, match=r"'model' .*'llama', not a mapping"):
        read_checkpoint_model(damaged)  # the byte-order mark of model_config.json is read past
    info = checkpoint_info(_checkpoint(tmp_path / "d", metas={"last_train_step": 7}))
    (tmp_path / "d" / "checkpoint_metadata.json").write_bytes(
        b"\xef\xbb\xbf" + (tmp_path / "d" / "checkpoint_metadata.json").read_bytes()
    )
    assert checkpoint_info(tmp_path / "d") == info


def test_two_folders_of_one_step_are_refused_and_other_digits_are_not_steps(tmp_path):
    """`10/` and `010/` were both evaluated as step 10, the second replacing the first's results
    (and `--watch` never saw either settle); a folder named `²` (`str.isdigit`, not `int`) crashed
    the listing, `--watch`, `report` and `plot` with a ValueError."""
    from lighteval_nanotron.analysis import load_runs
    from lighteval_nanotron.checkpoint_eval.arrivals import ArrivalScanner

    for name in ("10", "²", "٣"):
        _checkpoint(tmp_path / name)
    assert [info.step for info in find_checkpoints(tmp_path)] == [10]
    assert [info.step for info in ArrivalScanner(tmp_path, settle_s=0).scan(now=0, handled=set()).ready] == [10]
    results = tmp_path / "out" / "results" / "m" / "²"
    results.mkdir(parents=True)
    (results / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"results": {"t|x|0": {"acc": 0.5}}}))
    assert load_runs(tmp_path / "out") == {}
    _checkpoint(tmp_path / "010")
    for look in (lambda: find_checkpoints(tmp_path), lambda: ArrivalScanner(tmp_path, settle_s=0).scan(0, set())):
        with pytest.raises(CheckpointError, match=r"folders .*010 and .*10 both name step 10"):
            look()


def test_a_step_folder_whose_metadata_names_another_step_is_refused(tmp_path):
    """`20/` holding step 10's checkpoint (a copy under another step's name) was filed as step 20 by a
    backfill and `--watch`, and as step 10 by `eval 20/` (the hook's asynchronous launches). `--watch`
    reads it with `checkpoint_info` when it handles the step: that step's failure, recorded
    (`test_watch_failures.py`), not the end of the watch."""
    _checkpoint(tmp_path / "10", metas={"last_train_step": 10})
    assert checkpoint_info(tmp_path / "10").step == 10
    _checkpoint(tmp_path / "20", metas={"last_train_step": 10})
    looks = (lambda: checkpoint_info(tmp_path / "20"), lambda: find_checkpoints(tmp_path))
    for look in looks:
        with pytest.raises(CheckpointError, match=r"20 is named step 20 .*step 10"):
            look()
