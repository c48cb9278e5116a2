"""A several-node world of at most 8 ranks under current Nanotron without the CPU patches (a GPU
`eval`): refused at setup with one message, since main's ParallelContext would take it for one node."""

import pytest

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.parallel.distributed import check_nodes_fit_nanotron
from tests.helpers.nanotron_versions import ON_MAIN


@pytest.mark.parametrize("world, local", [(4, 2), (8, 4), (2, 1)])
def test_small_world_over_nodes(monkeypatch, world, local):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local))
    if not ON_MAIN:
        check_nodes_fit_nanotron(world)  # 0.4's ParallelContext does not group ranks by node
        return
    with pytest.raises(ConfigError, match="current Nanotron"):
        check_nodes_fit_nanotron(world)


@pytest.mark.parametrize("world, local", [(4, 4), (16, 8)])
def test_one_node_or_a_large_world_starts(monkeypatch, world, local):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local))
    check_nodes_fit_nanotron(world)
