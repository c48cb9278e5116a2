import json

import pyarrow.parquet as pq
from helpers_tracking import TASK_A, make_result

from lighteval_nanotron.tracking import DetailsParquetLogger, date_id, details_path


def test_details_parquet_is_readable_with_one_row_per_sample(tmp_path):
    result = make_result(step=20)
    DetailsParquetLogger(tmp_path).log(result)

    date = date_id(result.start_time)
    path = tmp_path / "details" / "toy-run" / "20" / date / f"details_{TASK_A}_{date}.parquet"
    assert path == details_path(tmp_path, result, TASK_A)
    table = pq.read_table(path)
    assert table.num_rows == 4
    rows = table.to_pylist()
    assert [row["doc_id"] for row in rows] == ["0", "1", "2", "3"]
    first = rows[0]
    assert first["full_prompt"] == "Question 0?"
    assert first["choices"] == [" yes", " no"]
    assert first["gold"] == [" yes"]
    assert first["gold_index"] == [0]
    assert first["logprobs"] == [-0.5, -1.5]
    assert first["example"] == "Question 0?"
    assert first["cont_tokens"] == [[4], [5]]
    assert first["input_tokens"] == [1, 2, 3]
    assert first["truncated"] == [0] and first["padded"] == [1]
    assert first["unconditioned_logprobs"] is None
    # numeric metrics stay numeric; structured per-sample items are kept as JSON text
    assert [row["metrics"]["acc"] for row in rows] == [1.0, 0.0, 1.0, 0.0]
    assert json.loads(first["metrics"]["ppl_items"]) == [-1.25, 3]


def test_rewriting_a_step_replaces_its_details_whole(tmp_path):
    logger = DetailsParquetLogger(tmp_path)
    logger.log(make_result(step=20))
    logger.log(make_result(step=20))
    date = date_id(make_result().start_time)
    folder = tmp_path / "details" / "toy-run" / "20" / date
    assert [p.name for p in folder.iterdir()] == [f"details_{TASK_A}_{date}.parquet"]
    assert pq.read_table(folder / f"details_{TASK_A}_{date}.parquet").num_rows == 4
