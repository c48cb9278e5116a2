"""The hook's `use_chat_template` and `system_prompt`: prompts rendered with the training tokenizer's
chat template during training, the settings recorded in the results."""

import json
import shutil

import yaml

from tests.checkpoint_eval.details_check import read_details
from tests.checkpoint_eval.test_chat_template_eval import TEMPLATE
from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import MODEL_NAME, TOKENIZER, results_files, train_worker, write_config

TASK = "lighteval|arc:easy|1"
SYSTEM = "You are evaluated during training."


def test_hook_renders_prompts_with_the_chat_template(tmp_path):
    tokenizer = tmp_path / "chat_tokenizer"
    shutil.copytree(TOKENIZER, tokenizer)
    settings = json.loads((tokenizer / "tokenizer_config.json").read_text())
    (tokenizer / "tokenizer_config.json").write_text(json.dumps({**settings, "chat_template": TEMPLATE}))
    section = {"tasks": TASK, "max_samples": 2, "use_chat_template": True, "system_prompt": SYSTEM}
    config = write_config(tmp_path, train_steps=2, section=section)
    content = yaml.safe_load(config.read_text())
    content["tokenizer"]["tokenizer_name_or_path"] = str(tokenizer)
    config.write_text(yaml.safe_dump(content))

    (report,) = run_distributed(train_worker, 1, str(config), timeout=240)
    assert report["failures"] == []
    (results,) = results_files(tmp_path / "eval").values()
    general = results["config_general"]
    assert (general["use_chat_template"], general["system_prompt"]) == (True, SYSTEM)
    (step_dir,) = (tmp_path / "eval" / "details" / MODEL_NAME).iterdir()
    rows = read_details(step_dir)[TASK]
    assert len(rows) == 2
    for row in rows:
        assert row["full_prompt"].startswith(f"<|system|>{SYSTEM}\n<|user|>Question: ")
        assert row["full_prompt"].count("<|assistant|>") == 2 and row["full_prompt"].endswith("<|assistant|>")
