"""The table of lighteval's eval options: every field mapped, noted or refused, for both ways in."""

import pytest
import yaml

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.lighteval_compat.eval_config import EVAL
from lighteval_nanotron.lighteval_compat.fields import FIELDS, OPTIONS, map_lighteval_options
from lighteval_nanotron.lighteval_compat.nanotron_section import HOOK

# lighteval 0.10's examples/nanotron/lighteval_config_override_template.yaml, fields as shipped
LIGHTEVAL_TEMPLATE = """
batch_size: 8
generation: null
logging:
  output_dir: "outputs"
  save_details: false
  push_to_hub: false
  public_run: false
  results_org: null
  tensorboard_metric_prefix: "eval"
parallelism:
  dp: 1
  pp: 2
  pp_engine: 1f1b
  tp: 2
  tp_linear_async_communication: false
  tp_mode: ALL_REDUCE
tasks:
  dataset_loading_processes: 8
  max_samples: 10
  multichoice_continuations_start_space: null
  num_fewshot_seeds: null
  tasks: lighteval|gsm8k|5|1
"""


def _map(**section):
    return map_lighteval_options(section, "test")


@pytest.mark.parametrize("consumer", [EVAL, HOOK], ids=["eval", "hook"])
def test_every_option_is_taken_or_explained_by_each_way_in(consumer):
    assert OPTIONS <= consumer.takes | set(consumer.no_use)


def test_lighteval_template_maps_onto_eval_options():
    mapped = map_lighteval_options(yaml.safe_load(LIGHTEVAL_TEMPLATE), "test")
    assert EVAL.select(mapped, "test") == {
        "output_dir": "outputs",
        "tensorboard_prefix": "eval",
        "tp": 2,
        "pp": 2,
        "dp": 1,
        "max_samples": 10,
        "tasks": "lighteval|gsm8k|5|1",
        "loggers": ["json"],  # save_details false, push_to_tensorboard unset (false)
    }
    assert any(note.startswith("batch_size (") for note in mapped.notes)
    assert any(note.startswith("parallelism.pp_engine (") for note in mapped.notes)
    assert not any("dataset_loading_processes" in note or "tp_mode" in note for note in mapped.notes)  # defaults


def _lighteval_eval_config_module():
    """The installed lighteval's module of its eval YAML's dataclasses (`LightEvalConfig`, ...): its config
    package up to 0.10, its Nanotron model module from 0.11 on (the same fields)."""
    pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")
    import importlib.util

    from lighteval_nanotron.cpu import enable_cpu_support

    enable_cpu_support(trainer=False)  # lighteval's Nanotron module imports Nanotron's models
    if importlib.util.find_spec("lighteval.config") is not None:
        return importlib.import_module("lighteval.config.lighteval_config")
    try:
        return importlib.import_module("lighteval.models.nanotron.nanotron_model")
    except ImportError as error:  # lighteval 0.11 imports every extended task there (ifbench needs `emoji`)
        pytest.skip(f"the installed lighteval's Nanotron module does not import here: {error}")


def test_lighteval_parsed_config_maps_as_its_yaml(tmp_path):
    """lighteval's own parser accepts the template, and its parsed dataclasses map as the YAML does."""
    LightEvalConfig = _lighteval_eval_config_module().LightEvalConfig
    from nanotron.config import get_config_from_file

    path = tmp_path / "eval.yaml"
    path.write_text(LIGHTEVAL_TEMPLATE)
    parsed = map_lighteval_options(get_config_from_file(str(path), config_class=LightEvalConfig), "test").options
    assert parsed.pop("pairwise_tokenization") is False  # filled in by lighteval's default
    assert parsed == map_lighteval_options(yaml.safe_load(LIGHTEVAL_TEMPLATE), "test").options


