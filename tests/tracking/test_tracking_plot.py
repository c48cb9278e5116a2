import json

import numpy as np
from helpers_tracking import TASK_A, TASK_B, make_result
from matplotlib.image import imread

from lighteval_nanotron.cli.plot_cmd import main as plot_main
from lighteval_nanotron.tracking import ResultsJsonLogger
from lighteval_nanotron.tracking.plot import load_history, plot_results


def _write_run(output_dir, model_name="toy-run", steps=(10, 20, 30)):
    logger = ResultsJsonLogger(output_dir)
    for index, step in enumerate(steps):
        result = make_result(step=step, acc=0.25 + 0.25 * index)
        result.model_name = model_name
        logger.log(result)


def test_history_collects_values_and_errors_by_step(tmp_path):
    _write_run(tmp_path, steps=(30, 10, 20))
    _write_run(tmp_path, model_name="other-run", steps=(10,))
    history = load_history(tmp_path)
    assert sorted(history) == ["other-run", "toy-run"]
    points = history["toy-run"][TASK_A]["acc"]
    assert [p.step for p in points] == [10, 20, 30]
    assert [p.value for p in points] == [0.5, 0.75, 0.25]  # written in the order 30, 10, 20
    assert {p.stderr for p in points} == {0.1}
    assert "acc_stderr" not in history["toy-run"][TASK_A]


def test_a_step_with_a_second_results_file_is_one_point_the_latest_files(tmp_path):
    """A copy left a second, later results file in a step's folder: the step is one point, the later
    file's value, as `report` and the writer read a step (plot drew both points at that step)."""
    _write_run(tmp_path, steps=(10, 20))
    (first,) = (tmp_path / "results" / "toy-run" / "20").glob("results_*.json")
    later = json.loads(first.read_text())
    later["results"][TASK_A]["acc"] = 0.95
    (first.parent / "results_2999-01-01T00-00-00.000000.json").write_text(json.dumps(later))
    points = load_history(tmp_path)["toy-run"][TASK_A]["acc"]
    assert [(p.step, p.value) for p in points] == [(10, 0.25), (20, 0.95)]


def test_one_png_per_task_with_a_panel_per_metric(tmp_path):
    _write_run(tmp_path)
    paths = plot_results(tmp_path / "results" / "toy-run", tmp_path / "plots")
    assert [p.name for p in paths] == ["custom_toy_mc_0.png", "custom_toy_ppl_0.png", "all.png"]
    single = imread(paths[0])
    assert single.shape == (300, 400, 4)  # one 4x3-inch panel at 100 dpi, RGBA
    assert np.ptp(single[..., :3]) > 0.5  # something was drawn
    assert imread(paths[2]).shape == (300, 800, 4)  # "all": acc and ppl side by side


def test_grid_and_filters(tmp_path):
    _write_run(tmp_path)
    (path,) = plot_results(tmp_path, tmp_path / "plots", grid=True, metrics=["acc"])
    assert path.name == "metrics_grid.png"
    assert imread(path).shape == (300, 800, 4)  # TASK_A/acc and all/acc in a 2x1 grid
    (only,) = plot_results(tmp_path, tmp_path / "plots2", tasks=[TASK_B])
    assert only.name == "custom_toy_ppl_0.png"


def test_plot_command(tmp_path, capsys):
    _write_run(tmp_path)
    assert plot_main(["plot", str(tmp_path), "--grid"]) == 0
    written = capsys.readouterr().out.split()
    assert written == [str(tmp_path / "plots" / "metrics_grid.png")]
    assert imread(written[0]).shape[2] == 4

    assert plot_main(["plot", str(tmp_path / "missing")]) == 2


def test_a_misspelt_task_or_metric_exits_2_listing_what_the_results_hold(tmp_path, capsys):
    _write_run(tmp_path)
    assert plot_main(["plot", str(tmp_path), "--tasks", "custom|toy_mc:|0"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: no results for task(s) custom|toy_mc:|0: the results hold ")
    assert TASK_A in error and TASK_B in error and error.count("\n") == 1
    assert plot_main(["plot", str(tmp_path), "--metrics", "acc,accuracy"]) == 2
    assert "no results for metric(s) accuracy: the results hold acc, ppl" in capsys.readouterr().err
    assert not (tmp_path / "plots").exists()


def test_lighteval_nanotron_results_are_one_curve_per_run(tmp_path):
    """lighteval's Nanotron runs: `results/<run>/<step>/results_<date>.json`, model `<run>/<step>`."""
    for step, acc in ((10, 0.25), (20, 0.5)):
        folder = tmp_path / "results" / "my-run" / str(step)
        folder.mkdir(parents=True)
        content = {"config_general": {"model_name": f"my-run/{step}"}, "results": {TASK_A: {"acc": acc}}}
        (folder / "results_2024-01-01T00-00-00.json").write_text(json.dumps(content))
    history = load_history(tmp_path)
    assert list(history) == ["my-run"]
    assert [(p.step, p.value) for p in history["my-run"][TASK_A]["acc"]] == [(10, 0.25), (20, 0.5)]
