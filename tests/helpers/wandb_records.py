"""Read a W&B offline run file (`run-<id>.wandb`): its history rows and declared metrics.

The file is a LevelDB-style log: a 7-byte header (`:W&B`, magic, version), then 32 KiB blocks of
records, each with a 7-byte header (checksum, length, type: full / first / middle / last), whose
payloads are serialized `wandb_internal_pb2.Record` messages.
"""

import json
import struct
from pathlib import Path
from typing import Any, Dict, List, Tuple

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> List[bytes]:
    assert data[:4] == b":W&B", "not a W&B run file"
    payloads, pending, offset = [], b"", HEADER
    while offset + HEADER <= len(data):
        room = BLOCK - offset % BLOCK
        if room < HEADER:
            offset += room
            continue
        _, length, kind = struct.unpack("<IHB", data[offset : offset + HEADER])
        chunk = data[offset + HEADER : offset + HEADER + length]
        offset += HEADER + length
        if kind == 0 and length == 0:  # zero padding at the end of a block
            offset += BLOCK - offset % BLOCK if offset % BLOCK else 0
            continue
        if kind == FULL:
            payloads.append(chunk)
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            payloads.append(pending + chunk)
    return payloads


def read_run(path: Path) -> Tuple[List[Dict[str, Any]], Dict[str, str], Dict[str, Any]]:
    """(history rows as `{key: value}`, `{metric or glob: step_metric}` of every `define_metric`,
    the run's project / name / group / tags)."""
    from wandb.proto import wandb_internal_pb2 as pb

    rows, step_metrics, run = [], {}, {}
    for payload in _payloads(path.read_bytes()):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            rows.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
        elif kind == "metric":
            name = record.metric.name or record.metric.glob_name
            step_metrics[name] = record.metric.step_metric
        elif kind == "run":
            info = record.run
            run = {"project": info.project, "name": info.display_name, "group": info.run_group, "tags": list(info.tags)}
    return rows, step_metrics, run
