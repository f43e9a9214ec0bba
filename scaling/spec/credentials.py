"""The study's login to an authenticated tracking server, checked before anything is submitted.

Where the login comes from, first match wins: a `user:password@` in `mlflow.tracking_uri`
(taken out of the URI at once, so no run config or submitit pickle ever holds it), the 0600
file `mlflow.credentials_file`, then `MLFLOW_TRACKING_USERNAME` / `MLFLOW_TRACKING_PASSWORD`.
`take_credentials` exports the chosen login to those two variables: MLflow's client reads them
in this process, and every job inherits them through its environment (the local executor
copies it, `sbatch` exports it), never through a file the study writes.

`check_login` asks the server for something only a logged-in user may read, so a wrong
password is an error naming its source before any job is queued. `/health` alone would not
do: MLflow's basic-auth app leaves it open.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path

from foundation.config import ConfigError
from foundation.secrets import (
    PASSWORD_ENV,
    USERNAME_ENV,
    Credentials,
    from_environment,
    mask_userinfo,
    read_credentials_file,
    redact,
    split_uri_credentials,
)

__all__ = ["take_credentials", "check_login", "tracking_refusal"]

_FILE_FIELD = "study.mlflow.credentials_file"
_sources: dict[str, str] = {}  # username -> where this process took its password from


def take_credentials(mlflow_spec, base: Path) -> Credentials | None:
    """Take the login out of the study's MLflow section and export it; None if there is none.

    Rewrites `mlflow_spec.tracking_uri` without its password and `credentials_file` as an
    absolute path. Raises ConfigError naming the field (never the password).
    """
    uri, from_uri = split_uri_credentials(mlflow_spec.tracking_uri)
    mlflow_spec.tracking_uri = uri
    path = mlflow_spec.credentials_file
    if path is not None:
        absolute = Path(path).expanduser()
        mlflow_spec.credentials_file = str(absolute if absolute.is_absolute() else base / absolute)
    if from_uri is not None and path is not None:
        raise ConfigError(
            "study.mlflow.tracking_uri: carries a login and study.mlflow.credentials_file names "
            "another; keep one (better the file: a URI's password ends up in shell histories)"
        )
    creds = from_uri
    if path is not None:
        try:
            creds = read_credentials_file(mlflow_spec.credentials_file, _FILE_FIELD)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    if creds is None:
        creds = from_environment()
        if creds is None:
            return None
    creds.export()
    _sources[creds.username] = creds.source
    return creds


def _login_source(username: str) -> str:
    return _sources.get(username, f"{USERNAME_ENV} / {PASSWORD_ENV}")


def check_login(uri: str, timeout_s: float) -> None:
    """Raise ConfigError unless the server at `uri` (HTTP) accepts this process's login.

    A server without auth answers 200 to anyone, and passes.
    """
    if not uri.startswith(("http://", "https://")):
        return
    url = uri.rstrip("/") + "/api/2.0/mlflow/experiments/search"
    body = json.dumps({"max_results": 1}).encode()
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    creds = from_environment()
    if creds is not None:
        token = base64.b64encode(f"{creds.username}:{creds.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    status = _status(request, timeout_s, uri)
    if status not in (401, 403):
        return  # not a login problem; the client reports anything else with its own message
    raise ConfigError(_refusal(uri, status, creds))


def _status(request: urllib.request.Request, timeout_s: float, uri: str) -> int:
    """The HTTP status of `request`; one retry after a timeout (a busy server hashing
    passwords answers `/health` at once and a login slower)."""
    for attempt in range(2):
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as resp:
                return resp.status
        except urllib.error.HTTPError as err:
            return err.code
        except (urllib.error.URLError, OSError) as err:
            if attempt == 0 and "timed out" in str(getattr(err, "reason", err)):
                continue
            reason = redact(str(getattr(err, "reason", err)))
            raise ConfigError(
                f"study.mlflow.tracking_uri: {uri} does not answer a login ({reason})"
            ) from None
    raise AssertionError("unreachable")


def _refusal(uri: str, status: int, creds: Credentials | None) -> str:
    if creds is None:
        return (
            f"study.mlflow.tracking_uri: {uri} asks for a login (HTTP {status}) and none is "
            f"given; export {USERNAME_ENV} and {PASSWORD_ENV}, or name a 0600 file in "
            f"{_FILE_FIELD} (docs/cluster.md)"
        )
    source = _login_source(creds.username)
    if status == 401:
        return (
            f"study.mlflow.tracking_uri: {uri} refused the login of user {creds.username!r} "
            f"(HTTP 401: wrong username or password, from {source}); fix it there"
        )
    return (
        f"study.mlflow.tracking_uri: {uri} let user {creds.username!r} in (from {source}) but "
        f"refused access (HTTP 403); ask the server's admin for permission to create and edit "
        "experiments"
    )


def tracking_refusal(err: Exception) -> str:
    """One line for an exception of MLflow's client: what the server said, masked, and the fix.

    A wrong login mid-command (`scaling analyze`, which reads MLflow without the loader's check)
    reaches the caller as MlflowException with the HTTP status in its first line.
    """
    text = str(err).strip()
    first = mask_userinfo(text.splitlines()[0] if text else type(err).__name__)
    if "401" in first:
        return (
            f"the tracking server refused the login (HTTP 401: wrong username or password, from "
            f"{USERNAME_ENV} / {PASSWORD_ENV} or study.mlflow.credentials_file); fix it there"
        )
    if "403" in first:
        return (
            "the tracking server let the login in but refused access (HTTP 403); ask its admin "
            "for permission to read and edit the experiment"
        )
    return f"MLflow: {first[:300]}; check study.mlflow.tracking_uri and the server"
