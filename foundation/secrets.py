"""Tracking-server credentials: where they come from, and keeping them out of every record.

A tracking server reachable from compute nodes needs a login (MLflow's basic-auth app). The
login reaches MLflow's client through the two variables it reads itself,
`MLFLOW_TRACKING_USERNAME` / `MLFLOW_TRACKING_PASSWORD`, and nowhere else: not in a tracking
URI, a run config, a submitit pickle, a param, a tag or a log line. A URI that carries
`user:password@` has it taken out (`split_uri_credentials`); whatever is written or shown
passes `redact_uri` / `redact` first.

A credentials file uses MLflow's own format (`~/.mlflow/credentials`):

    [mlflow]
    mlflow_tracking_username = alice
    mlflow_tracking_password = ...

and must be readable by its owner only (mode 0600), or it is refused.
"""

from __future__ import annotations

import configparser
import os
import re
import stat
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = [
    "USERNAME_ENV",
    "PASSWORD_ENV",
    "MASK",
    "Credentials",
    "split_uri_credentials",
    "redact_uri",
    "redact",
    "mask_userinfo",
    "read_credentials_file",
    "from_environment",
]

USERNAME_ENV = "MLFLOW_TRACKING_USERNAME"
PASSWORD_ENV = "MLFLOW_TRACKING_PASSWORD"
MASK = "***"
_SECTION = "mlflow"
# `scheme://user:password@` with any scheme, in any case (`HTTP://`, a typo `htp://`), up to the
# last `@` before a space or quote (a password may hold `/` or `@` unescaped); and a bare
# `user:password@` (a scheme typo without `//`)
_URI_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*:/+)[^\s'\"]*@")
_BARE_USERINFO = re.compile(r"[^\s/?#'\"@:\[\](){},]+:[^\s/?#'\"\[\](){},]*@")
# a secret in a URI's query string (`?token=...`, `&password=...`, `api_key=...`): its value
_QUERY_SECRET = re.compile(
    r"(?i)([?&;][\w.\-]*(?:token|passw|pwd|secret|key|auth|sig|credential)[\w.\-]*=)"
    r"[^&#\s'\"]*"
)


class Credentials:
    """A username and password; `repr` and `str` never show the password."""

    def __init__(self, username: str, password: str, source: str) -> None:
        self.username = username
        self.password = password
        self.source = source  # where they came from, for messages: a file or the environment

    def __repr__(self) -> str:
        return f"Credentials(username={self.username!r}, password={MASK}, source={self.source!r})"

    __str__ = __repr__

    def export(self) -> None:
        """Put them where MLflow's client (here and in every job started from here) reads them."""
        os.environ[USERNAME_ENV] = self.username
        os.environ[PASSWORD_ENV] = self.password


def split_uri_credentials(uri: str) -> tuple[str, Credentials | None]:
    """(the URI without `user:password@`, the credentials it carried or None)."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or "@" not in parts.netloc:
        return uri, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    clean = urlunsplit(parts._replace(netloc=host))
    return clean, Credentials(unquote(user), unquote(password), "study.mlflow.tracking_uri")


def redact_uri(uri: str | None) -> str | None:
    """The URI with any `user:password@` replaced by `***@`, and the value of a secret in its
    query string (`?token=...`) by `***` (None stays None)."""
    if not uri:
        return uri
    uri = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}{MASK}", uri)
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{MASK}@{host}"))


def redact(text: str, *secrets: str | None) -> str:
    """`text` with each secret (and the password in the environment) replaced by `***`."""
    values = [s for s in (*secrets, os.environ.get(PASSWORD_ENV)) if s]
    for value in sorted(set(values), key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def mask_userinfo(text: str) -> str:
    """`text` with every `user:password@` of a URI in it masked as `***@`, every secret of a
    query string (`?token=...`) as `token=***`, and the password in the environment as `***`:
    for any message that may quote a URI or a line of a study file (a refused URI, a list given
    as one, a YAML parser error), whether or not it parses."""
    text = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _URI_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _BARE_USERINFO.sub(f"{MASK}@", text)
    return redact(text)


def read_credentials_file(path: str | Path, where: str) -> Credentials:
    """Read a 0600 credentials file; ValueError (starting with `where`) naming the file and fix.

    Refused when group or others may read or write it: a password readable by every user of
    a shared login node is no password.
    """
    path = Path(path).expanduser()
    try:
        mode = path.stat().st_mode
    except OSError as err:
        raise ValueError(f"{where}: cannot read {path} ({err.strerror}); fix the path") from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"{where}: {path} is not a file; name the credentials file")
    if mode & 0o077:
        raise ValueError(
            f"{where}: {path} is readable by others (mode {stat.S_IMODE(mode):04o}); a password "
            f"file must be private: `chmod 600 {path}`"
        )
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(), source=str(path))
    except (configparser.Error, UnicodeDecodeError) as err:
        # the parser's own message quotes lines of the file, which hold the password
        raise ValueError(
            f"{where}: {path} is not an INI file ({type(err).__name__}); write a [mlflow] "
            "section with mlflow_tracking_username and mlflow_tracking_password"
        ) from None
    section = parser[_SECTION] if parser.has_section(_SECTION) else {}
    user = section.get("mlflow_tracking_username", "").strip()
    password = section.get("mlflow_tracking_password", "").strip()
    if not user or not password:
        raise ValueError(
            f"{where}: {path} needs a [mlflow] section with mlflow_tracking_username and "
            "mlflow_tracking_password"
        )
    return Credentials(user, password, str(path))


def from_environment() -> Credentials | None:
    """The login MLflow's client would use from the environment, if both parts are set."""
    user, password = os.environ.get(USERNAME_ENV), os.environ.get(PASSWORD_ENV)
    if user and password:
        return Credentials(user, password, f"{USERNAME_ENV} / {PASSWORD_ENV}")
    return None
