"""submitit's local executor, with each job's controller in a session of its own.

A terminal's Ctrl-C is a SIGINT to every process of its foreground group. submitit starts a
local job's controller in the submitter's group, so each controller (and each of its tasks)
took the interrupt itself and printed its own `KeyboardInterrupt` traceback, while `scaling`
lost track of which cells had started. Here the terminal's interrupt reaches `scaling` alone,
which stops what it started (`LocalJob.cancel`: SIGINT to the controller, which stops its
tasks) and says so in one line. A controller writes to `controllers.log` in the submitit
folder, not to the terminal.

Everything else is submitit's: the controller command and environment (`start_controller`),
its logs and result pickles. The job object is submitit's `LocalJob` but for one wait: asked
for the result of a job that left none (its controller killed: a cancel, a Ctrl-C, the OOM
killer), submitit polls for the pickle for 15 s, twice for the state and the error line, as a
shared filesystem may show a file late. A local job's result is written by the tasks its
controller waited for, on this machine, before the controller exits; a job that is done and
shows none has none, so each killed cell held up the end of its round by 30 s.
"""

from __future__ import annotations

import os
import subprocess
import sys

import submitit
from submitit.local.local import LocalJob

__all__ = ["SessionLocalExecutor", "SessionLocalJob", "CONTROLLER_LOG"]

CONTROLLER_LOG = "controllers.log"


class SessionLocalJob(LocalJob):
    """submitit's `LocalJob` that reads a done job's result at once (see the module)."""

    _results_timeout_s = 0


class SessionLocalExecutor(submitit.LocalExecutor):
    """`submitit.LocalExecutor` whose controllers start in a new session (see the module)."""

    def _submit_command(self, command: str) -> SessionLocalJob:
        params = self.parameters
        ntasks = params.get("tasks_per_node", 1)
        num_gpus, visible = params.get("gpus_per_node", 0), params.get("visible_gpus", ())
        gpus = range(num_gpus) if visible == () else visible[:num_gpus]
        # the environment submitit.local.local.start_controller gives a controller
        env = dict(
            os.environ,
            SUBMITIT_LOCAL_NTASKS=str(ntasks),
            SUBMITIT_LOCAL_COMMAND=command,
            SUBMITIT_LOCAL_TIMEOUT_S=str(int(60 * params.get("timeout_min", 2.0))),
            SUBMITIT_LOCAL_SIGNAL_DELAY_S=str(int(params.get("signal_delay_s", 30))),
            SUBMITIT_LOCAL_NODEID="0",
            SUBMITIT_LOCAL_JOB_NUM_NODES="1",
            SUBMITIT_STDERR_TO_STDOUT="1" if params.get("stderr_to_stdout", False) else "",
            SUBMITIT_EXECUTOR="local",
            CUDA_VISIBLE_DEVICES=",".join(str(k) for k in gpus),
            SUBMITIT_LOCAL_WITH_SHELL="",
        )
        if params.get("setup"):
            raise ValueError("SessionLocalExecutor runs no setup lines; export them instead")
        cmd = [sys.executable, "-m", "submitit.local._local", str(self.folder)]
        with open(self.folder / CONTROLLER_LOG, "a") as log:
            process = subprocess.Popen(  # noqa: S603 - submitit's own controller
                cmd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return SessionLocalJob(
            folder=self.folder, job_id=str(process.pid), process=process, tasks=list(range(ntasks))
        )
