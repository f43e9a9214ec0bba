"""The cluster's limits on what one user may queue, read from Slurm, and sbatch's refusals.

A shared cluster refuses an array whose largest index reaches `MaxArraySize` ("Invalid job array
specification"), and a submission that would put more of the user's jobs in the queue than the
association's or QOS's `MaxSubmitJobs` / `GrpSubmit` allow (`QOSMaxSubmitJobPerUserLimit`,
`AssocMaxSubmitJobLimit`); every array task counts as one job. `read_limits` asks `scontrol show
config` (`MaxArraySize`, `MaxJobCount`) and, where accounting is on, `sacctmgr` (the user's
associations and QOS); the study's `slurm.max_submitted` lowers them. `SlurmExecutor.submit`
splits arrays at `max_array` and queues at most `cap` of the user's jobs at once
(`scaling.backends.slurm_submit`). Every call has a timeout.
"""

from __future__ import annotations

import getpass
import re
import subprocess
from dataclasses import dataclass, field

__all__ = [
    "SlurmLimits",
    "read_limits",
    "limit_refusal",
    "num_arrays",
    "DEFAULT_MAX_ARRAY_SIZE",
]

LIMITS_TIMEOUT_S = 30.0
DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's default MaxArraySize
DEFAULT_MAX_JOB_COUNT = 10_000  # Slurm's default MaxJobCount

# sbatch's words for a refusal that waiting cures (the user's jobs leave the queue), or that a
# smaller array cures; anything else is a real error and raised
_LIMIT_WORDS = re.compile(
    r"\b(\w*(?:MaxSubmit|GrpSubmit|MaxJobCount)\w*Limit\w*"
    r"|Invalid job array specification"
    r"|job submit limit"
    r"|MaxJobCount"
    r"|Slurm temporarily unable to accept job"
    r"|Socket timed out on send/recv operation"
    r"|Resource temporarily unavailable)",
    re.IGNORECASE,
)
ARRAY_REFUSAL = "Invalid job array specification"


@dataclass(frozen=True)
class SlurmLimits:
    """What this user may queue at once. `max_array`: cells in one array (MaxArraySize: an
    array's indices run from 0 to MaxArraySize - 1); `cap`: the user's jobs in the queue at
    once, array tasks each counted; `cap_reason`: the limit that sets it, as a person reads it
    ("MaxSubmitJobs 6 (association alice)")."""

    max_array: int = DEFAULT_MAX_ARRAY_SIZE
    cap: int | None = None
    cap_reason: str = ""  # the limit that sets `cap` ("MaxSubmitJobs 6")
    max_running: int | None = None  # MaxJobs: more may be queued, at most this many run
    accounting: bool = False
    notes: list[str] = field(default_factory=list)  # what was read, and what could not be

    def describe(self) -> str:
        """One line for `plan` and the submit log."""
        parts = [f"MaxArraySize {self.max_array}"]
        if self.cap is not None:
            parts.append(f"at most {self.cap} queued at once ({self.cap_reason})")
        if self.max_running is not None:
            parts.append(f"MaxJobs {self.max_running} running at once")
        if not self.accounting:
            parts.append("accounting off: no association or QOS limits")
        return "; ".join(parts + self.notes)


