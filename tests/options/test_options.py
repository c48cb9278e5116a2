"""Every option declared once reaches each way in: a key of the hook's section (read by Nanotron's
own config loader), a flag of `eval` (generated), one row of docs/options.md; the drift between
the two ways in stays resolved."""

import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options import EvaluationOptions
from lighteval_nanotron.options.base import UNIONS, field_docs
from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig
from lighteval_nanotron.options.flags import flag_name
from lighteval_nanotron.options.hook import EvaluationConfig

REPO = Path(__file__).resolve().parents[2]
SHARED = [field.name for field in dataclasses.fields(EvaluationOptions)]


def _sample(cls: type, field: dataclasses.Field) -> tuple[list[str], object]:
    """(the flags that set `field` to a value other than its default, that value)."""
    hint = typing.get_type_hints(cls)[field.name]
    members = [m for m in typing.get_args(hint) if m is not type(None)] if typing.get_origin(hint) in UNIONS else [hint]
    flag = flag_name(cls, field.name)
    if "flags_of" in field.metadata:
        return ["--temperature", "0.5", "--top-k", "7", "--seed", "3"], {"temperature": 0.5, "top_k": 7, "seed": 3}
    if members == [bool]:
        return [flag], not field.default if field.default is not None else True
    if "choices" in field.metadata:
        picked = list(field.metadata["choices"])[-2:]
        if typing.List[str] in members:
            return [flag, *picked], picked
        return [flag, picked[-1]], picked[-1]
    if field.metadata.get("repeat"):
        first, second = field.metadata.get("examples", ("a", "b"))
        return [flag, first, flag, second], [first, second]
    if float in members:
        return [flag, "2.5"], 2.5
    if int in members:
        return [flag, "3"], 3
    value = "x|y|0" if field.name == "tasks" else "some_value"
    return [flag, value], [value] if typing.List[str] in members else value  # a list option takes one string too


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(CheckpointEvalConfig) if f.name != "checkpoint"])
def test_every_eval_option_is_a_flag_that_reaches_the_config(name):
    from lighteval_nanotron.cli.main import build_parser
    from lighteval_nanotron.lighteval_compat.eval_config import eval_config
    from lighteval_nanotron.options.flags import given_options

    field = next(f for f in dataclasses.fields(CheckpointEvalConfig) if f.name == name)
    argv, expected = _sample(CheckpointEvalConfig, field)
    base = [] if name == "tasks" else ["--tasks", "a|b|0"]
    source = [] if name == "checkpoints_dir" else ["ckpt"]
    args = build_parser().parse_args(["eval", *source, *base, *argv])
    names = [f.name for f in dataclasses.fields(CheckpointEvalConfig)]
    config = eval_config(given_options(args, CheckpointEvalConfig, names))
    assert getattr(config, name) == expected


def test_every_option_has_a_docstring():
    for cls in (EvaluationConfig, CheckpointEvalConfig):
        docs = field_docs(cls)
        assert [f.name for f in dataclasses.fields(cls) if not docs.get(f.name)] == []


def test_the_options_reference_is_current():
    from lighteval_nanotron.cli.options_cmd import reference

    current = (REPO / "docs" / "options.md").read_text()
    assert current == reference(), "regenerate it: lighteval-nanotron options > docs/options.md"


def _option_tables(path: Path) -> list[str]:
    """The first cells of the rows of every table whose first column is headed `option`."""
    cells, in_table = [], False
    for line in path.read_text().splitlines():
        if not line.startswith("|"):
            in_table = False
        elif line.split("|")[1].strip() == "option":
            in_table = True
        elif in_table and not line.startswith("|---"):
            cells.append(line.split("|")[1].strip())
    return cells


def test_every_option_is_documented_once():
    """One row per option in docs/options.md; hook.md and eval.md have no option table of their own."""
    names = {f.name for cls in (EvaluationConfig, CheckpointEvalConfig) for f in dataclasses.fields(cls)}
    rows = [cell.strip("`") for cell in _option_tables(REPO / "docs" / "options.md")]
    assert sorted(rows) == sorted(names)
    for doc in ("hook.md", "eval.md", "tracking.md", "engine.md"):
        assert _option_tables(REPO / "docs" / doc) == [], doc


