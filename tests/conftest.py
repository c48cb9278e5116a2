"""Process-wide settings a test may change in-process go back to their defaults after it: the data
dirs (`eval --data-dir`, the hook's `data_dirs` and `set_data_dirs` set them for the whole process,
by design), so a later test reads `$LIGHTEVAL_NANOTRON_DATA_DIRS` as its fixtures set it."""

import pytest

from lighteval_nanotron.tasks import set_data_dirs


@pytest.fixture(autouse=True)
def data_dirs_from_the_environment():
    yield
    set_data_dirs(None)
