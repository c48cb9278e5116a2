"""The tokenizer, loaded one way for the hook and for `eval`.

A folder whose `tokenizer.json` transformers would use unchanged is read with the `tokenizers`
library alone (`models.fast_tokenizer`: the same ids, without importing transformers); any other
source, and every chat template, goes through `transformers.AutoTokenizer`. The hook's source is
the training config's `tokenizer.tokenizer_name_or_path`; `eval`'s is found from the checkpoint
(`checkpoint_eval.loading.tokenizer_source`).
"""

from __future__ import annotations

import logging
from typing import Any

from lighteval_nanotron.errors import ConfigError

logger = logging.getLogger(__name__)


def load_tokenizer(
    source: str, chat_template: bool = False, revision: str | None = None, setting: str = "--tokenizer"
) -> Any:
    """The tokenizer of a folder or a Hub name (offline: one already in the local cache).
    `setting` names what the user sets to point at another one (in the error's fix)."""
    from lighteval_nanotron.models.fast_tokenizer import FastTokenizer, TransformersNeeded

    if not chat_template:  # a chat template is rendered by transformers
        try:
            return FastTokenizer.from_folder(source)
        except TransformersNeeded as reason:
            logger.debug("Tokenizer %s loaded with transformers: %s.", source, reason)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source, revision=revision)
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"Cannot load the tokenizer {source!r} ({type(error).__name__}: {error}). Set {setting} to a folder "
            "that holds tokenizer.json / tokenizer_config.json (offline, Hub names only work when cached)."
        ) from error


def training_tokenizer(training_config: Any, chat_template: bool = False) -> Any:
    """The training config's tokenizer (`tokenizer.tokenizer_name_or_path`, at `tokenizer_revision`)."""
    args = training_config.tokenizer
    if args is None or not args.tokenizer_name_or_path:
        raise ConfigError(
            "lighteval_nanotron needs a tokenizer: set tokenizer.tokenizer_name_or_path in the training config "
            "(a Hub name or a folder with tokenizer files)."
        )
    return load_tokenizer(
        str(args.tokenizer_name_or_path),
        chat_template,
        revision=args.tokenizer_revision,
        setting="tokenizer.tokenizer_name_or_path in the training config",
    )
