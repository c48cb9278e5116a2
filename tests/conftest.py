"""The suite's own home and caches, every test's tier, and process-wide settings reset after each test.

- Before anything imports `datasets`, `huggingface_hub` or `transformers` (they read their cache
  folders once, at import), HOME and the XDG folders point into one temporary folder for this run,
  and every variable that can point a cache elsewhere is removed (`CACHE_VARIABLES`): every cache
  (Hugging Face hub and datasets, transformers, torch, triton, matplotlib, W&B, nltk) lands there,
  for this process and every process it starts (torchrun, multiprocessing, Slurm jobs inherit the
  environment). The suite neither reads what the machine's caches hold (a `datasets` cache entry
  of the same name as a benchmark) nor writes into them. The folder is removed when the run ends.
- Every test gets one tier (`tests/helpers/tiers.py`: unit, distributed, e2e), derived from what
  its code reaches; a unit test that starts a process or a process group fails (its guard).
- After each test the environment is as it was before it (a command run in-process sets variables
  for the processes it starts), and the data dirs (`eval --data-dir`, the hook's `data_dirs` and
  `set_data_dirs` set them for the whole process, by design) are at their default, so a later test
  reads `$LIGHTEVAL_NANOTRON_DATA_DIRS` as its fixtures set it.
"""

import contextlib
import os
import shutil
import sys
import tempfile

CACHE_VARIABLES = (
    "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE", "HF_ASSETS_CACHE", "HF_XET_CACHE",
    "HF_MODULES_CACHE", "HF_TOKEN_PATH", "TRANSFORMERS_CACHE", "PYTORCH_TRANSFORMERS_CACHE",
    "PYTORCH_PRETRAINED_BERT_CACHE", "TORCH_HOME", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_HOME",
    "TRITON_CACHE_DIR", "MPLCONFIGDIR",
    "WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR", "NLTK_DATA",
)  # fmt: skip
"""Variables that point a cache or a configuration folder away from HOME / XDG: removed, so that
each library takes its default under the run's HOME."""
XDG_FOLDERS = {"XDG_CACHE_HOME": ".cache", "XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share",
               "XDG_STATE_HOME": ".local/state"}  # fmt: skip

_imported = [name for name in ("datasets", "huggingface_hub", "transformers") if name in sys.modules]
assert not _imported, f"{_imported} imported before tests/conftest.py set the run's caches (they keep the machine's)"
RUN_HOME = tempfile.mkdtemp(prefix="lighteval-nanotron-tests-")
for _name in CACHE_VARIABLES:
    os.environ.pop(_name, None)
os.environ.update(HOME=RUN_HOME, **{name: os.path.join(RUN_HOME, folder) for name, folder in XDG_FOLDERS.items()})

import pytest  # noqa: E402

from lighteval_nanotron.tasks import set_data_dirs  # noqa: E402
from tests.helpers.tiers import guard_unit_test, mark_tiers  # noqa: E402

# Libraries that start a process on their first import, once here, not inside whichever unit test
# imports them first: GitPython (lighteval imports it) runs `git version`; matplotlib's font manager
# runs `fc-list` to build its font cache (in the run's fresh HOME).
with contextlib.suppress(ImportError):
    import git  # noqa: F401
with contextlib.suppress(ImportError):
    import matplotlib.font_manager  # noqa: F401


def pytest_collection_modifyitems(items: list) -> None:
    mark_tiers(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    with guard_unit_test(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    with guard_unit_test(item):
        return (yield)


@pytest.fixture(autouse=True)
def process_settings_restored():
    """After each test: the environment as it was before it (a command run in-process sets variables
    for the processes it starts, e.g. `PYTHONWARNINGS=ignore` when not verbose, which later tests'
    subprocesses would inherit) and the data dirs at their default."""
    environment = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(environment)
    set_data_dirs(None)


def pytest_unconfigure(config):
    shutil.rmtree(RUN_HOME, ignore_errors=True)
