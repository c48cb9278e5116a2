"""Where a tokenizer is looked for: a folder first; a Hub name in the local cache, else on the Hub
only when it answers. A source that resolves nowhere ends at once with one `ConfigError` naming
the setting to fix, never after the Hub client's retries (about a minute without a network)."""

import socket
import time
from pathlib import Path

import pytest
from huggingface_hub import constants

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.setup.tokenizer import load_tokenizer

TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "configs" / "tiny_tokenizer"
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


@pytest.fixture
def unreachable_hub(monkeypatch, tmp_path):
    """A Hub endpoint nobody listens on, an empty Hugging Face cache, no offline variable."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf_cache"))
    for name in OFFLINE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def _fails_fast(source: str, match: str, **kwargs) -> str:
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=match) as info:
        load_tokenizer(source, **kwargs)
    assert time.perf_counter() - started < 10  # at most one connection attempt, no retries
    return str(info.value)


def test_a_missing_folder_fails_at_once_naming_the_setting(unreachable_hub, tmp_path):
    message = _fails_fast(str(tmp_path / "gone"), "The tokenizer folder .*gone does not exist", setting="--tokenizer")
    assert message.endswith("Set --tokenizer to a folder that holds tokenizer.json / tokenizer_config.json.")
    _fails_fast("./tokenizers/gone", r"tokenizers/gone \(.*tokenizers/gone\) does not exist")


def test_a_name_neither_here_nor_cached_fails_at_once_when_the_hub_does_not_answer(unreachable_hub, tmp_path):
    message = _fails_fast(
        "configs/tiny_tokenizer", "is not a folder here .* nor a tokenizer in the Hugging Face cache, and the Hub "
        "cannot be reached", setting="tokenizer.tokenizer_name_or_path in the training config",
    )  # fmt: skip
    assert str(tmp_path / "configs" / "tiny_tokenizer") in message
    assert "Set tokenizer.tokenizer_name_or_path in the training config to a folder" in message


def test_offline_mode_asks_nothing_of_the_hub(unreachable_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _fails_fast("HuggingFaceTB/no-such-tokenizer", "nor a tokenizer in the Hugging Face cache, and HF_HUB_OFFLINE "
                "forbids the Hub.*or unset HF_HUB_OFFLINE")  # fmt: skip


def test_a_folder_is_read_without_the_hub(unreachable_hub):
    assert len(load_tokenizer(str(TOKENIZER_DIR)).encode("hello world")) > 1


@pytest.mark.parametrize(
    "name, content",
    [("tokenizer.json", "{}"), ("tokenizer.json", "[]"), ("tokenizer_config.json", '{"tokenizer_class": 5}')],
)
def test_tokenizer_files_of_valid_json_and_another_structure_are_named(unreachable_hub, tmp_path, name, content):
    """transformers' KeyError / TypeError / AttributeError on such files ended as 'loading the tokenizer failed:
    world rank 0: KeyError: 'added_tokens' (at transformers/...)': neither the folder nor the fix."""
    import shutil

    folder = tmp_path / "tok"
    shutil.copytree(TOKENIZER_DIR, folder)
    (folder / name).write_text(content)
    message = _fails_fast(str(folder), "Cannot load the tokenizer .*tok' \\((KeyError|TypeError|AttributeError): ")
    assert message.endswith("Set --tokenizer to a folder that holds tokenizer.json / tokenizer_config.json (offline, "
                            "Hub names only work when cached).")  # fmt: skip
