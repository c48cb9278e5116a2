"""`PromptManager`: turns a `Doc` (with its few-shot examples) into the context the model sees."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.requests import Doc

PART_SEPARATOR = "\n\n"


def _strip_instruction(query: str, instruction: str | None) -> str:
    """Prompt functions often put the instruction at the start of the query; it is shown once."""
    if instruction is not None and query.startswith(instruction):
        return query[len(instruction) :].strip()
    return query


def _first_gold(doc: Doc) -> str:
    golds = doc.get_golds()
    return str(golds[0]) if golds else ""


def _sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()


class PromptManager:
    """Renders prompts as plain text (the default for base models) or with a chat template."""

    def __init__(self, use_chat_template: bool = False, tokenizer: Any = None, system_prompt: str | None = None):
        self.use_chat_template = use_chat_template
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        if use_chat_template:
            self._check_chat_template()

    def _check_chat_template(self) -> None:
        """At setup, not at the first prompt: a tokenizer without a chat template cannot render one."""
        if self.tokenizer is None or not hasattr(self.tokenizer, "apply_chat_template"):
            raise ConfigError(
                "use_chat_template=True needs a tokenizer with apply_chat_template (a transformers "
                "tokenizer with a chat template); pass one, or set use_chat_template=False."
            )
        if not getattr(self.tokenizer, "chat_template", None):
            name = getattr(self.tokenizer, "name_or_path", "") or type(self.tokenizer).__name__
            raise ConfigError(
                f"A chat template was asked for, but the tokenizer {name!r} has none (no chat_template in its "
                "tokenizer_config.json / chat_template.jinja): use a tokenizer that ships one (an instruct "
                "model's), or evaluate without the chat template."
            )

    def settings(self) -> dict[str, Any]:
        """How prompts are rendered and tokenized, for the results' `config_general` and a step's
        identity (the template and the tokenizer's vocabulary by their SHA-256)."""
        template = self.tokenizer.chat_template if self.use_chat_template else None
        vocabulary = getattr(self.tokenizer, "get_vocab", None)
        return {
            "use_chat_template": self.use_chat_template,
            "system_prompt": self.system_prompt,
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None,
            "tokenizer_sha256": _sha256(sorted(vocabulary().items())) if vocabulary is not None else None,
        }

    def prepare_prompt(self, doc: Doc) -> str:
        """The full context for `doc`: chat-templated if asked, else plain text."""
        if self.use_chat_template:
            return self.tokenizer.apply_chat_template(self._messages(doc), tokenize=False, add_generation_prompt=True)
        return self._plain_text(doc)

    def prepare_prompt_api(self, doc: Doc) -> list[dict[str, str]]:
        """The chat messages for `doc` (system, few-shot user/assistant turns, then the query)."""
        return self._messages(doc)

    def _plain_text(self, doc: Doc) -> str:
        parts: list[str] = []
        if self.system_prompt is not None:
            parts.append(self.system_prompt)
        if doc.instruction is not None:
            parts.append(doc.instruction)
        for example in doc.fewshot_samples:
            query = _strip_instruction(example.query, example.instruction)
            parts.append(query + " " + _first_gold(example).strip())
        parts.append(_strip_instruction(doc.query, doc.instruction))
        return PART_SEPARATOR.join(parts)

    def _messages(self, doc: Doc) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = []
        if self.system_prompt is not None:
            messages.append({"role": "system", "content": self.system_prompt})
        instruction_pending = doc.instruction is not None
        for example in doc.fewshot_samples:
            query = _strip_instruction(example.query, example.instruction)
            if instruction_pending:
                query = doc.instruction + query
                instruction_pending = False
            messages.append({"role": "user", "content": query})
            messages.append({"role": "assistant", "content": _first_gold(example)})
        query = _strip_instruction(doc.query, doc.instruction)
        if instruction_pending:
            query = doc.instruction + query
        messages.append({"role": "user", "content": query})
        return messages
