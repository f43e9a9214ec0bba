"""The Slurm backend's class: its cells as submitit job arrays, queued within the cluster's
limits (`scaling.backends.slurm.submit`, `scaling.backends.slurm.limits`); `submit` returns once
every cell is queued. Its jobs' state is one `squeue` (`scaling.backends.slurm.queue`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from foundation import contract
from foundation.config import ConfigError, Problems
from scaling.backends.executors import Executor
from scaling.backends.queued import QUEUED, interrupt, submit_pids, waiting_live
from scaling.backends.slurm.limits import SlurmLimits, num_arrays, read_limits
from scaling.backends.slurm.parameters import slurm_parameters
from scaling.backends.slurm.queue import scancel, squeue_states, waiting_reason
from scaling.backends.slurm.submit import ArraySubmitter, Group
from scaling.spec.grid import Cell
from scaling.spec.resolved import ResolvedStudy
from scaling.spec.resources import check_slurm, check_slurm_gpus
from scaling.state.files.job_records import JobRecord

__all__ = ["SlurmExecutor", "SLURM_POLL_S"]

SLURM_POLL_S = 60.0  # sites ask scripts to poll slurmctld at most about once a minute


class SlurmExecutor(Executor):
    """Slurm job arrays through submitit; `submit` returns once they are queued.

    Its jobs: one `squeue` says which are live, `scancel` stops them
    (`scaling.backends.slurm.queue`). A cell that waits in a `scaling submit` for room under the
    cluster's limits has the record `queued-<pid of that submit>`
    (`scaling.backends.slurm.submit`): it is live (PENDING) while that process is, and stopping
    it interrupts that process (which then leaves it pending), as for a local cell waiting for a
    slot (`scaling.backends.queued`).
    """

    name = "slurm"
    label = "Slurm"
    waits_for_cluster_room = True
    runs_cells_in_submit = False
    parallel_probes = True  # each job has its own nodes
    per_round_overhead_s = 0.0  # the queue wait is the cluster's, not counted
    default_poll_s = SLURM_POLL_S

    @classmethod
    def live(cls, records: dict[str, JobRecord], submitit_folder: Path) -> dict[str, str]:
        held = {cid: r for cid, r in records.items() if r.job_id.startswith(QUEUED)}
        cell_of = {r.job_id: cid for cid, r in records.items() if cid not in held}
        live = {cell_of[jid]: state for jid, state in squeue_states(list(cell_of)).items()}
        live.update(waiting_live(held))
        return live

    @classmethod
    def stop(cls, records: dict[str, JobRecord]) -> None:
        held = {cid: r for cid, r in records.items() if r.job_id.startswith(QUEUED)}
        interrupt(submit_pids(held))
        scancel([r.job_id for cid, r in records.items() if cid not in held])

    @classmethod
    def kill(cls, records: dict[str, JobRecord]) -> None:
        """Nothing more: Slurm ends a cancelled job itself (KillWait, then SIGKILL)."""

    @classmethod
    def waiting_reason(cls, folder: Path) -> str:
        return waiting_reason(folder)

    def __init__(self, study: ResolvedStudy) -> None:
        super().__init__(study)
        self._limits: SlurmLimits | None = None
        self.last_submitter: ArraySubmitter | None = None  # the latest submit's, for tests

    @property
    def slots(self) -> int:
        return self.study.spec.slurm.array_parallelism

    def check_environment(self) -> None:
        check_slurm(self.study.spec.slurm.partition)
        if self.study.spec.slurm.gpus_per_node > 0:
            p = Problems()
            check_slurm_gpus(self.study.spec, p)
            p.raise_if_any()

    def submit(
        self,
        cells: list[Cell],
        records: dict[str, JobRecord],
        states: dict[str, str] | None = None,
        say: Callable[[str], None] = lambda _msg: None,
        stop: threading.Event | None = None,
    ) -> dict[str, Any]:
        """One job array per world size; then, per parent, its branches as an array that
        depends on the parent's own job (`afterok`, `--kill-on-invalid-dep=yes`: a failed
        parent ends its branches instead of leaving them pending forever).

        Within the cluster's limits (`limits`): an array holds at most `MaxArraySize` cells,
        and at most the cap of the user's jobs are queued at once; the rest wait in this call,
        which returns once every cell is queued (`scaling.backends.slurm.submit`)."""
        self.check_submit()  # a cap of 0 would keep the cells waiting here for ever
        study = self.study
        submitted: dict[str, Any] = {}
        by_world: dict[int, list[Cell]] = {}
        dependent: dict[str, list[Cell]] = {}
        for cell in cells:
            if cell.depends_on is None:
                by_world.setdefault(cell.world_size, []).append(cell)
            else:
                dependent.setdefault(cell.depends_on, []).append(cell)
        groups = [
            Group(group, lambda world=world: slurm_parameters(study.spec, world))
            for world, group in sorted(by_world.items())
        ]
        for parent, group in dependent.items():
            state = (states or {}).get(parent)
            params = partial(self._branch_params, parent, group, submitted, records, state)
            groups.append(Group(group, params, parent))
        where = (study.folder, self.name, self.limits, self._submit_array)
        submitter = ArraySubmitter(*where, self.poll_interval(), say, stop)
        submitter.run(groups, records, submitted)
        self.last_submitter = submitter
        return submitted

    def check_submit(self) -> None:
        refusal = self.limits.refusal()  # `MaxSubmitJobs 0`: waiting never makes room
        if refusal is not None:
            raise ConfigError(refusal)

    @property
    def limits(self) -> SlurmLimits:
        """The cluster's limits on this user's submissions, read once per executor."""
        if self._limits is None:
            slurm = self.study.spec.slurm
            self._limits = read_limits(slurm.max_submitted, slurm.qos, slurm.account)
        return self._limits

    @property
    def slots_note(self) -> str:
        return f"at most {self.slots} jobs at a time (slurm.array_parallelism)"

    @property
    def uses_gpus(self) -> bool:
        return self.study.spec.slurm.gpus_per_node > 0

    @property
    def planned_precision(self) -> str:
        return "bf16" if self.uses_gpus else "fp32"

    @property
    def partition(self) -> str | None:
        return self.study.spec.slurm.partition

    @property
    def probe_timeout_s(self) -> float:
        # queue wait included: the whole time limit, then some, for the last of them
        return 60.0 * self.study.spec.slurm.time_limit_min + 600.0

    def probe_executor(self, folder: Path, world_size: int, python: str | None) -> Any:
        import submitit  # lazy: only a pilot submits

        executor = submitit.SlurmExecutor(folder=folder / self.name, max_num_timeout=0)
        params = slurm_parameters(self.study.spec, world_size)
        params.pop("array_parallelism", None)
        params["job_name"] = f"pilot-{self.study.name}"
        executor.update_parameters(**params)
        return executor

    def plan_note(self, ask_scheduler: bool) -> str | None:
        """How many sbatch arrays the first round becomes under the cluster's limits (read from
        Slurm unless offline), and how many of its cells wait for room."""
        slurm = self.study.spec.slurm
        if ask_scheduler:
            limits = self.limits
        else:
            cap = slurm.max_submitted
            limits = SlurmLimits(cap=cap, cap_reason=f"slurm.max_submitted {cap}", accounting=True)
        groups: dict[object, int] = {}
        for cell in self.study.cells:
            key = cell.world_size if cell.depends_on is None else cell.depends_on
            groups[key] = groups.get(key, 0) + 1
        cells = len(self.study.cells)
        arrays = num_arrays(list(groups.values()), limits)
        line = (
            f"Slurm: the first round's {cells} cells become {arrays} job array(s) "
            f"({limits.describe()}"
        )
        line += ")" if ask_scheduler else "; offline: the cluster's limits not read)"
        if limits.refusal() is not None:  # what `submit` refuses with
            line += f"; `scaling submit` refuses: {limits.refusal()}"
        elif limits.cap is not None and cells > limits.cap:
            line += (
                f"; {cells - limits.cap} wait in `scaling submit` and are queued as jobs leave "
                "the queue"
            )
        return line

    def _branch_params(
        self,
        parent: str,
        group: list[Cell],
        submitted: dict[str, Any],
        records: dict[str, JobRecord],
        state: str | None,
    ) -> dict[str, Any]:
        params = slurm_parameters(self.study.spec, group[0].world_size)
        job_id = _parent_job(parent, submitted, records, state)
        if job_id is not None:
            params["additional_parameters"] = {
                **params["additional_parameters"],
                "dependency": f"afterok:{job_id}",
                "kill_on_invalid_dep": "yes",
            }
        return params

    def _submit_array(self, group: list[Cell], params: dict[str, Any]) -> list[Any]:
        """Queue `group` as one job array (one job if alone); its submitit jobs."""
        import submitit  # lazy: kept out of the CLI's start-up path

        # submitit fails a job after 3 time-outs by default; a cell longer than 3 time limits
        # is normal on a cluster, and each requeue resumes from the last checkpoint
        executor = submitit.SlurmExecutor(
            folder=self.log_folder, max_num_timeout=self.study.spec.slurm.max_timeouts
        )
        executor.update_parameters(**params)
        with executor.batch():
            handles = [executor.submit(self.job(cell)) for cell in group]
        return handles


def _parent_job(
    parent: str, submitted: dict[str, Any], records: dict[str, JobRecord], state: str | None
) -> str | None:
    """The Slurm job a branch waits for: its parent's, if submitted now or still live."""
    if parent in submitted:
        return submitted[parent].job_id
    if state in contract.ACTIVE_STATES and parent in records:
        return records[parent].job_id
    return None  # ended earlier: the branch starts at once (and checks its checkpoint itself)
