"""`eval --use-chat-template --system-prompt`: prompts rendered with the tokenizer's chat template
(the details show them), results that differ from plain prompts, the settings in config_general."""

import hashlib
import json
import shutil
from pathlib import Path

from tests.checkpoint_eval.details_check import read_details
from tests.checkpoint_eval.test_lighteval_config_eval import _eval, _results
from tests.helpers.tiny_model import tiny_tokenizer

TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SYSTEM = "Answer the science question."
TASK = "lighteval|arc:easy|1"


def _with_chat_template(checkpoint: Path, folder: Path) -> Path:
    copy = folder / "chat_checkpoint"
    shutil.copytree(checkpoint, copy)
    config_file = copy / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "chat_template": TEMPLATE}))
    return copy


def _details(output_dir: Path) -> list[dict]:
    return read_details(next((output_dir / "details").rglob("details_*.parquet")).parent)[TASK]


def test_chat_template_renders_prompts_and_changes_results(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    chat_checkpoint = _with_chat_template(checkpoint, tmp_path)
    common = ["--tasks", TASK, "--max-samples", "3", "--loggers", "json", "details"]
    chat = _eval(str(chat_checkpoint), *common, "--use-chat-template", "--system-prompt", SYSTEM,
                 "--output-dir", str(tmp_path / "chat"))  # fmt: skip
    assert chat.returncode == 0, chat.stderr[-3000:]
    plain = _eval(str(chat_checkpoint), *common, "--output-dir", str(tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr[-3000:]

    chat_rows, plain_rows = _details(tmp_path / "chat"), _details(tmp_path / "plain")
    for row in chat_rows:  # system turn, the few-shot example as a user/assistant pair, then the question
        prompt = row["full_prompt"]
        assert prompt.startswith(f"<|system|>{SYSTEM}\n<|user|>Question: ")
        assert prompt.count("<|user|>") == 2 and prompt.count("<|assistant|>") == 2
        assert prompt.endswith("\nAnswer:\n<|assistant|>")
        # the model scored the templated prompt (the details' prompt is what it saw)
        scored = row["input_tokens"] + row["cont_tokens"][0]
        assert scored == tiny_tokenizer()(prompt + row["choices"][0])["input_ids"]
    assert all("<|" not in row["full_prompt"] for row in plain_rows)
    assert all(c["logprobs"] != p["logprobs"] for c, p in zip(chat_rows, plain_rows, strict=True))

    chat_general = _results(tmp_path / "chat")["config_general"]
    plain_general = _results(tmp_path / "plain")["config_general"]
    assert chat_general["use_chat_template"] is True and chat_general["system_prompt"] == SYSTEM
    assert chat_general["chat_template_sha256"] == hashlib.sha256(TEMPLATE.encode()).hexdigest()
    assert (plain_general["use_chat_template"], plain_general["system_prompt"]) == (False, None)
