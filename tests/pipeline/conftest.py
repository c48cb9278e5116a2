import pytest
from helpers_pipeline import write_datasets

from lighteval_nanotron.tasks.data_dirs import ENV_VAR


@pytest.fixture
def toy_data(tmp_path, monkeypatch):
    """The toy datasets as jsonl in a data dir that the task layer reads."""
    root = write_datasets(tmp_path / "data")
    monkeypatch.setenv(ENV_VAR, str(root))
    return root
