"""The cluster's limits on what one user may queue, read from Slurm, and sbatch's refusals.

A shared cluster refuses an array whose largest index reaches `MaxArraySize` ("Invalid job array
specification"), and a submission that would put more of the user's jobs in the queue than the
association's or QOS's `MaxSubmitJobs` / `GrpSubmit` allow (`QOSMaxSubmitJobPerUserLimit`,
`AssocMaxSubmitJobLimit`); every array task counts as one job. `read_limits` asks `scontrol show
config` (`MaxArraySize`, `MaxJobCount`) and, where accounting is on, `sacctmgr` (the user's
associations and QOS); the study's `slurm.max_submitted` lowers them. `SlurmExecutor.submit`
splits arrays at `max_array` and queues at most `cap` of the user's jobs at once
(`scaling.backends.slurm.submit`). Every call has a timeout.
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
    "parse_config",
    "parse_assoc",
    "parse_qos",
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

    def refusal(self) -> str | None:
        """Why nothing can be submitted at all (a cap of 0: `MaxSubmitJobs 0`, `GrpSubmit 0`),
        as one line with what to do; None when something can. Waiting never lifts such a cap,
        so `submit` refuses at once and `plan` says the same."""
        if self.cap != 0:
            return None
        return (
            f"{self.cap_reason} lets this user queue no Slurm job at all, so no cell could ever "
            "be submitted (waiting does not lift it); ask the cluster's admins to raise it, or "
            "submit with an account or QOS that allows jobs (study.slurm.account, "
            "study.slurm.qos)"
        )

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


def _run(args: list[str], notes: list[str], what: str) -> str | None:
    """stdout of a Slurm client command; None if it fails, hangs, is missing or cannot be
    executed, and then a note says so (`what` did not answer). Bytes that are not UTF-8 are
    replaced, never a traceback."""
    why = ""
    try:
        proc = subprocess.run(
            args, capture_output=True, text=True, errors="replace", timeout=LIMITS_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        why = f"no answer in {LIMITS_TIMEOUT_S:.0f} s"
    except OSError as err:  # missing, or a broken interpreter (ENOENT, ENOEXEC)
        why = f"{args[0]} cannot be executed: {err.strerror or err}"
    else:
        if proc.returncode == 0:
            return proc.stdout
        lines = proc.stderr.strip().splitlines()
        why = f"exit {proc.returncode}" + (f": {lines[-1][:200]}" if lines else "")
    notes.append(f"`{what}` did not answer ({why}): {_ASSUMED[what]}")
    return None


_ASSUMED = {
    "scontrol show config": "Slurm's defaults assumed",
    "sacctmgr show assoc": "association limits unknown",
    "sacctmgr show qos": "QOS limits unknown",
}


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config`'s `Key = value` lines."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


_MAX_LIMIT = 2**63 - 1  # a larger "limit" is no limit (Slurm's own are 32-bit)


def _int(value: str | None) -> int | None:
    """A limit from sacctmgr or scontrol; None when unset (empty, not an ASCII number, or too
    large to limit anything)."""
    value = (value or "").strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 19:
        return None
    number = int(value)
    return number if number <= _MAX_LIMIT else None


def read_limits(
    max_submitted: int | None = None, qos: str | None = None, account: str | None = None
) -> SlurmLimits:
    """The limits this user's submissions meet, lowered by `max_submitted` (the study's
    `slurm.max_submitted`). A limit Slurm does not answer for is left at Slurm's default and
    said in `notes`."""
    notes: list[str] = []
    caps: list[tuple[int, str]] = []
    config_text = _run(["scontrol", "show", "config"], notes, "scontrol show config")
    config = parse_config(config_text) if config_text else {}
    if config_text is not None and not config:
        notes.append("`scontrol show config` said nothing readable: Slurm's defaults assumed")
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
    assoc = _run(
        [
            "sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={user}",
            "format=Account,QOS,DefaultQOS,MaxSubmit,MaxJobs,GrpSubmit",
        ],
        notes, "sacctmgr show assoc",
    )  # fmt: skip
    caps, running, qos_names = parse_assoc(assoc or "", qos, account)
    qos_text = _run(
        [
            "sacctmgr", "-n", "-P", "show", "qos",
            "format=Name,MaxSubmitPU,MaxJobsPU,GrpSubmit",
        ],
        notes, "sacctmgr show qos",
    )  # fmt: skip
    qos_caps, qos_running = parse_qos(qos_text or "", qos_names)
    running += qos_running
    return caps + qos_caps, min(running) if running else None


def parse_assoc(
    text: str, qos: str | None = None, account: str | None = None
) -> tuple[list[tuple[int, str]], list[int], set[str]]:
    """`sacctmgr -n -P show assoc` lines (Account|QOS|DefaultQOS|MaxSubmit|MaxJobs|GrpSubmit):
    the submit caps with their words, the MaxJobs found, and the QOS names whose limits apply
    (`qos`, else each association's default, else the ones it allows). A line of another
    shape is skipped."""
    caps: list[tuple[int, str]] = []
    running: list[int] = []
    qos_names: set[str] = set()
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 6 or (account and fields[0] != account):
            continue
        acct, allowed, default, max_submit, max_jobs, grp_submit = fields[:6]
        for value, words in ((max_submit, "MaxSubmitJobs"), (grp_submit, "GrpSubmit")):
            if (number := _int(value)) is not None:
                caps.append((number, f"{words} {number} (association {acct})"))
        if (number := _int(max_jobs)) is not None:
            running.append(number)
        qos_names |= {qos} if qos else ({default} if default else set(allowed.split(",")))
    return caps, running, qos_names


def parse_qos(text: str, qos_names: set[str]) -> tuple[list[tuple[int, str]], list[int]]:
    """`sacctmgr -n -P show qos` lines (Name|MaxSubmitPU|MaxJobsPU|GrpSubmit) of the QOS in
    `qos_names`: their submit caps with their words, and their MaxJobsPU."""
    caps: list[tuple[int, str]] = []
    running: list[int] = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 4 or fields[0] not in qos_names:
            continue
        name, max_submit, max_jobs, grp_submit = fields[:4]
        for value, words in ((max_submit, "MaxSubmitPU"), (grp_submit, "GrpSubmit")):
            if (number := _int(value)) is not None:
                caps.append((number, f"{words} {number} (QOS {name})"))
        if (number := _int(max_jobs)) is not None:
            running.append(number)
    return caps, running


def limit_refusal(message: str) -> str | None:
    """The limit a refused sbatch names ("QOSMaxSubmitJobPerUserLimit", "Invalid job array
    specification", ...), None when the refusal is not one that waiting or a smaller array
    cures (then it is a real error)."""
    found = _LIMIT_WORDS.search(message)
    return found.group(1) if found else None


def num_arrays(group_sizes: list[int], limits: SlurmLimits) -> int:
    """How many sbatch arrays groups of these many cells become: each split at `max_array`."""
    return sum(-(-n // limits.max_array) for n in group_sizes if n)
