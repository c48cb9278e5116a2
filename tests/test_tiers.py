"""The test tiers (tests/helpers/tiers.py): derived from what a test's code reaches, and held by the unit
tier's guard. The sample code is compiled here from text, so that this module itself reaches nothing."""

import importlib
import multiprocessing
import subprocess
import threading
from pathlib import Path

import pytest
import torch.distributed as dist

from tests.helpers.tiers import TESTS, _Walker, guard_unit_test, mark_tiers

SAMPLES = """
def pure():
    return sorted([2, 1])

def gloo_ranks():
    return run_distributed(pure, 2)

def through_a_test_side_helper():
    return gloo_ranks()

def imports_inside():
    import subprocess
    return subprocess

def a_launched_job():
    return Followed

def trains():
    from lighteval_nanotron.hook.trainer import EvaluatingTrainer
    return EvaluatingTrainer
"""


def _samples() -> dict:
    namespace = {
        "run_distributed": importlib.import_module("tests.helpers.distributed").run_distributed,
        "Followed": importlib.import_module("tests.helpers.processes").Followed,
    }
    exec(compile(SAMPLES, __file__, "exec"), namespace)
    return namespace


def test_the_tier_is_derived_from_what_the_code_reaches():
    samples, walker = _samples(), _Walker()
    expected = {
        "pure": "unit",
        "gloo_ranks": "distributed",
        "through_a_test_side_helper": "distributed",
        "imports_inside": "distributed",
        "a_launched_job": "e2e",
        "trains": "e2e",
    }
    assert {name: walker.function(samples[name]) for name in expected} == expected
    convert_tiny = importlib.import_module("tests.checkpoint_eval.tiny_hf").convert_tiny  # @reaches("distributed")
    tiny_checkpoint = importlib.import_module("tests.helpers.tiny_model").tiny_checkpoint  # run_distributed inside
    assert walker.function(convert_tiny) == walker.function(tiny_checkpoint) == "distributed"


class _Collected:
    """What `mark_tiers` reads of a collected test that is not a function (so only its folder and marks count)."""

    def __init__(self, folder: Path, *written: str) -> None:
        self.path, self.nodeid, self._fixtureinfo = folder / "test_x.py", f"{folder.name}/test_x.py::t", None
        self.marks = [getattr(pytest.mark, name).mark for name in written]

    def iter_markers(self):
        return iter(self.marks)

    def add_marker(self, name: str) -> None:
        self.marks.append(getattr(pytest.mark, name).mark)


def test_each_test_gets_one_tier_and_a_written_mark_only_where_the_derivation_cannot_see():
    plain, in_e2e, declared = _Collected(TESTS), _Collected(TESTS / "e2e"), _Collected(TESTS, "distributed")
    mark_tiers([plain, in_e2e, declared])
    assert [[mark.name for mark in item.marks] for item in (plain, in_e2e, declared)] == [
        ["unit"],
        ["e2e"],
        ["distributed"],
    ]
    for redundant in (_Collected(TESTS, "unit"), _Collected(TESTS / "e2e", "distributed")):
        with pytest.raises(pytest.UsageError, match=r"remove its tier mark\(s\) \['(unit|distributed)'\]"):
            mark_tiers([redundant])


def _process_group() -> None:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def _swallowed_on_a_thread() -> None:
    def swallowing():  # library code that catches everything
        try:
            subprocess.run(["true"])
        except BaseException:
            pass

    thread = threading.Thread(target=swallowing)
    thread.start()
    thread.join()


# The ways to start are parameters, not names in the test's code: this test itself stays in the unit tier.
@pytest.mark.parametrize(
    ("start", "what"),
    [
        (lambda: subprocess.run(["true"]), "a subprocess"),
        (lambda: multiprocessing.get_context("spawn").Process(target=print).start(), "a multiprocessing process"),
        (_process_group, "a process group"),
        (_swallowed_on_a_thread, "a subprocess"),
    ],
    ids=["subprocess", "multiprocessing", "process-group", "on-a-thread"],
)
def test_a_unit_test_that_starts_a_process_or_a_process_group_fails_naming_its_tier(request, start, what):
    assert request.node.get_closest_marker("unit") is not None
    with pytest.raises(pytest.fail.Exception, match=f"started {what}.*mark the test `@pytest.mark.distributed`"):
        with guard_unit_test(request.node):
            start()
    assert not dist.is_initialized()
