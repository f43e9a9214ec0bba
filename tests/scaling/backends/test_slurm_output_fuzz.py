"""Every reader of the Slurm tools' output, fed generated output: random bytes (invalid UTF-8
too), truncated lines, wrong column counts, huge and odd numbers, nothing at all, odd exit
codes, and tools that hang or cannot be executed. Each returns a parsed value or raises its one
error (`ConfigError` where a person is told what to fix, `RuntimeError` where a status poll is
retried), never another exception.

`subprocess.run` is replaced by a fake that decodes as the real one does (`text`, `errors`,
the locale's UTF-8), so a reader that does not say how to decode meets the same
UnicodeDecodeError it would meet on a cluster. No process is started: 400 cases in a second or
two.
"""

from __future__ import annotations

import errno
import random
import subprocess
from dataclasses import dataclass

import pytest

from foundation.config import ConfigError
from scaling.backends.slurm import limits as slurm_limits
from scaling.backends.slurm import queue
from scaling.backends.slurm.executor import SlurmExecutor
from scaling.backends.slurm.limits import SlurmLimits, parse_assoc, parse_config, parse_qos
from scaling.backends.slurm.submit import ArraySubmitter
from scaling.spec import resources
from scaling.state.files.job_records import JobRecord

NUM_CASES = 400
SEED = 63


@dataclass
class Answer:
    """What one fake tool does: print `stdout`/`stderr` and exit `code`, or raise `error`."""

    stdout: bytes = b""
    stderr: bytes = b""
    code: int = 0
    error: BaseException | None = None


def _number(rng: random.Random) -> str:
    return rng.choice(
        [
            str(rng.randint(0, 10)),
            str(rng.randint(0, 2**40)),
            "9" * rng.randint(19, 5000),  # past int64, and past int()'s 4300 digits
            "-1",
            "²",  # str.isdigit() but not int()
            "١٢",
            "0x10",
            "",
            " 7 ",
            "1e3",
            "UNLIMITED",
        ]
    )


def _structured(rng: random.Random, tool: str) -> str:
    """Lines shaped like the tool's, then damaged: columns added or dropped, cut short."""
    lines = []
    if tool == "scontrol" and rng.random() < 0.5:  # accounting on: sacctmgr is read too
        lines.append("AccountingStorageType = accounting_storage/slurmdbd")
    for _ in range(rng.randint(0, 6)):
        if tool == "scontrol":
            key = rng.choice(["MaxArraySize", "MaxJobCount", "AccountingStorageType", "Junk"])
            value = rng.choice([_number(rng), "accounting_storage/slurmdbd"])
            line = f"{key} = {value}"
        elif tool == "sacctmgr":
            fields = [rng.choice(["acct0", "normal", ""]), "normal,high", "normal"]
            fields += [_number(rng) for _ in range(rng.choice([3, 3, 3, 0, 1, 2, 5]))]
            line = "|".join(fields if rng.random() < 0.7 else fields[: rng.randint(0, 5)])
        elif tool == "squeue":
            state = rng.choice(["RUNNING", "PENDING", "COMPLETED", "", "RUN|NING"])
            line = f"{_number(rng)}_{_number(rng)}|{state}"
        else:  # sinfo
            gres = rng.choice(["(null)", f"gpu:{_number(rng)}", f"gpu:a100:{_number(rng)}"])
            line = f"{rng.choice(['debug*', 'gpu', '*', ''])} {gres}"
        lines.append(line[: rng.randint(0, len(line))] if rng.random() < 0.2 else line)
    return "\n".join(lines) + rng.choice(["", "\n", "\r\n"])


def _answer(rng: random.Random, tool: str) -> Answer:
    kind = rng.random()
    if kind < 0.1:
        return Answer(
            error=rng.choice(
                [
                    OSError(errno.ENOEXEC, "Exec format error"),
                    FileNotFoundError(errno.ENOENT, "No such file or directory"),
                    PermissionError(errno.EACCES, "Permission denied"),
                    subprocess.TimeoutExpired([tool], 30.0),
                ]
            )
        )
    if kind < 0.4:
        out = rng.randbytes(rng.randint(0, 300))
    else:
        out = _structured(rng, tool).encode()
        if rng.random() < 0.3:  # a byte that is not UTF-8 somewhere
            at = rng.randint(0, len(out))
            out = out[:at] + rng.choice([b"\xff", b"\xe9", b"\xc3", b"\xed\xa0\x80"]) + out[at:]
    code = rng.choice([0] * 6 + [1, 2, 126, 127, 255, -9])
    return Answer(out, rng.randbytes(rng.randint(0, 40)), code)


