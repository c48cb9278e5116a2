"""The tokenizer, loaded one way for the hook and for `eval`.

A folder whose `tokenizer.json` transformers would use unchanged is read with the `tokenizers`
library alone (`models.fast_tokenizer`: the same ids, without importing transformers); any other
source, and every chat template, goes through `transformers.AutoTokenizer`. The hook's source is
the training config's `tokenizer.tokenizer_name_or_path`; `eval`'s is found from the checkpoint
(`checkpoint_eval.loading.tokenizer_source`).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.tasks.hub_access import MODELS_OFFLINE_VARS, hub_unreachable, offline_mode

logger = logging.getLogger(__name__)

HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")
"""A Hub repository id: `name` or `owner/name`."""
TOKENIZER_FILE = "tokenizer_config.json"
"""A file every tokenizer repository of the Hub has (looked up in the local cache)."""


def check_tokenizer_source(source: str, revision: str | None = None, setting: str = "--tokenizer") -> bool:
    """Whether `source` is read from the Hugging Face cache only (a Hub name cached there); False
    for a folder, or a Hub name to ask the Hub for. Raises ConfigError at once when it is neither a
    folder nor a Hub name that can be had (no retries against an unreachable Hub)."""
    if Path(source).expanduser().is_dir():
        return False
    fix = f"Set {setting} to a folder that holds tokenizer.json / tokenizer_config.json"
    if not HUB_NAME.match(source):
        absolute = Path(source).expanduser().resolve()
        shown = source if str(absolute) == source else f"{source} ({absolute})"
        raise ConfigError(f"The tokenizer folder {shown} does not exist. {fix}.")
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(source, TOKENIZER_FILE, revision=revision), str):
        return True
    where = (
        f"{source!r} is not a folder here ({Path(source).resolve()} does not exist) nor a tokenizer in the "
        "Hugging Face cache"
    )
    offline = offline_mode(MODELS_OFFLINE_VARS)
    if offline:
        raise ConfigError(f"The tokenizer {where}, and {offline} forbids the Hub. {fix} (or unset {offline}).")
    unreachable = hub_unreachable()
    if unreachable:
        raise ConfigError(f"The tokenizer {where}, and the Hub cannot be reached ({unreachable}). {fix}.")
    return False


def load_tokenizer(
    source: str, chat_template: bool = False, revision: str | None = None, setting: str = "--tokenizer"
) -> Any:
    """The tokenizer of a folder or a Hub name. A folder is looked for first; a Hub name is read
    from the local cache when it is there, and asked of the Hub only when the Hub answers (else one
    `ConfigError` at once). `setting` names what the user sets to point at another one (in the
    error's fix)."""
    from lighteval_nanotron.models.fast_tokenizer import FastTokenizer, TransformersNeeded

    cached = check_tokenizer_source(source, revision, setting)
    if not chat_template:  # a chat template is rendered by transformers
        try:
            return FastTokenizer.from_folder(source)
        except TransformersNeeded as reason:
            logger.debug("Tokenizer %s loaded with transformers: %s.", source, reason)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source, revision=revision, local_files_only=cached)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:  # the last three: files of valid
        # JSON and another structure (`tokenizer.json` holding `{}`, `tokenizer_class: 5`), deep in transformers
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
