"""The data layer: requests sorted by token length, split into groups, and spread over replicas.

Same names and behaviour as lighteval's `lighteval.data`, with one deliberate difference: requests
are sorted by their TOKEN length (context including the few-shot prefix, plus continuation or
generation budget), never by characters, because truncation and batching are in tokens.

A request's token length comes from `token_length(request)` when given, otherwise from the
request's own `token_length` attribute (the Nanotron engine's tokenized requests have one). A plain
`Doc` has no token length: pass a function that renders and tokenizes it.

The Nanotron engine splits its work over data-parallel replicas with these classes: its scoring
rows in a `LoglikelihoodDataset`, its generation requests in a `GenerativeTaskDatasetNanotron`,
each replica's share from `GenDistributedSampler(split="token_balanced")`.
"""

from __future__ import annotations

import heapq
import logging
import math
from typing import Any, Callable, Iterator, Literal, Sequence

import torch
from torch.utils.data import Dataset, Subset
from torch.utils.data.distributed import DistributedSampler

from lighteval_nanotron.errors import ConfigError

logger = logging.getLogger(__name__)

TokenLength = Callable[[Any], int]


def _length_of(request: Any, token_length: TokenLength | None) -> int:
    if token_length is not None:
        return int(token_length(request))
    length = getattr(request, "token_length", None)
    if length is None:
        raise ConfigError(
            f"Cannot sort a {type(request).__name__} by token length: it has no `token_length` "
            "attribute. Pass `token_length=fn` (render the prompt, tokenize it, return the count)."
        )
    return int(length)


class DynamicBatchDataset(Dataset):
    """Requests sorted by a criterion (longest first), cut into `num_dataset_splits` splits.

    `get_original_order` maps a list aligned with the sorted order back to the input order.
    Sorting is stable: equal criteria keep their input order, so every rank gets the same order.
    """

    def __init__(
        self,
        requests: Sequence[Any],
        num_dataset_splits: int | None,
        token_length: TokenLength | None = None,
    ):
        self._token_length = token_length
        keyed = [(self._sorting_criteria(r), i) for i, r in enumerate(requests)]
        order = [i for _, i in sorted(keyed, key=lambda pair: pair[0])]
        self.sorted_data = [requests[i] for i in order]
        self.original_order = order
        self.total_size = len(self.sorted_data)
        self.num_dataset_splits, self.splits = self.init_split_limits(num_dataset_splits)

    def token_length(self, request: Any) -> int:
        """Token length of one request (see the module docstring)."""
        return _length_of(request, self._token_length)

    def work(self, request: Any) -> int:
        """What one request costs a replica, in tokens (what a token-balanced split balances)."""
        return self.token_length(request)

    def init_split_limits(self, num_dataset_splits: int | None) -> tuple[int, list[tuple[int, int]]]:
        """Equal contiguous splits of the sorted data, as `(start, end)` pairs."""
        n = num_dataset_splits or 1
        if n >= self.total_size:
            if n > 1:
                logger.warning("num_dataset_splits (%d) >= number of requests (%d): using 1 split", n, self.total_size)
            n = 1
        size = math.ceil(self.total_size / n) if self.total_size else 0
        return n, [(k * size, min((k + 1) * size, self.total_size)) for k in range(n)]

    def get_original_order(self, new_arr: Sequence[Any]) -> list[Any]:
        """`new_arr` (aligned with the sorted order) put back in the order the requests came in."""
        if len(new_arr) != self.total_size:
            raise ValueError(
                f"get_original_order got {len(new_arr)} items for {self.total_size} requests: "
                "pass exactly one item per request, in sorted order."
            )
        out: list[Any] = [None] * self.total_size
        for original_index, value in zip(self.original_order, new_arr):
            out[original_index] = value
        return out

    def splits_iterator(self) -> Iterator[Subset]:
        """Each split as a `Subset` of this dataset (nothing for an empty dataset)."""
        if self.total_size == 0:
            return
        for start, end in self.splits:
            yield Subset(self, range(start, end))

    def __getitem__(self, index: int) -> Any:
        return self.sorted_data[index]

    def __len__(self) -> int:
        return self.total_size

    def __iter__(self) -> Iterator[Any]:
        return iter(self.sorted_data)

    def _sorting_criteria(self, request: Any) -> Any:
        raise NotImplementedError


class LoglikelihoodDataset(DynamicBatchDataset):
    """Log-likelihood requests, longest (in tokens) first: the first batch shows the peak memory."""

    def _sorting_criteria(self, request: Any) -> int:
        return -self.token_length(request)


def _generation_key(request: Any) -> tuple:
    stops = getattr(request, "stop_sequences", None) or []
    return (
        getattr(request, "num_samples", 1),
        bool(getattr(request, "use_logits", False)),
        tuple(stops),
        getattr(request, "generation_size", None) or 0,
    )


