"""The threads of a CPU rank (`parallel.cpu_threads`): OMP_NUM_THREADS when set, else the
process's cores shared by the machine's ranks, applied to torch in a fresh process; PASSIVE
waiting unless chosen, set by the entry points before torch is imported."""

import os
import subprocess
import sys
from pathlib import Path

from lighteval_nanotron.parallel.cpu_threads import cpu_threads, prefer_passive_wait

CORES = len(os.sched_getaffinity(0))


def test_omp_num_threads_wins():
    assert cpu_threads({"OMP_NUM_THREADS": "3", "LOCAL_WORLD_SIZE": "2"}) == 3


def test_cores_of_the_affinity_shared_by_the_local_ranks():
    assert cpu_threads({}) == CORES
    assert cpu_threads({"LOCAL_WORLD_SIZE": str(CORES)}) == 1
    assert cpu_threads({"LOCAL_WORLD_SIZE": str(4 * CORES)}) == 1  # never 0


def _torch_threads_in_fresh_process(env: dict) -> tuple[int, int]:
    code = (
        "import torch\n"
        "from lighteval_nanotron.parallel.cpu_threads import configure_cpu_threads\n"
        "n = configure_cpu_threads()\n"
        "assert n == torch.get_num_threads(), (n, torch.get_num_threads())\n"
        "print(torch.get_num_threads(), torch.get_num_interop_threads())\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "LOCAL_WORLD_SIZE")}
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=120, check=True
    )
    intra, inter = out.stdout.split()
    return int(intra), int(inter)


def test_configure_applies_the_count_to_torch():
    # no OMP_NUM_THREADS: a lone rank gets the cores of its affinity, one inter-op thread
    assert _torch_threads_in_fresh_process({"LOCAL_WORLD_SIZE": "1"}) == (CORES, 1)


def test_passive_wait_unless_the_user_chose():
    environ = {}
    assert prefer_passive_wait(environ) and environ == {"OMP_WAIT_POLICY": "PASSIVE"}
    chosen = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert not prefer_passive_wait(chosen) and chosen == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_the_entry_points_set_the_wait_policy_before_torch_is_imported():
    """libgomp reads OMP_WAIT_POLICY once, when torch is imported: the command line's module and
    the benchmark's module must not import torch before `run` / a rank sets it."""
    code = (
        "import sys\n"
        "sys.path.insert(0, 'benchmarks')\n"
        "import lighteval_nanotron.cli.main, lighteval_nanotron.parallel.cpu_threads, bench_eval\n"
        "print('torch' in sys.modules)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-c", code]
    out = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[-1] == "False"
