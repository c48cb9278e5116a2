"""The per-doc comparison of two runs (`analysis.paired`) and the signal across runs
(`analysis.across_runs`) on synthetic data with known answers."""

import math
import statistics
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from lighteval_nanotron.analysis.across_runs import recommendation, runs_signal, signal_to_noise
from lighteval_nanotron.analysis.history import RunHistory
from lighteval_nanotron.analysis.paired import (
    A_AHEAD,
    MDE80,
    NOT_COMPARABLE,
    WITHIN_NOISE,
    adjusted,
    compare_docs,
    docs_for_effect,
    holm,
    paired_test,
    task_verdict,
)

DOCS = 100


def docs(rng, shift=0.0, spread=1.0):
    """Two runs' per-doc values: each doc's own difficulty (shared) plus each run's own noise."""
    difficulty = rng.normal(0, 3.0, DOCS)
    return difficulty + rng.normal(0, spread, DOCS) + shift, difficulty + rng.normal(0, spread, DOCS)


def test_no_difference_gives_p_below_5_percent_in_5_percent_of_trials():
    rng = np.random.default_rng(1)
    rejections = sum(paired_test(*docs(rng), True, seed=trial)["p_value"] < 0.05 for trial in range(1000))
    assert 30 <= rejections <= 70  # 5% +- 2 points


def test_a_difference_of_one_mde_is_found_with_80_percent_power():
    """The true difference is the MDE80 of the true standard error: found ~80% of the time."""
    rng = np.random.default_rng(7)
    true_stderr = math.sqrt(2) / math.sqrt(DOCS)  # per-doc differences: std sqrt(1 + 1)
    effect = MDE80 * true_stderr
    found = sum(paired_test(*docs(rng, shift=effect), True, seed=trial)["p_value"] < 0.05 for trial in range(500))
    assert 0.70 <= found / 500 <= 0.90


def test_paired_numbers_by_hand():
    a, b = np.array([3.0, 1.0, 2.0, 5.0] * 5), np.array([2.0, 1.0, 3.0, 1.0] * 5)
    found = paired_test(a, b, higher_is_better=True)
    d = a - b
    assert found["difference"] == pytest.approx(d.mean())
    assert found["stderr"] == pytest.approx(statistics.stdev(d) / math.sqrt(len(d)))
    assert found["mde"] == pytest.approx(2.8016 * found["stderr"], rel=1e-4)
    assert (found["wins"], found["losses"], found["ties"]) == (10, 5, 5)
    assert found["low"] <= found["difference"] <= found["high"]
    lower = paired_test(a, b, higher_is_better=False)
    assert (lower["wins"], lower["losses"]) == (5, 10)  # a higher value is worse


def test_same_seed_same_interval_and_docs_for_an_effect():
    rng = np.random.default_rng(1)
    a, b = docs(rng, shift=0.1)
    assert paired_test(a, b, True, seed=3) == paired_test(a, b, True, seed=3)
    found = paired_test(a, b, True)
    needed = docs_for_effect(DOCS, found["mde"], effect=found["mde"] / 2)
    assert needed == pytest.approx(4 * DOCS, abs=1)  # half the MDE: four times the docs


def test_other_docs_are_compared_unpaired_and_too_few_not_at_all():
    a = {f"a{i}": float(i % 7) for i in range(40)}
    b = {f"b{i}": float(i % 5) for i in range(30)}
    found = compare_docs("t", "acc", a, b, higher_is_better=True)
    assert found.method == "unpaired" and found.shared == 0 and found.wins is None
    assert found.difference == pytest.approx(np.mean(list(a.values())) - np.mean(list(b.values())))
    few = compare_docs("t", "acc", dict(list(a.items())[:10]), b, higher_is_better=True)
    assert isinstance(few, str) and "fewer than 20 docs" in few


def test_holm_adjustment_by_hand():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def with_noise(comparisons, **noise):
    """The comparisons with these noises beyond the docs, adjusted over their table."""
    return adjusted([replace(c, **noise) for c in comparisons])


