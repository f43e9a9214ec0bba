"""The local backend's class: a study's cells as local submitit jobs on this machine,
`local.max_parallel` at a time (`scaling.backends.local.round`); `submit` returns when all have
ended. Its jobs are submitit controller processes, live while that very process is.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from foundation.config import Problems
from foundation.process.proc import kill_tree
from scaling.backends.executors import Executor
from scaling.backends.local.devices import local_gpus, visible_gpu_indices
from scaling.backends.local.round import LocalRound
from scaling.backends.queued import QUEUED, cmdline, interrupt, queued_pid, submit_pids
from scaling.spec.grid import Cell
from scaling.spec.resources import check_local_devices
from scaling.state.files.job_records import JobRecord
from scaling.warmstart.server import warm_python

__all__ = ["LocalExecutor", "LOCAL_CONTROLLER", "LOCAL_ROUND_S", "check_no_oversubscription"]

# a local round's warm-server imports and half a status poll (`scaling.costs.wall`)
LOCAL_ROUND_S = 10.0
LOCAL_CONTROLLER = "submitit.local._local"  # a local job's controller process runs this module
_NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def _controller_alive(pid: str, folder: Path) -> bool:
    """True if `pid` is still this study's submitit controller (not a recycled pid)."""
    line = cmdline(pid)
    return LOCAL_CONTROLLER in line and str(folder) in line


def check_no_oversubscription(spec: Any, num_devices: int, p: Problems) -> None:
    """On a machine with GPUs every rank of a cell gets its own, whatever the precision: two
    ranks on one device fail at NCCL's first collective ("duplicate GPU")."""
    if num_devices == 0:
        return
    for size in spec.sizes:
        world = spec.parallel_for(size).world_size
        if world > num_devices:
            p.add(
                f"study.parallel: size {size} needs {world} GPUs (TP x PP x DP) and this "
                f"machine shows {num_devices} (CUDA_VISIBLE_DEVICES); lower data_parallel or "
                "run it on Slurm"
            )


class LocalExecutor(Executor):
    """Local submitit jobs, `local.max_parallel` at a time; `submit` returns when all ended.

    A cell with `depends_on` (a WSD branch) starts once that cell has ended completed or
    diverged (a branch whose checkpoint the divergence preceded still trains; one without it
    fails with the reason); if it failed or was cancelled, the branch is not started and its
    run ends FAILED with "parent <id> failed". The cells are forked from one warm process that
    has imported torch, megatron-core and mlflow (`scaling.warmstart.server`), each still its own
    submitit job.

    Interrupted (KeyboardInterrupt, or `stop` set from another thread), it starts nothing
    more, cancels the running jobs, waits for them and ends their runs KILLED, then raises
    KeyboardInterrupt; cells it never started keep their `queued-` records for the caller
    (`scaling.driver.round_driver`) to restore.

    Its jobs: each is a submitit controller process (or a `submit` still waiting for a free
    slot, `scaling.backends.queued`); SIGINT stops one as submitit cancels it, a kill ends one
    that ignores it. A recorded pid is taken as the job only while it is still that process
    (`queued_pid`, `_controller_alive`): a reused pid is neither live nor signalled.
    """

    name = "local"
    label = "local"
    runs_cells_in_submit = True
    per_round_overhead_s = LOCAL_ROUND_S
    measures_inference_here = True  # its cells' device is this machine's
    parallel_probes = False  # probes sharing this machine would time each other

    @classmethod
    def live(cls, records: dict[str, JobRecord], submitit_folder: Path) -> dict[str, str]:
        live = {}
        for cid, rec in records.items():
            if rec.job_id.startswith(QUEUED):  # waiting in a local `submit` for a free slot
                if queued_pid(rec.job_id) is not None:
                    live[cid] = "PENDING"
            elif _controller_alive(rec.job_id, submitit_folder):
                live[cid] = "RUNNING"
        return live

    @staticmethod
    def _pids(records: dict[str, JobRecord]) -> set[str]:
        """The controllers' pids; a cell queued in a `submit` is stopped by interrupting that
        submit (it cancels its jobs), unless it is this very process. Only pids that are still
        the recorded process."""
        controllers = {
            rec.job_id
            for rec in records.values()
            if not rec.job_id.startswith(QUEUED) and LOCAL_CONTROLLER in cmdline(rec.job_id)
        }
        return (controllers | submit_pids(records)) - {str(os.getpid())}

    @classmethod
    def stop(cls, records: dict[str, JobRecord]) -> None:
        interrupt(cls._pids(records))

    @classmethod
    def kill(cls, records: dict[str, JobRecord]) -> None:
        # a controller started where SIGINT is ignored (a background shell) never stops on it:
        # kill it and its tasks
        for pid in cls._pids(records):
            kill_tree(int(pid))

    @property
    def slots(self) -> int:
        return self.study.spec.local.max_parallel

    def check_environment(self) -> None:
        p = Problems()
        check_local_devices(self.study.spec, p)
        if self.study.spec.precision != "bf16":  # bf16: check_local_devices counted them
            check_no_oversubscription(self.study.spec, len(visible_gpu_indices()), p)
        p.raise_if_any()

    @property
    def slots_note(self) -> str:
        return f"{self.slots} cell(s) at a time (local.max_parallel)"

    @property
    def uses_gpus(self) -> bool:
        """This machine shows an NVIDIA device to the study."""
        if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
            return False
        return _NVIDIA_GPUS.is_dir() and any(_NVIDIA_GPUS.iterdir())

    @property
    def planned_precision(self) -> str:
        return "fp32"  # planned without asking CUDA (seconds to import torch)

    @property
    def probe_timeout_s(self) -> float:
        return 60.0 * self.study.spec.local.timeout_min

    def probe_executor(self, folder: Path, world_size: int, python: str | None) -> Any:
        import submitit  # lazy: only a pilot submits

        executor = submitit.LocalExecutor(folder=folder / self.name, python=python)
        executor.update_parameters(
            tasks_per_node=world_size,
            timeout_min=self.study.spec.local.timeout_min,
            **local_gpus(world_size),
        )
        return executor

    def submit(
        self,
        cells: list[Cell],
        records: dict[str, JobRecord],
        states: dict[str, str] | None = None,
        say: Callable[[str], None] = lambda _msg: None,
        stop: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Run `cells`; cell id → the submitit job of each cell that ran (see the class)."""
        with warm_python(self.log_folder) as python:
            where = (self.study, self.name, self.log_folder, self.job)
            return LocalRound(*where, cells, records, say, states, python, stop).run()