def test_loggers_follow_lighteval_defaults_and_switches():
    assert _map().options["loggers"] == ["json", "details"] and _map().defaulted == {"loggers"}
    mapped = _map(logging={"save_details": False, "push_to_tensorboard": True})
    assert mapped.options["loggers"] == ["json", "tensorboard"] and not mapped.defaulted
    assert any("not pushed to the Hub" in note for note in mapped.notes)
    assert _map(wandb={"wandb_project": "p"}).options["loggers"] == ["json", "details", "wandb"]


@pytest.mark.parametrize(
    "section, expected",
    [
        ({"sampler": "top_k", "temperature": 0.7, "top_k": 20, "n_samples": 4, "seed": 3},
         {"temperature": 0.7, "top_k": 20, "num_samples": 4, "seed": 3}),
        ({"sampler": "TOP_P", "top_p": 0.8}, {"temperature": 1.0, "top_p": 0.8, "seed": 42}),
        ({"sampler": "top_k"}, {"temperature": 1.0, "top_k": 50, "seed": 42}),
        ({"sampler": "basic", "n_samples": 2}, {"temperature": 1.0, "num_samples": 2, "seed": 42}),
    ],
)  # fmt: skip
def test_sampling_fields_map_onto_generation_parameters(section, expected):
    assert _map(generation=section).options["generation"] == expected


@pytest.mark.parametrize(
    "tasks, expected",
    [
        ({"multichoice_continuations_start_space": True}, True),
        ({"multichoice_continuations_start_space": False}, False),
        ({"no_multichoice_continuations_start_space": True}, False),  # Nanotron's spelling of False
        ({"no_multichoice_continuations_start_space": False}, None),
        ({"multichoice_continuations_start_space": None}, None),
    ],
)
def test_continuations_start_space(tasks, expected):
    assert _map(tasks=tasks).options.get("multichoice_continuations_start_space") is expected


def test_greedy_generation_sets_no_sampling():
    mapped = _map(generation={"sampler": "greedy", "temperature": 0.5, "seed": 1, "use_cache": True, "eos": "</s>"})
    assert "generation" not in mapped.options
    assert {"generation.temperature (greedy generation)", "generation.seed (greedy generation)"} <= set(mapped.notes)
    assert any(note.startswith("generation.eos (") for note in mapped.notes)


REFUSED = {
    "push_to_hub": ({"logging": {"push_to_hub": True}}, "logging.push_to_hub=True cannot be honoured"),
    "push_results_to_hub": ({"logging": {"push_results_to_hub": True}}, "logging.push_results_to_hub"),
    "push_details_to_hub": ({"logging": {"push_details_to_hub": True}}, "logging.push_details_to_hub"),
    "results_path_template": ({"logging": {"results_path_template": "{output_dir}/x"}}, "--model-name"),
    "num_fewshot_seeds": ({"tasks": {"num_fewshot_seeds": 3}}, "tasks.num_fewshot_seeds=3"),
    "start space both ways": (
        {"tasks": {"multichoice_continuations_start_space": True, "no_multichoice_continuations_start_space": True}},
        "both set multichoice_continuations_start_space",
    ),
    "expert_parallel": ({"parallelism": {"expert_parallel_size": 2}}, "expert parallelism is not supported"),
    "context_parallel": ({"parallelism": {"context_parallel_size": 2}}, "context parallelism is not supported"),
    "eval_config_override": ({"eval_config_override": "x.yaml"}, "write the override's fields"),
    "unknown field": ({"tasks": {"task": "x"}}, "unknown field tasks.task: did you mean tasks.tasks?"),
    "unknown section": ({"loging": {}}, "unknown field loging: did you mean logging?"),
    "unknown field far from any": ({"tasks": {"zzz": 1}}, "unknown field tasks.zzz: remove it (known: see docs/eval"),
    "two output dirs": (
        {"output_dir": "a", "logging": {"output_dir": "b"}}, "output_dir='a' and logging.output_dir='b' both set"
    ),
    "generation per task": ({"generation": {"lighteval|gsm8k|0": {"sampler": "top_k"}}}, "generation per task"),
    "bad sampler": ({"generation": {"sampler": "beam"}}, "generation.sampler='beam' is not a sampler"),
    "temperature without sampler": ({"generation": {"temperature": 0.7}}, "set without generation.sampler"),
    "greedy samples": ({"generation": {"sampler": "greedy", "n_samples": 4}}, "same sample each time"),
    "basic with temperature": ({"generation": {"sampler": "basic", "temperature": 0.5}}, "basic sampler ignores it"),
    "top_k with top_p": ({"generation": {"sampler": "top_k", "top_p": 0.9}}, "top_k sampler ignores it"),
    # a string switch is truthy: "false" turned details or W&B on, and stripped every choice's leading space
    "details as a string": ({"logging": {"save_details": "false"}}, "save_details is 'false': give true or false"),
    "wandb as a string": ({"upload_to_wandb": "false"}, "upload_to_wandb is 'false'"),
    "tensorboard as 0": ({"logging": {"push_to_tensorboard": 0}}, "logging.push_to_tensorboard is 0"),
    "start space as a string": (
        {"tasks": {"no_multichoice_continuations_start_space": "false"}},
        "tasks.no_multichoice_continuations_start_space is 'false': give true or false",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED))
