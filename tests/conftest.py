"""Every test's tier (tests/helpers/tiers.py: unit, distributed, e2e), held by the unit tier's guard;
process-wide settings a test may change in-process go back to their defaults after it: the data dirs
(`eval --data-dir`, the hook's `data_dirs` and `set_data_dirs` set them for the whole process, by
design), so a later test reads `$LIGHTEVAL_NANOTRON_DATA_DIRS` as its fixtures set it."""

import contextlib

import pytest

from lighteval_nanotron.tasks import set_data_dirs
from tests.helpers.tiers import guard_unit_test, mark_tiers

with contextlib.suppress(ImportError):  # GitPython, which lighteval imports, runs `git version` on first import:
    import git  # noqa: F401  once here, not inside whichever unit test imports lighteval first


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
def data_dirs_from_the_environment():
    yield
    set_data_dirs(None)
