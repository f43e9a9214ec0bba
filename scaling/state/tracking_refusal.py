"""A tracking server that refuses the study's login mid-study: retried for a bounded time, then
one line naming the login and the fix.

The loader checks the login before anything is submitted (`scaling.spec.credentials`), but a
password can change while a study runs. Watching a study then fails on every poll with HTTP
401 (or 403: the login is known but lost its permission). Unlike a server restarting (connection
refused, HTTP 5xx), which the driver rides out for as long as it lasts while the cells spool
their metrics, a refused login does not mend itself in this process: its credentials were read
at start. `RefusalClock` gives a refusal `give_up_s` seconds (an auth backend restarting can
refuse for a moment), then stops the driver with `TrackingRefused`; any answer that is not a
refusal starts the clock anew.
"""

from __future__ import annotations

import os
import re
import time

from foundation.config import seconds_from_env
from foundation.secrets import PASSWORD_ENV, USERNAME_ENV, mask_userinfo

__all__ = ["GIVE_UP_ENV", "TrackingRefused", "RefusalClock", "refusal_status", "refusal_give_up_s"]

GIVE_UP_ENV = "SCALING_LOGIN_GIVE_UP_S"
GIVE_UP_S = 120.0  # a refusal that lasts longer is a changed password, not a restart
# "HTTP 401" (scaling.state.run_search), "error code 401" (MLflow's client), "status 403"
_REFUSED = re.compile(r"(?i)\b(?:HTTP|error code|status(?: code)?)\s*:?\s*(401|403)\b")


class TrackingRefused(Exception):
    """The tracking server kept refusing the study's login past the bound; str: one line."""


def refusal_status(err: BaseException) -> int | None:
    """401 or 403 when `err` is the tracking server refusing the login; else None."""
    found = _REFUSED.search(str(err))
    return int(found.group(1)) if found else None


def refusal_give_up_s() -> float:
    """How long a refused login is retried: `SCALING_LOGIN_GIVE_UP_S` seconds, else 120."""
    return seconds_from_env(GIVE_UP_ENV, GIVE_UP_S, "how long a refused login is retried")


class RefusalClock:
    """Since when the server has refused the login; `refused` raises once that is too long."""

    def __init__(self, uri: str, give_up_s: float) -> None:
        self.uri, self.give_up_s = uri, give_up_s
        self.since: float | None = None

    def answered(self) -> None:
        """The server answered (or failed some other way): a later refusal counts anew."""
        self.since = None

    def refused(self, status: int) -> float:
        """Count a refusal; the seconds left before giving up. TrackingRefused once none are."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
        waited = now - self.since
        if waited >= self.give_up_s:
            raise TrackingRefused(self.line(status, waited))
        return self.give_up_s - waited

    def line(self, status: int, waited: float) -> str:
        """What the user reads: the server (masked), the login, for how long, and the fix."""
        where = mask_userinfo(self.uri)
        user = os.environ.get(USERNAME_ENV)
        if status == 401:
            who = f"the login of user {user!r}" if user else "the study's login (none given)"
            why = (
                f"refused {who} for {waited:.0f} s (HTTP 401: wrong username or password, "
                f"from {USERNAME_ENV} / {PASSWORD_ENV} or study.mlflow.credentials_file)"
            )
            fix = "fix the login there"
        else:
            who = f"user {user!r}" if user else "the study's login"
            why = f"refused {who} access for {waited:.0f} s (HTTP 403)"
            fix = "ask the server's admin for permission to edit the experiment"
        return (
            f"the tracking server {where} {why}; stopped watching the study (finished cells are "
            f"kept, the others go on where they stopped): {fix}, then `scaling run` again"
        )
