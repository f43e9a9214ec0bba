"""A damaged or cut spool (issue 55 #9, #10): every reader reports the line and goes on, and a
spool whose run ended tells whole from cut short or changed (`check_spool`). Real MLflow."""

from __future__ import annotations

import uuid

from mlflow.tracking import MlflowClient

from foundation.contract import RUN_ID_FILE
from jobs.config import TrackingConfig
from jobs.telemetry.spool import (
    SPOOL,
    UPLOADED_OFFSET,
    check_spool,
    last_logged_step,
    reset_uploaded,
)
from jobs.telemetry.tracking import Tracker
from jobs.telemetry.upload import upload_spool

STEPS = 10


def _ended_spool(out, tracking: TrackingConfig):
    """A run's spool as its training leaves it: metrics, the end status, the seal."""
    tracker = Tracker(out, tracking, run_name="cell")
    for step in range(1, STEPS + 1):
        tracker.log_metrics({"train/loss": 10.0 / step}, step=step)
    tracker.set_status("FINISHED")
    tracker.seal()
    assert tracker.close(timeout_s=30)
    return out / SPOOL


def test_a_binary_line_is_named_and_skipped_and_the_seal_tells_the_spool_changed(
    tmp_path, mlflow_server, capsys
):
    tracking = TrackingConfig(tracking_uri=mlflow_server, experiment=f"spool-{uuid.uuid4().hex}")
    out = tmp_path / "run"
    spool = _ended_spool(out, tracking)
    assert check_spool(out) is None  # whole as written
    lines = spool.read_bytes().splitlines(keepends=True)
    assert b'"t": "end"' in lines[-1]
    damaged = next(i for i, line in enumerate(lines) if b'"step": 5' in line)
    lines[damaged] = b"\xff\xfe\x00binary\x80\n"  # one binary line where step 5 was
    spool.write_bytes(b"".join(lines))
    number = damaged + 1

    problem = check_spool(out)
    assert problem == (
        f"{spool} was changed after its run ended (line {number} is damaged: not UTF-8)"
    )
    # the uploader (tracker, resume, --new-store) skips it with a word, never a traceback
    (out / RUN_ID_FILE).unlink()
    reset_uploaded(out)
    assert upload_spool(out, tracking, run_name="cell") == 0
    assert f"{spool} line {number}: not UTF-8; skipped" in capsys.readouterr().out
    client = MlflowClient(mlflow_server)
    run_id = (out / RUN_ID_FILE).read_text()
    steps = [m.step for m in client.get_metric_history(run_id, "train/loss")]
    assert sorted(steps) == [s for s in range(1, STEPS + 1) if s != 5]
    assert client.get_run(run_id).info.status == "FINISHED"
    assert last_logged_step(out) == STEPS
    # a damaged upload offset: the spool is sent again, and each point still lands once
    (out / UPLOADED_OFFSET).write_bytes(b"\xff12")
    assert upload_spool(out, tracking, run_name="cell") == 0
    again = [m.step for m in client.get_metric_history(run_id, "train/loss")]
    assert sorted(again) == sorted(steps)


def test_a_cut_spool_is_not_whole(tmp_path, mlflow_server):
    tracking = TrackingConfig(tracking_uri=mlflow_server, experiment=f"spool-{uuid.uuid4().hex}")
    out = tmp_path / "run"
    spool = _ended_spool(out, tracking)
    whole = spool.read_bytes()
    lines = whole.splitlines(keepends=True)
    spool.write_bytes(b"".join(lines[:4]))  # 4 of 10 metric points, no end status, no seal
    assert check_spool(out) == f"{spool} stops at line 4 before its run's end record (cut short)"
    spool.write_bytes(whole[: len(whole) // 2])  # cut in the middle of a line
    assert "ends in the middle of line" in check_spool(out)
    spool.write_bytes(b"".join(lines[:-1]))  # only the seal lost: every record is there
    assert check_spool(out) is None