def test_fields_that_cannot_be_honoured_are_refused_by_name(case):
    section, words = REFUSED[case]
    with pytest.raises(ConfigError, match="^test: ") as error:
        map_lighteval_options(section, "test")
    assert words in str(error.value) and "\n" not in str(error.value)


def test_values_lighteval_accepts_as_defaults_are_not_refused():
    section = {
        "logging": {"push_to_hub": False, "push_results_to_hub": False},
        "tasks": {"num_fewshot_seeds": 1, "multichoice_continuations_start_space": None},
        "parallelism": {"expert_parallel_size": 1},
    }
    assert map_lighteval_options(section, "test").notes == []


def test_table_covers_every_field_of_lighteval_and_nanotron_configs():
    """Each field of the installed lighteval's LightEvalConfig and Nanotron's (installed and main) is in the table."""
    import dataclasses

    lighteval_side = _lighteval_eval_config_module()
    from nanotron.config import lighteval_config as nanotron_side
    from nanotron.config.parallelism_config import ParallelismArgs

    sections = {
        "logging": "LightEvalLoggingArgs",
        "tasks": "LightEvalTasksArgs",
        "wandb": "LightEvalWandbLoggerConfig",
        "slurm": "LightEvalSlurm",  # current Nanotron's
    }
    names = set()
    for module in (lighteval_side, nanotron_side):
        top = {f.name for f in dataclasses.fields(module.LightEvalConfig)}
        names |= top - {*sections, "parallelism", "generation"}
        for section, class_name in sections.items():
            if hasattr(module, class_name):
                names |= {f"{section}.{f.name}" for f in dataclasses.fields(getattr(module, class_name))}
        names |= {f"generation.{name}" for name in module.GenerationArgs.__annotations__}
    names |= {f"parallelism.{f.name}" for f in dataclasses.fields(ParallelismArgs)}
    assert names - set(FIELDS) == set()


def test_every_mapped_option_is_an_option_of_a_way_in():
    """The table's `option=` names are options declared once: `EvaluationOptions`' (both ways in)
    or one way in's own; each way in takes exactly its config's fields."""
    import dataclasses

    from lighteval_nanotron.options import EvaluationOptions
    from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig
    from lighteval_nanotron.options.hook import EvaluationConfig

    def names(cls):
        return {field.name for field in dataclasses.fields(cls)}

    shared = names(EvaluationOptions)
    for option in OPTIONS:
        assert option in shared or option in names(EvaluationConfig) ^ names(CheckpointEvalConfig), option
    assert (EVAL.takes, HOOK.takes) == (names(CheckpointEvalConfig), names(EvaluationConfig))
