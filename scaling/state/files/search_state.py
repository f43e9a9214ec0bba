"""The LR search's state file, `<study folder>/lr_search.json`: the LRs its rounds added.

Its name, format, reader and writer. `scaling.spec.loader.added_points` turns the added LRs into
cells (through the same `scaling.spec.grid` path as the starting grid); how rounds are judged and
the file written is the round driver's (`scaling.lr_search.extend_grid`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from foundation.config import ConfigError
from scaling.state.files.io_retry import written
from scaling.state.files.regular import BadStateFile, read_json, write_text

__all__ = [
    "STATE_FILE",
    "AddedLR",
    "SearchState",
    "SearchStateChanged",
    "read_state",
    "write_state",
    "keep_state",
]

STATE_FILE = "lr_search.json"
_FIX = (
    "restore it, or delete it to restart the search from the starting grid (its runs in MLflow "
    "are kept and reused)"
)
_ADDED_TYPES = {"variant": str, "size": str, "tokens": (int, float), "lr": (int, float)}
_ADDED_TYPES |= {"seeds": list, "round": int, "reason": str}


@dataclass(frozen=True)
class AddedLR:
    """One LR a round added to an arm, run by `seeds`."""

    variant: str  # arm name (as in cell ids and the `variant` tag)
    size: str
    tokens: float
    lr: float
    seeds: list[int]
    round: int
    reason: str


@dataclass
class SearchState:
    """What `lr_search.json` holds: the added LRs and whether the search has ended."""

    added: list[AddedLR] = field(default_factory=list)
    ended: bool = False
    open_arms: list[str] = field(default_factory=list)  # still at an edge when it ended
    stopped_arms: list[str] = field(default_factory=list)  # no usable LR: no followers
    broken_laws: list[str] = field(default_factory=list)  # transfer: law broken for these arms

    @property
    def round(self) -> int:
        """The last round added (0: only the starting grid)."""
        return max((a.round for a in self.added), default=0)


def state_path(folder: Path) -> Path:
    return Path(folder) / STATE_FILE


def read_state(folder: Path) -> SearchState:
    """The search so far (an empty one before the first round ended)."""
    path = state_path(folder)
    data = read_json(path, "an LR-search state", _FIX)
    if data is None:
        return SearchState()
    try:
        added = [_added(a) for a in data["added"]]
        arms = [data["open_arms"], data["stopped_arms"], data.get("broken_laws", [])]
        if not all(isinstance(a, list) and all(isinstance(n, str) for n in a) for a in arms):
            raise TypeError("its arms are not lists of names")
        if not isinstance(data["ended"], bool):
            raise TypeError(f"ended is {data['ended']!r}")
        return SearchState(added, data["ended"], *arms)  # broken_laws: absent before transfer
    except (KeyError, TypeError, AttributeError) as err:  # not ours
        raise BadStateFile(f"{path}: not an LR-search state ({err!r}); {_FIX}") from None


def _added(record: object) -> AddedLR:
    """One added LR; TypeError on anything `write_state` did not write."""
    if not isinstance(record, dict) or set(record) != set(_ADDED_TYPES):
        raise TypeError(f"an added LR {record!r}")
    for name, kind in _ADDED_TYPES.items():
        if not isinstance(record[name], kind) or isinstance(record[name], bool):
            raise TypeError(f"an added LR's {name} is {record[name]!r}")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in record["seeds"]):
        raise TypeError(f"an added LR's seeds are {record['seeds']!r}")
    return AddedLR(**record)


def write_state(folder: Path, state: SearchState) -> None:
    """Write the state atomically, through a transient I/O error (`written`)."""
    text = json.dumps(dataclasses.asdict(state), indent=1) + "\n"

    def write() -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        write_text(state_path(folder), text, _FIX)

    written(write, state_path(folder))


class SearchStateChanged(ConfigError):
    """`lr_search.json` changed under a running driver: it stops rather than judge with it."""


def keep_state(folder: Path, known: SearchState, say: Callable[[str], None]) -> None:
    """Hold `lr_search.json` to `known`, the state the running driver wrote last.

    Deleted mid-study (issue 55, case 15), the file is written again from `known`: without it
    the driver's next round would start the search over and run past `max_rounds`, and `status`
    from another shell would hide the cells the search added. Changed to anything else, it is
    `SearchStateChanged` (one line): this driver stops, nothing judged or submitted with it.
    """
    path = state_path(folder)
    if not (path.exists() or path.is_symlink()):  # anything else there is read_state's to refuse
        if known != SearchState():
            write_state(folder, known)
            say(
                f"{path} was deleted while this driver ran the study: written again as the "
                f"driver knows it (round {known.round}); stop the driver first to restart the "
                "search"
            )
        return
    try:
        on_disk = read_state(folder)
    except ConfigError as err:
        raise SearchStateChanged(f"{err} (it changed while this driver ran the study)") from None
    if on_disk != known:
        raise SearchStateChanged(
            f"{path}: changed while this driver ran the study (the driver wrote round "
            f"{known.round}, the file now says round {on_disk.round}); the driver stopped without "
            "judging or submitting anything. Restore the file, or `scaling run` again to go on "
            "from the file as it is"
        )