def _section_yaml(tmp_path: Path, section: dict) -> str:
    from lighteval_nanotron.nanotron_compat.variant import shipped_config

    content = yaml.safe_load(shipped_config("tiny_cpu_train.yaml").read_text())
    content["lighteval_nanotron"] = section
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(content))
    return str(path)


def test_every_shared_option_is_a_key_of_the_hook_section(tmp_path):
    """Nanotron's loader (dacite, strict) reads each shared option from the section's flat keys."""
    from lighteval_nanotron.hook.training_config import load_training_config

    section, expected = {"tasks": "a|b|0", "eval_interval": 2}, {}
    for field in dataclasses.fields(EvaluationOptions):
        if field.name != "tasks":
            _, expected[field.name] = _sample(EvaluationOptions, field)
            section[field.name] = expected[field.name]
    loaded = load_training_config(_section_yaml(tmp_path, section)).lighteval_nanotron
    assert {name: getattr(loaded, name) for name in expected} == expected


@pytest.mark.parametrize("value", [20, 20.0])
def test_failure_timeout_takes_an_int_or_a_float_both_ways(tmp_path, value):
    from lighteval_nanotron.hook.training_config import load_training_config

    section = load_training_config(_section_yaml(tmp_path, {"tasks": "a|b|0", "failure_timeout_s": value}))
    assert section.lighteval_nanotron.failure_timeout_s == 20.0
    assert CheckpointEvalConfig(tasks="a|b|0", checkpoint="c", failure_timeout_s=value).failure_timeout_s == 20.0


@pytest.mark.parametrize("cls, extra", [(EvaluationConfig, {}), (CheckpointEvalConfig, {"checkpoint": "c"})])
def test_tasks_as_a_string_a_list_or_a_file_both_ways(tmp_path, cls, extra):
    listed = tmp_path / "tasks.txt"
    listed.write_text("# the suite\nlighteval|arc:easy|0\nlighteval|piqa|0  # and one more\n")
    expected = ["lighteval|arc:easy|0", "lighteval|piqa|0"]
    for tasks in ("lighteval|arc:easy|0, lighteval|piqa|0", expected, str(listed)):
        assert cls(tasks=tasks, **extra).tasks == expected


@pytest.mark.parametrize("cls, extra", [(EvaluationConfig, {}), (CheckpointEvalConfig, {"checkpoint": "c"})])
def test_same_defaults_and_checks_both_ways(cls, extra):
    config = cls(tasks="a|b|0", **extra)
    assert config.loggers == ["json", "details", "tensorboard", "log"] and config.failure_timeout_s == 1800.0
    for bad, words in [({"tokens_per_batch": 0}, "tokens_per_batch"), ({"max_samples": "5"}, "give an integer"),
                       ({"generation": {"beam": 2}}, "unknown generation parameter"),
                       ({"system_prompt": " "}, "system_prompt")]:  # fmt: skip
        with pytest.raises(ConfigError, match=words.replace("_", "[_-]")):
            cls(tasks="a|b|0", **extra, **bad)


def test_errors_name_the_option_as_each_way_in_writes_it():
    with pytest.raises(ConfigError, match=r"^lighteval_nanotron\.max_samples is 0: .*positive integer"):
        EvaluationConfig(tasks="a|b|0", max_samples=0)
    with pytest.raises(ConfigError, match=r"^--max-samples is 0: .*positive integer"):
        CheckpointEvalConfig(tasks="a|b|0", checkpoint="c", max_samples=0)
    with pytest.raises(ConfigError, match=r"^--data-dir is 3: give"):
        CheckpointEvalConfig(tasks="a|b|0", checkpoint="c", data_dirs=3)