class FakeRun:
    """`subprocess.run` answering each tool (args[0]) from `answers`, decoding as it would."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers

    def __call__(self, args, *, text=False, errors=None, encoding=None, timeout=None, **_kw):
        answer = self.answers[args[0]]
        if answer.error is not None:
            raise answer.error
        out, err = answer.stdout, answer.stderr
        if text or errors or encoding:  # as subprocess: the locale's encoding (UTF-8 here)
            out = out.decode(encoding or "utf-8", errors or "strict")
            err = err.decode(encoding or "utf-8", errors or "strict")
        return subprocess.CompletedProcess(args, answer.code, out, err)


def _decoded(rng: random.Random, tool: str) -> str:
    raw = _answer(rng, tool).stdout
    return raw.decode("utf-8", rng.choice(["replace", "surrogateescape"]))


def _readers(tmp_path) -> list:
    """(name, call, the error it may raise) of every reader, run against the fake tools."""
    submitter = ArraySubmitter(
        tmp_path, "slurm", SlurmLimits(cap=6, cap_reason="MaxSubmitJobs 6"), None, 1.0, print
    )
    records = {"c": JobRecord("c", "slurm", "12_3", 0.0)}
    return [
        ("read_limits", lambda: slurm_limits.read_limits(), None),
        ("read_limits qos", lambda: slurm_limits.read_limits(3, "normal", "acct0"), None),
        ("slurm_available", resources.slurm_available, None),
        ("check_slurm", lambda: resources.check_slurm("debug"), ConfigError),
        ("partition_gpus", lambda: resources.partition_gpus(None), ConfigError),
        ("squeue states", lambda: queue.squeue_states(["12_3", "12_4", "13"]), RuntimeError),
        ("squeue room", submitter._room, ConfigError),
        ("scancel", lambda: SlurmExecutor.stop(records), RuntimeError),
    ]


def test_the_slurm_readers_take_any_output(tmp_path, monkeypatch):
    rng = random.Random(SEED)
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setattr(resources.shutil, "which", lambda name: f"/fake/bin/{name}")
    monkeypatch.setattr(queue, "squeue_backoff", queue.SqueueBackoff)  # fresh each
    readers = _readers(tmp_path)
    tools = ["sinfo", "scontrol", "sacctmgr", "squeue", "scancel"]
    failures = []
    for case in range(NUM_CASES):
        fake = FakeRun({tool: _answer(rng, tool) for tool in tools})
        monkeypatch.setattr(subprocess, "run", fake)
        for name, read, allowed in readers:
            try:
                read()
            except Exception as err:  # noqa: BLE001 - what the test is about
                if allowed is None or not isinstance(err, allowed):
                    failures.append(f"case {case} {name}: {type(err).__name__}: {err!s:.200}")
        # the pure parsers, on text decoded either way a reader may decode it
        try:
            config = parse_config(_decoded(rng, "scontrol"))
            caps, running, names = parse_assoc(_decoded(rng, "sacctmgr"), None, None)
            qos_caps, qos_running = parse_qos(_decoded(rng, "sacctmgr"), names | {"normal"})
            states = queue.parse_squeue(_decoded(rng, "squeue"))
        except Exception as err:  # noqa: BLE001 - what the test is about
            failures.append(f"case {case} parsers: {type(err).__name__}: {err!s:.200}")
            continue
        numbers = [cap for cap, _words in caps + qos_caps] + running + qos_running
        if not (isinstance(config, dict) and isinstance(states, dict)):
            failures.append(f"case {case} parsers: {config!r:.100} {states!r:.100}")
        if not all(0 <= n < 2**63 for n in numbers):  # a limit, or none: never a huge one
            failures.append(f"case {case} parsers: limits {[str(n)[:20] for n in numbers]}")
    assert not failures, f"{len(failures)} readings raised:\n" + "\n".join(failures[:20])


@pytest.mark.parametrize(
    ("assoc", "cap"),
    [
        ("acct0|normal|normal|6||", 6),
        ("acct0|normal|normal|" + "9" * 5000 + "||", None),  # no limit, not a crash
        ("acct0|normal|normal|²||", None),
        ("acct0|normal|normal|0||", 0),
    ],
)
def test_a_submit_limit_is_a_number_or_no_limit(assoc, cap):
    caps, _running, _names = parse_assoc(assoc)
    assert [c for c, _words in caps] == ([] if cap is None else [cap])
