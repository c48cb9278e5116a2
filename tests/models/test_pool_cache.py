"""The decoding pool's cache: rows that leave are replaced by the last running rows, every
remaining row keeps its own keys, values and length."""

import torch

from lighteval_nanotron.models.engine.decode_attention import PoolCache


def _filled_cache(rows: int, capacity: int = 6) -> PoolCache:
    cache = PoolCache(slots=rows + 2, capacity=capacity, lengths=torch.arange(1, rows + 1))
    for layer in (0, 3):
        keys, values = cache.store(layer, torch.zeros(1, 2, 1, 4))
        for row in range(rows):
            filled = row + 1
            keys[row, :, :filled] = 100 * layer + row
            values[row, :, :filled] = -(100 * layer + row)
    return cache


def test_dropped_rows_are_replaced_by_the_last_running_rows():
    cache = _filled_cache(5)
    order = cache.drop_rows([0, 2, 4])
    assert order == [3, 1]
    assert cache.lengths.tolist() == [4, 2]
    for layer in (0, 3):
        for new_row, old_row in enumerate(order):
            filled = old_row + 1
            assert torch.all(cache.keys[layer][new_row, :, :filled] == 100 * layer + old_row)
            assert torch.all(cache.values[layer][new_row, :, :filled] == -(100 * layer + old_row))


def test_dropping_the_last_rows_moves_nothing_and_new_rows_start_at_zero():
    cache = _filled_cache(4)
    before = cache.keys[0].clone()
    assert cache.drop_rows([2, 3]) == [0, 1]
    assert torch.equal(cache.keys[0], before)
    assert cache.drop_rows([0, 1]) == []
    assert cache.rows == 0
    fresh = PoolCache(slots=3, capacity=5, lengths=torch.zeros(0, dtype=torch.long))
    keys, values = fresh.store(1, torch.zeros(1, 2, 1, 4))
    assert keys.shape == (3, 2, 5, 4) and not keys.any() and not values.any()  # masked positions stay finite