def _number_options(cls: type) -> list[str]:
    hints = typing.get_type_hints(cls)
    return [f.name for f in dataclasses.fields(cls) if float in typing.get_args(hints[f.name]) + (hints[f.name],)]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_number_option_that_is_not_finite_is_refused_both_ways(tmp_path, value, capsys):
    """NaN passes every `<= 0` check: a NaN or infinite timeout, interval or settle time (a watch that
    never took a checkpoint, a deadline that crashed with a traceback) is refused like any bad value."""
    from lighteval_nanotron.cli.main import main
    from lighteval_nanotron.hook.training_config import load_training_config
    from lighteval_nanotron.options.launch import AsyncEvaluationConfig
    from lighteval_nanotron.requests import GenerationParameters

    tasks = {"tasks": "a|b|0"}
    classes = [(EvaluationConfig, tasks), (CheckpointEvalConfig, {**tasks, "checkpoint": "c"})]
    classes.append((AsyncEvaluationConfig, {}))
    for cls, extra in classes:
        assert _number_options(cls), cls
        for name in _number_options(cls):
            with pytest.raises(ConfigError, match=r"(nan|inf).*finite"):
                cls(**extra, **{name: value})
    with pytest.raises(ConfigError, match=r"temperature=(nan|inf)"):
        GenerationParameters(temperature=value)
    for section in ({**tasks, "failure_timeout_s": value}, {**tasks, "asynchronous": {"status_interval_s": value}}):
        with pytest.raises(ConfigError, match=r"(nan|inf).*finite"):
            load_training_config(_section_yaml(tmp_path, section))
    assert main(["eval", str(tmp_path), "--tasks", "a|b|0", "--failure-timeout-s", str(value)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --failure-timeout-s is {value!r}: give a finite number."
    ]


def test_a_key_written_twice_is_refused_by_every_yaml_reader(tmp_path, capsys):
    """PyYAML keeps the last of two equal keys: `max_samples: 100` and, further down, `max_samples: 5`
    evaluated 5 docs a task without a word. Each reader of a YAML a person edits names the key and lines."""
    from lighteval_nanotron.checkpoints.format import read_training_config
    from lighteval_nanotron.cli.main import main
    from lighteval_nanotron.errors import CheckpointError
    from lighteval_nanotron.hook.training_config import load_training_config
    from lighteval_nanotron.lighteval_compat.eval_config import read_lighteval_config
    from lighteval_nanotron.training.config_check import check_training_config

    train = Path(_section_yaml(tmp_path, {"tasks": "a|b|0", "max_samples": 100}))
    text = train.read_text()
    twice_written = "  max_samples: 100\n  eval_at_end: true\n  max_samples: 5\n"
    train.write_text(text.replace("  max_samples: 100\n", twice_written))
    twice = r"the key 'max_samples' is written twice \(lines \d+ and \d+\): keep one"
    for read in (check_training_config, load_training_config):  # `train` and EvaluatingTrainer(config_file)
        with pytest.raises(ConfigError, match=twice):
            read(str(train))
    lighteval_yaml = tmp_path / "lighteval.yaml"
    lighteval_yaml.write_text("tasks:\n  max_samples: 100\n  tasks: lighteval|arc:easy|0\n  max_samples: 5\n")
    with pytest.raises(ConfigError, match=twice):
        read_lighteval_config(str(lighteval_yaml))
    (tmp_path / "config.yaml").write_text("model:\n  dtype: float32\n  dtype: bfloat16\n")
    with pytest.raises(CheckpointError, match="'dtype'.*twice"):
        read_training_config(tmp_path)
    anchors = "base: &base {max_samples: 5}\nsection:\n  <<: *base\n  max_samples: 7\n"  # a merge a key overrides
    (tmp_path / "config.yaml").write_text(anchors)
    assert read_training_config(tmp_path)["section"] == {"max_samples": 7}
    assert main(["eval", str(tmp_path), "--lighteval-config-path", str(lighteval_yaml)]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_a_leading_tilde_is_the_home_folder_in_every_path_option_both_ways(tmp_path, monkeypatch):
    """A YAML value (or `--output-dir=~/out`) reaches the options without a shell: results went to
    `./~/out` (and `./$EVAL_ROOT/out`), and a `~/tasks.txt` was read as a task name, while data dirs and
    held-out paths expanded `~`."""
    from lighteval_nanotron.hook.training_config import load_training_config
    from lighteval_nanotron.options.launch import AsyncEvaluationConfig, SlurmSettings

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("UNSET_ROOT", raising=False)
    (tmp_path / "tasks.txt").write_text("lighteval|arc:easy|0\n")
    asynchronous = {"asynchronous": AsyncEvaluationConfig(cpu=True), "eval_at_end": True}  # for eval_interval_file
    classes = [(EvaluationConfig, {"tasks": "a|b|0", **asynchronous}), (CheckpointEvalConfig, {"tasks": "a|b|0"})]
    classes += [(AsyncEvaluationConfig, {"cpu": True}), (SlurmSettings, {})]
    for cls, extra in classes:
        paths = [f.name for f in dataclasses.fields(cls) if f.metadata.get("path")]
        named_like_paths = [f.name for f in dataclasses.fields(cls) if f.name.endswith(("_dir", "_file", "_tasks"))]
        assert set(named_like_paths) <= set(paths), cls
        for name in paths:  # one at a time: `checkpoint` and `checkpoints_dir` exclude each other
            where = {} if cls is not CheckpointEvalConfig or name.startswith("checkpoint") else {"checkpoint": "c"}
            assert getattr(cls(**extra, **where, **{name: "~/x"}), name) == str(tmp_path / "x"), name
    monkeypatch.setenv("EVAL_ROOT", str(tmp_path / "root"))
    section = {"tasks": "~/tasks.txt", "output_dir": "$EVAL_ROOT/out", "asynchronous": {"cpu": True, "logs_dir": "~/x"}}
    loaded = load_training_config(_section_yaml(tmp_path, {**section, "eval_at_checkpoints": True})).lighteval_nanotron
    assert (loaded.tasks, loaded.output_dir) == (["lighteval|arc:easy|0"], str(tmp_path / "root" / "out"))
    assert loaded.asynchronous.logs_dir == str(tmp_path / "x")
    assert CheckpointEvalConfig(tasks="${HOME}/tasks.txt", checkpoint="c").tasks == ["lighteval|arc:easy|0"]
    with pytest.raises(ConfigError, match=r"^--output-dir .*\$UNSET_ROOT is not set"):
        CheckpointEvalConfig(tasks="a|b|0", checkpoint="c", output_dir="$UNSET_ROOT/out")
    with pytest.raises(ConfigError, match=r"^--custom-tasks is empty"):  # was read as `.`
        CheckpointEvalConfig(tasks="a|b|0", checkpoint="c", custom_tasks=" ")


def test_file_arguments_of_the_other_verbs_read_a_tilde_and_variables_as_the_options(tmp_path, monkeypatch, capsys):
    """`report --output=~/r.png` (no shell expands it) wrote `./~/r.png`; plot and convert alike."""
    from lighteval_nanotron.cli.main import build_parser, main

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("UNSET_ROOT", raising=False)
    parser = build_parser()
    report = parser.parse_args(["report", "$RUNS/a", "--output=~/r.png"])
    assert (report.results, report.output) == ([tmp_path / "runs" / "a"], tmp_path / "r.png")
    assert parser.parse_args(["plot", "x", "--output-dir=~/plots"]).output_dir == tmp_path / "plots"
    assert parser.parse_args(["train", "--config-file=~/train.yaml"]).config_file == str(tmp_path / "train.yaml")
    convert = parser.parse_args(["convert", "hf", "~/hf", "${RUNS}/nanotron"])
    assert (convert.src, convert.dst) == (tmp_path / "hf", tmp_path / "runs" / "nanotron")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(SystemExit):
        main(["report", "x", "--output=$UNSET_ROOT/r.png"])
    assert "argument --output: the path is '$UNSET_ROOT/r.png': $UNSET_ROOT is not set" in capsys.readouterr().err
