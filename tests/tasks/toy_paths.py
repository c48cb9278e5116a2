"""Where the task-layer tests' toy custom tasks and their local data dir live."""

from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"
TOY_TASKS = DATA_DIR / "toy_tasks.py"