def _run(args: list[str]) -> str | None:
    """stdout of a Slurm client command, None if it fails or is missing."""
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=LIMITS_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config`'s `Key = value` lines."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _int(value: str | None) -> int | None:
    """A limit from sacctmgr or scontrol; None when unset (empty, or not a number)."""
    value = (value or "").strip()
    return int(value) if value.isdigit() else None


def read_limits(
    max_submitted: int | None = None, qos: str | None = None, account: str | None = None
) -> SlurmLimits:
    """The limits this user's submissions meet, lowered by `max_submitted` (the study's
    `slurm.max_submitted`). A limit Slurm does not answer for is left at Slurm's default and
    said in `notes`."""
    notes: list[str] = []
    caps: list[tuple[int, str]] = []
    config_text = _run(["scontrol", "show", "config"])
    config = parse_config(config_text) if config_text else {}
    if not config:
        notes.append("`scontrol show config` did not answer: Slurm's defaults assumed")
    max_array = _int(config.get("MaxArraySize")) or DEFAULT_MAX_ARRAY_SIZE
    job_count = _int(config.get("MaxJobCount")) or DEFAULT_MAX_JOB_COUNT
    caps.append((job_count, f"MaxJobCount {job_count}"))
    accounting = config.get("AccountingStorageType", "").endswith("slurmdbd")
    max_running = None
    if accounting:
        found, max_running = _accounting_caps(qos, account, notes)
        caps += found
    if max_submitted is not None:
        caps.append((max_submitted, f"slurm.max_submitted {max_submitted}"))
    cap, reason = min(caps)
    return SlurmLimits(
        max_array=max(1, max_array),  # indices 0 .. MaxArraySize - 1
        cap=cap,
        cap_reason=reason,
        max_running=max_running,
        accounting=accounting,
        notes=notes,
    )


def _accounting_caps(
    qos: str | None, account: str | None, notes: list[str]
) -> tuple[list[tuple[int, str]], int | None]:
    """The user's association and QOS submit limits from sacctmgr: (cap, its words) each, and
    the smallest MaxJobs (a running limit: jobs over it wait in the queue, not refused)."""
    user = getpass.getuser()
    caps: list[tuple[int, str]] = []
    running: list[int] = []
    assoc = _run(
        [
            "sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={user}",
            "format=Account,QOS,DefaultQOS,MaxSubmit,MaxJobs,GrpSubmit",
        ]
    )  # fmt: skip
    if assoc is None:
        notes.append("`sacctmgr show assoc` did not answer: association limits unknown")
        assoc = ""
    qos_names: set[str] = set()
    for line in assoc.splitlines():
        fields = line.split("|")
        if len(fields) < 6 or (account and fields[0] != account):
            continue
        acct, allowed, default, max_submit, max_jobs, grp_submit = fields[:6]
        if _int(max_submit) is not None:
            caps.append((int(max_submit), f"MaxSubmitJobs {max_submit} (association {acct})"))
        if _int(grp_submit) is not None:
            caps.append((int(grp_submit), f"GrpSubmit {grp_submit} (association {acct})"))
        if _int(max_jobs) is not None:
            running.append(int(max_jobs))
        qos_names |= {qos} if qos else ({default} if default else set(allowed.split(",")))
    qos_text = _run(
        [
            "sacctmgr", "-n", "-P", "show", "qos",
            "format=Name,MaxSubmitPU,MaxJobsPU,GrpSubmit",
        ]
    )  # fmt: skip
    if qos_text is None:
        notes.append("`sacctmgr show qos` did not answer: QOS limits unknown")
        qos_text = ""
    for line in qos_text.splitlines():
        fields = line.split("|")
        if len(fields) < 4 or fields[0] not in qos_names:
            continue
        name, max_submit, max_jobs, grp_submit = fields[:4]
        if _int(max_submit) is not None:
            caps.append((int(max_submit), f"MaxSubmitPU {max_submit} (QOS {name})"))
        if _int(grp_submit) is not None:
            caps.append((int(grp_submit), f"GrpSubmit {grp_submit} (QOS {name})"))
        if _int(max_jobs) is not None:
            running.append(int(max_jobs))
    return caps, min(running) if running else None


def limit_refusal(message: str) -> str | None:
    """The limit a refused sbatch names ("QOSMaxSubmitJobPerUserLimit", "Invalid job array
    specification", ...), None when the refusal is not one that waiting or a smaller array
    cures (then it is a real error)."""
    found = _LIMIT_WORDS.search(message)
    return found.group(1) if found else None


def num_arrays(group_sizes: list[int], limits: SlurmLimits) -> int:
    """How many sbatch arrays groups of these many cells become: each split at `max_array`."""
    return sum(-(-n // limits.max_array) for n in group_sizes if n)