class GenerativeTaskDataset(DynamicBatchDataset):
    """Generation requests grouped by generation settings, longest first within a group.

    The sort key is `(num_samples, use_logits, stop_sequences, generation_size, -(tokens +
    generation_size))`; each run of equal settings is one split, so a batch never mixes settings.
    """

    def init_split_limits(self, num_dataset_splits: int | None) -> tuple[int, list[tuple[int, int]]]:
        if num_dataset_splits is not None:
            logger.warning(
                "Generative datasets infer their splits from generation settings; ignoring num_dataset_splits"
            )
        if self.total_size == 0:
            return 1, [(0, 0)]
        splits: list[tuple[int, int]] = []
        start = 0
        for i in range(1, self.total_size + 1):
            if i == self.total_size or _generation_key(self.sorted_data[i]) != _generation_key(self.sorted_data[start]):
                splits.append((start, i))
                start = i
        return len(splits), splits

    def _sorting_criteria(self, request: Any) -> tuple:
        key = _generation_key(request)
        return (*key, -(self.token_length(request) + key[-1]))

    def work(self, request: Any) -> int:
        """Context tokens plus the generation budget."""
        return self.token_length(request) + _generation_key(request)[-1]


class GenerativeTaskDatasetNanotron(GenerativeTaskDataset):
    """Like `GenerativeTaskDataset`, but items are `(sorted_index, request)` pairs so a distributed
    consumer can put results back with `get_original_order`."""

    def __getitem__(self, index: int) -> tuple[int, Any]:
        return index, self.sorted_data[index]


def token_balanced_owners(work: Sequence[int], num_replicas: int) -> list[int]:
    """Replica of each item: longest-processing-time first (each item, most work first, to the
    replica with the least work so far; ties: lowest item index, then lowest replica)."""
    order = sorted(range(len(work)), key=lambda i: (-work[i], i))
    heap = [(0, replica) for replica in range(num_replicas)]
    owner = [0] * len(work)
    for i in order:
        load, replica = heapq.heappop(heap)
        owner[i] = replica
        heapq.heappush(heap, (load + work[i], replica))
    return owner


class GenDistributedSampler(DistributedSampler):
    """A `DistributedSampler` that pads with copies of the LAST index (not the first ones), so the
    padding of length-sorted data adds only short requests; `drop_last` drops the tail instead.

    `split="token_balanced"` (for a `DynamicBatchDataset`, with `shuffle=False`) gives instead each
    request to exactly one replica, balancing their tokens (`token_balanced_owners` over
    `dataset.work`, in the requests' input order), or as `assignment` says (the replica of each
    request, input order); this replica's dataset indices come in the dataset's sorted order, with
    no padding, so no request is evaluated twice. The default is the strided split above."""

    def __init__(
        self,
        dataset: Dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        split: Literal["strided", "token_balanced"] = "strided",
        assignment: Sequence[int] | None = None,
    ):
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last)
        if split not in ("strided", "token_balanced"):
            raise ConfigError(f"GenDistributedSampler split must be 'strided' or 'token_balanced', got {split!r}.")
        self.split = split
        self._mine: list[int] | None = None
        if split == "token_balanced":
            if shuffle or not isinstance(dataset, DynamicBatchDataset):
                raise ConfigError(
                    "split='token_balanced' needs a DynamicBatchDataset (sorted requests) and shuffle=False."
                )
            self._mine = self._balanced_indices(dataset, assignment)
            self.num_samples = len(self._mine)
        elif assignment is not None:
            raise ConfigError("GenDistributedSampler assignment= is used by split='token_balanced' only.")

    def _balanced_indices(self, dataset: DynamicBatchDataset, assignment: Sequence[int] | None) -> list[int]:
        if assignment is None:
            work = dataset.get_original_order([dataset.work(request) for request in dataset.sorted_data])
            assignment = token_balanced_owners(work, self.num_replicas)
        if len(assignment) != len(dataset):
            raise ConfigError(f"assignment has {len(assignment)} replicas for {len(dataset)} requests.")
        return [position for position, index in enumerate(dataset.original_order) if assignment[index] == self.rank]

    def __iter__(self) -> Iterator[int]:
        if self._mine is not None:
            return iter(self._mine)
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            indices = torch.randperm(len(self.dataset), generator=generator).tolist()
        else:
            indices = list(range(len(self.dataset)))
        if self.drop_last:
            indices = indices[: self.total_size]
        elif indices:
            indices += [indices[-1]] * (self.total_size - len(indices))
        return iter(indices[self.rank : self.total_size : self.num_replicas])