def test_the_runs_test_by_hand():
    """t = difference / sqrt(se^2 + ckpt^2 + 2 seed^2); normal without seeds, else Student's t with
    the Welch-Satterthwaite degrees of freedom."""
    rng = np.random.default_rng(3)
    a, b = docs(rng, shift=0.5)
    ids = [str(i) for i in range(DOCS)]
    (c,) = [compare_docs("t", "acc", dict(zip(ids, a)), dict(zip(ids, b)), higher_is_better=True)]
    no_seeds = replace(c, checkpoint_noise=0.1)
    total = c.stderr**2 + 0.1**2
    assert no_seeds.p_runs == pytest.approx(2 * stats.norm.sf(abs(c.difference) / math.sqrt(total)))
    seeded = replace(c, checkpoint_noise=0.1, seed_noise=0.2, seed_runs=3)
    total += 2 * 0.2**2
    freedom = total**2 / ((2 * 0.2**2) ** 2 / 2)
    assert seeded.p_runs == pytest.approx(2 * stats.t.sf(abs(c.difference) / math.sqrt(total), freedom))
    assert replace(c, checkpoint_noise=None).p_runs is None


def test_verdicts_need_every_noise_and_agreeing_metrics():
    rng = np.random.default_rng(3)
    a, b = docs(rng, shift=1.0)
    ids = [str(i) for i in range(DOCS)]
    bpb = compare_docs("t", "gold_bpb", dict(zip(ids, b)), dict(zip(ids, a)), higher_is_better=False)
    acc = compare_docs("t", "acc", dict(zip(ids, a)), dict(zip(ids, b)), higher_is_better=True)
    quiet = with_noise([bpb, acc], checkpoint_noise=0.01)
    assert task_verdict(quiet, []) == (A_AHEAD, "gold_bpb, acc")  # lower bpb in A, higher acc in A
    assert task_verdict(with_noise(quiet, checkpoint_noise=1.0), [])[0] == WITHIN_NOISE  # the checkpoints'
    assert task_verdict(with_noise(quiet, checkpoint_noise=None), []) == (
        WITHIN_NOISE,
        "the noise beyond the docs is unmeasured for gold_bpb, acc (fewer than 3 evaluations, or 2 seed runs "
        "with these steps)",
    )
    seeds_apart = with_noise(quiet, seed_noise=abs(bpb.difference), seed_runs=4)
    assert seeds_apart[0].noise == pytest.approx(math.sqrt(0.01**2 + 2 * bpb.difference**2))
    assert task_verdict(seeds_apart, [])[0] == WITHIN_NOISE  # seeds of one config differ as much
    flipped = with_noise([quiet[0], replace(quiet[1], difference=-quiet[1].difference)])
    assert task_verdict(flipped, [])[0] == NOT_COMPARABLE
    assert task_verdict([], ["acc: fewer than 20 docs"]) == (NOT_COMPARABLE, "acc: fewer than 20 docs")


def history(name, values_by_step):
    run = RunHistory(name)
    for step, (acc, bpb) in values_by_step.items():
        run.add(step, {"results": {"lighteval|piqa|0": {"acc": acc, "gold_bpb": bpb}}})
    return run


def test_signal_to_noise_across_runs_is_the_published_formula_by_hand():
    """Heineman et al. 2025: m_j = mean of run j's last 5; signal = max |m_j - m_k| / mean m;
    noise = population std / mean of the pooled last-5 values; SNR = signal / noise."""
    last5 = {
        "a": [0.50, 0.52, 0.51, 0.53, 0.52],
        "b": [0.55, 0.57, 0.56, 0.56, 0.58],
        "c": [0.49, 0.50, 0.48, 0.51, 0.50],
    }
    runs = [
        history(name, {s: (v, 3.0 - v) for s, v in zip(range(100, 800, 100), [0.3, 0.4, *vals])})
        for name, vals in last5.items()
    ]
    (acc, bpb) = runs_signal(runs, last=5)
    means = [sum(v) / 5 for v in last5.values()]
    pooled = [x for v in last5.values() for x in v]
    signal = max(abs(x - y) for x in means for y in means) / (sum(means) / 3)
    noise = statistics.pstdev(pooled) / (sum(pooled) / 15)
    assert (acc.signal, acc.noise, acc.snr) == pytest.approx((signal, noise, signal / noise))
    assert acc.scores == pytest.approx(dict(zip(last5, means)))
    assert acc.separates and acc.step == 700
    assert bpb.snr == pytest.approx(signal_to_noise([3.0 - m for m in means], [3.0 - x for x in pooled])[2])
    assert "Separate these runs: lighteval|piqa|0" in recommendation([acc, bpb])


def test_signal_across_runs_is_undefined_for_a_mean_at_zero_and_needs_last_evaluations():
    assert signal_to_noise([-0.1, 0.1], [-0.1, 0.1, -0.1, 0.1]) == (None, None, None)
    short = [history(name, {100: (0.5, 3.0), 200: (0.6, 2.9)}) for name in ("a", "b")]
    assert runs_signal(short, last=5) == []
    with pytest.raises(ValueError, match="at least 2"):
        runs_signal(short, last=1)
