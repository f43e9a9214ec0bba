"""`TrainingJob`: the picklable callable submitit runs for one cell, with preemption handling.

Signals: on USR2 (a time-out, or a preemption with `PreemptParameters=send_user_signal`)
submitit calls `checkpoint()` on global rank 0, then requeues and exits. Python runs signal
handlers in the main thread, so training runs in a worker thread: `checkpoint()` sets a stop
flag, the loop finishes its current step, all ranks agree on stopping (an all-reduce of the
flag each step), save a checkpoint, and only then does `checkpoint()` return the resubmission.
The requeued job resumes from that checkpoint and continues the same MLflow run (its id is in
output_dir). SIGTERM (a preemption, or `scancel`) takes the same path on every rank that gets
it, but nothing is requeued here: the job saves the step, returns `interrupted` and ends, and
Slurm's `PreemptMode=REQUEUE` (docs/cluster.md) or the next `scaling submit` resumes it, so a
user's `scancel` still ends the job (jobs/loop/stop.py).

The worker thread must be the first to touch megatron in its process (true for every submitit
task, which is a fresh process): on CPU, models.runtime's adapter installs a per-thread
TorchFunctionMode in the thread that first initialises it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

import submitit

from jobs.config import RunConfig
from jobs.faults import exit_on_known_fault
from jobs.launch import launched_by_submitit
from jobs.loop.stop import REQUEUE, TERMINATE, StopRequest

__all__ = ["TrainingJob"]

_HANDLED_SIGNALS = {signal.SIGUSR2, signal.SIGTERM, signal.SIGINT, signal.SIGCONT}


class TrainingJob(submitit.helpers.Checkpointable):
    """`TrainingJob(config)()` trains (or resumes) `config`; picklable for submitit."""

    def __init__(self, config: RunConfig, preempt_wait_s: float = 120.0) -> None:
        self.config = config
        self.preempt_wait_s = preempt_wait_s
        self._stop: StopRequest | None = None
        self._worker: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "preempt_wait_s": self.preempt_wait_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"], state["preempt_wait_s"])

    def __call__(self):
        # lazy: the submitting process pickles the job without importing torch
        from jobs.loop.trainer import train

        if not launched_by_submitit():
            # called directly or by submitit's in-process debug executor: nobody sends USR2,
            # so train in this thread (no stop flag needed)
            return train(self.config)
        # lazy: torch (the submitting process pickles this job without importing it)
        from models.runtime import rendezvous_port

        # one task = one rank; CUDA_VISIBLE_DEVICES stays (models.runtime picks by LOCAL_RANK).
        # The rendezvous port: every task derives the same one from the job id (one exported
        # by the user is kept, as submitit keeps it).
        dist_env = submitit.helpers.TorchDistributedEnvironment()
        if "MASTER_PORT" not in os.environ:
            dist_env.master_port = rendezvous_port(submitit.JobEnvironment().job_id)
        dist_env.export(set_cuda_visible_devices=False, overwrite=True)
        self._stop = StopRequest()
        # replaces submitit's SIGTERM handler (which only logs): save this step and end
        signal.signal(signal.SIGTERM, self._terminate)
        outcome: dict[str, Any] = {}

        def work() -> None:
            # Signals belong to the main thread (submitit's handler): block them here, and so in
            # every thread this one starts (gloo, data loading, tracking), so that a USR2 never
            # interrupts a system call inside a C++ library thread.
            signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED_SIGNALS)
            try:
                outcome["result"] = train(self.config, stop=self._stop)
            except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
                outcome["error"] = err

        # daemon: if a step outlasts preempt_wait_s, the requeue's exit must not wait for it
        # (checkpoints are atomic, so cutting a save short only loses that save)
        self._worker = threading.Thread(target=work, name=f"train-{self.config.name}", daemon=True)
        self._worker.start()
        try:
            while self._worker.is_alive():
                self._worker.join(timeout=0.5)  # short joins keep the main thread open to signals
        except SystemExit as exiting:
            # submitit's USR2 handler ran `checkpoint()` (the worker has saved and ended), then
            # requeued and exits with a code that means "requeued". Leave at once: interpreter
            # teardown can race with torch.distributed's C++ threads (its TCP store) and abort
            # the process, which would lose that exit code and so the requeue.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(exiting.code if isinstance(exiting.code, int) else 1)
        if "error" in outcome:
            # a full disk, ...: one line last in the job's log (what `scaling status` shows)
            exit_on_known_fault(outcome["error"], self.config)
            raise outcome["error"]
        return outcome["result"]

    def _terminate(self, signum: int, frame: Any) -> None:
        """SIGTERM: the worker stops after its current step, saves it and returns
        `interrupted`; the main thread's join loop then returns that result."""
        print(f"[jobs] {self.config.name}: SIGTERM, saving the current step", flush=True)
        if self._stop is not None:
            self._stop.request(TERMINATE)

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        """Called by submitit on USR2: stop after the current step, save, then requeue."""
        if self._stop is not None and self._worker is not None:
            self._stop.request(REQUEUE)
            self._worker.join(timeout=self.preempt_wait_s)
        return submitit.helpers.DelayedSubmission(TrainingJob(self.config, self.preempt_wait_s))
