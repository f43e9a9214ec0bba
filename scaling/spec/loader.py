"""`read_study`: read a study spec, validate it whole, resolve it once.

Three layers of checks, all before anything is written or submitted: the spec's own fields
(`StudySpec.validate`), every resolved run config (`expand_cells`), and what lies outside the file
(dataset on disk, MLflow server reachable, Slurm controller reachable). Each layer reports all
its problems at once. A study that loads is a `ResolvedStudy` whose cells can all be submitted.

Its cells are the starting grid's, then those the LR search's rounds and the looks added
(`added_points`, `added_look_points`: read from their state files,
`scaling.state.files.search_state`
and `scaling.state.files.look_state`); `looks_over` says whether the looks' file ended the study.
"""

from __future__ import annotations

import importlib
import os
import re
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from data_prep.config import BPE, DataConfig
from foundation.config import ConfigError, from_dict, load_file
from foundation.studypaths import DEFAULT_OUTPUT_DIR, resolve_path, resolve_tracking_uri
from scaling.spec.checks import check_study
from scaling.spec.credentials import check_login, take_credentials
from scaling.spec.grid import expand_cells, learning_rates
from scaling.spec.ladder import resolve_arm
from scaling.spec.places import check_paths
from scaling.spec.resolved import ResolvedStudy
from scaling.spec.study import StudySpec
from scaling.spec.value_checks import non_finite_problems, section_key_problems
from scaling.state.files.look_state import read_looks
from scaling.state.files.resolve_state import added_resolve_points
from scaling.state.files.search_state import read_state

__all__ = [
    "study_from_dict",
    "add_python_path",
    "vocab_size",
    "check_mlflow",
    "check_database",
    "read_study",
    "resolve",
    "check_grid_size",
    "MAX_CELLS",
    "added_points",
    "added_look_points",
    "looks_over",
]

PROBE_TIMEOUT_S = 10.0
MAX_CELLS = 100_000  # a study is a few thousand runs at most; 10^5 is a typo, not a plan
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*(?=:)")
_SQLITE = "sqlite:///"
_DATABASES = ("postgresql:", "postgresql+", "mysql:", "mysql+")
DB_CONNECT_TIMEOUT_S = 4.0  # a database on the network answers in well under a second


def study_from_dict(data: dict[str, Any], base: Path | None = None) -> StudySpec:
    """Build and validate a StudySpec (spec checks only); relative paths resolve against `base`.

    `base` is the study file's folder (`load_study_spec`); a spec built in code without one resolves
    against the working directory. `python_path` is added to this process's import path (and
    its children's PYTHONPATH) before the variants are imported.
    """
    base = Path(base or Path.cwd()).absolute()
    data = _lower_scheme(data)
    python_path = _python_path(data.get("python_path"), base)
    add_python_path(python_path)
    numbers = non_finite_problems(data, "study")  # `.inf` would pass a dict-typed section
    try:
        study = from_dict(StudySpec, data, where="study")
        check_study(study)  # what spans sections, once every section parsed
        if numbers:
            raise ConfigError(numbers)
    except ConfigError as err:  # the sections' own typos, with the spec's: all at once
        more = [q for q in [*numbers, *section_key_problems(data)] if q not in err.problems]
        raise ConfigError([*err.problems, *more]) from None
    take_credentials(study.mlflow, base)  # a login leaves the URI here, before anything copies it
    study.python_path = [str(p) for p in python_path]
    if study.data.path:
        study.data.path = str(resolve_path(study.data.path, base))
    if study.data.prepare is not None:
        output = study.data.prepare["output_dir"]
        study.data.prepare["output_dir"] = str(resolve_path(output, base))
    default = DEFAULT_OUTPUT_DIR.format(name=study.name)
    study.output_dir = str(resolve_path(study.output_dir or default, base))
    # jobs run elsewhere (a Slurm node's working dir): a relative store path must not move
    study.mlflow.tracking_uri = resolve_tracking_uri(study.mlflow.tracking_uri, base)
    return study


def _lower_scheme(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with the scheme of `mlflow.tracking_uri` in lower case: schemes are
    case-insensitive (RFC 3986), `HTTP://host` is `http://host`."""
    mlflow = data.get("mlflow")
    uri = mlflow.get("tracking_uri") if isinstance(mlflow, dict) else None
    if not isinstance(uri, str):
        return data
    lowered = _SCHEME.sub(lambda m: m.group(0).lower(), uri.strip(), count=1)
    return {**data, "mlflow": {**mlflow, "tracking_uri": lowered}}


def _python_path(value: Any, base: Path) -> list[Path]:
    """`python_path` (a folder or a list of them, relative to the study file) as folders."""
    if value is None:
        return []
    entries = [value] if isinstance(value, str) else value
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ConfigError(
            f"study.python_path: {value!r}; give a folder or a list of folders (relative to the "
            "study file) that hold your own modules"
        )
    folders = [resolve_path(e, base) for e in entries]
    problems = [
        f"study.python_path[{i}]: {folder} is not a folder; paths are relative to the study "
        f"file's folder {base}"
        for i, folder in enumerate(folders)
        if not folder.is_dir()
    ]
    if problems:
        raise ConfigError(problems)
    return folders


def add_python_path(folders: list[Path] | list[str]) -> None:
    """Put `folders` first on this process's import path and in PYTHONPATH, which every
    process it starts inherits: local jobs, the warm-start server, sbatch (Slurm jobs also
    export it in their setup, `scaling.backends.slurm.parameters`)."""
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for folder in reversed([str(f) for f in folders]):
        if folder not in sys.path:
            sys.path.insert(0, folder)
        if folder not in current:
            current.insert(0, folder)
    if folders:
        os.environ["PYTHONPATH"] = os.pathsep.join(current)
        importlib.invalidate_caches()


def read_study(path: str | Path, drop_variants: tuple[str, ...] = ()) -> ResolvedStudy:
    """Read `path`, validate the spec and every cell, and resolve it once (no environment check:
    `scaling.driver.environment.load_study_spec` adds that).

    Relative paths in it resolve against the folder that holds `path` (`foundation.studypaths`),
    whatever the working directory. Raises ConfigError (a ValueError) naming the file, each
    field and its fix. Writes nothing. `drop_variants`: entries of `variants` left out (`status`
    shows the other arms while a variant's file does not import).
    """
    data = load_file(path)
    if drop_variants and isinstance(data, dict) and isinstance(data.get("variants"), list):
        data = {**data, "variants": [v for v in data["variants"] if v not in drop_variants]}
    try:
        study = study_from_dict(data, base=Path(path).absolute().parent)
        check_paths(study)  # before `resolve` reads the state files in the study folder
        return resolve(study)
    except ConfigError as err:
        raise err.prefixed(str(path)) from None


def vocab_size(study: StudySpec) -> int:
    """The model's vocabulary: the prepared dataset's manifest, else what preparing will give.

    A dataset that is neither on disk nor preparable is the "missing dataset" error.
    """
    # lazy: numpy (data_prep.manifest), paid only when a prepared dataset is read
    from data_prep.manifest import MANIFEST_NAME, load_manifest

    path = study.dataset_path
    explicit = study.model.get("vocab_size")
    if (path / MANIFEST_NAME).is_file():
        try:
            manifest_vocab = load_manifest(path).vocab_size
        except ValueError as err:
            raise ConfigError(f"study.data.path: {err}") from err
        if explicit is not None and explicit < manifest_vocab:
            raise ConfigError(
                f"study.model.vocab_size: {explicit} is smaller than the dataset's vocabulary "
                f"({manifest_vocab}, {path / MANIFEST_NAME}); remove it or raise it"
            )
        return int(explicit or manifest_vocab)
    if study.data.prepare is None:
        raise ConfigError(
            f"study.data.path: {path} holds no prepared dataset ({MANIFEST_NAME} missing); run "
            f"`scaling prepare-data` for it, or give study.data.prepare so submit prepares it"
        )
    if explicit is not None:
        return int(explicit)
    prep = study.prepare_config()
    if prep.tokenizer == BPE:  # a trained BPE has exactly the vocabulary asked for
        return prep.vocab_size
    raise ConfigError(
        "study.model.vocab_size: needed until the dataset is prepared (its tokenizer "
        f"{prep.tokenizer!r} decides it); set it or prepare the data first"
    )


def check_validation_windows(study: StudySpec) -> None:
    """The loss and LR-selection windows (disjoint) must fit in a prepared dataset's validation
    split; an unprepared one is checked by the trainer, which raises the same message."""
    # lazy: numpy (data_prep.manifest), paid only when a prepared dataset is read
    from data_prep.manifest import MANIFEST_NAME, load_manifest

    path = study.dataset_path
    if not (path / MANIFEST_NAME).is_file():
        return
    tokens = int(load_manifest(path)["splits"]["valid"]["tokens"])
    windows = {"num_val_windows": study.data.num_val_windows}
    windows["num_select_windows"] = study.data.num_select_windows
    problem = DataConfig(path=str(path), **windows).windows_fit_problem(
        int(study.model["seq_length"]), tokens
    )
    if problem:
        raise ConfigError(f"study.{problem}")


def check_mlflow(uri: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise ConfigError unless the tracking server answers (HTTP) or its store can be made."""
    if uri.startswith(("http://", "https://")):
        url = uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as resp:
                if resp.status == 200:
                    check_login(uri, timeout_s)  # /health is open even on a basic-auth server
                    return
                problem = f"HTTP {resp.status}"
        except (urllib.error.URLError, OSError) as err:
            problem = str(getattr(err, "reason", err))
        raise ConfigError(
            f"study.mlflow.tracking_uri: {uri} does not answer ({problem}); start it with "
            "`mlflow server --host 127.0.0.1 --port PORT --backend-store-uri sqlite:///...` "
            "or fix the URI"
        )
    if uri.startswith(_DATABASES):
        check_database(uri, min(timeout_s, DB_CONNECT_TIMEOUT_S))
        return
    if uri.startswith(_SQLITE):
        # The store's folder is made on first use; it must be possible to make it.
        existing = Path(uri[len(_SQLITE) :]).absolute().parent
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir() or not os.access(existing, os.W_OK):
            raise ConfigError(
                f"study.mlflow.tracking_uri: cannot create the SQLite store {uri[len(_SQLITE) :]} "
                f"({existing} is not a writable directory); fix the URI or the permissions"
            )


def check_database(uri: str, timeout_s: float = DB_CONNECT_TIMEOUT_S) -> None:
    """Raise ConfigError unless the database of a `postgresql://` or `mysql://` store accepts a
    connection within `timeout_s`: left to MLflow, an unreachable one is a minute and a half of
    SQLAlchemy's retries, then a traceback. Connects with the URI's own driver and login (a
    wrong password is caught too); the message never quotes the login (`mask_userinfo`)."""
    import sqlalchemy  # lazy: only for a database store

    try:
        url = sqlalchemy.engine.make_url(uri)
    except (sqlalchemy.exc.ArgumentError, ValueError) as err:
        raise ConfigError(
            f"study.mlflow.tracking_uri: {uri} is not a database URL ({err})"
        ) from None
    port = url.port or (5432 if url.get_backend_name() == "postgresql" else 3306)
    where = f"{url.host or 'localhost'}:{port}"
    try:  # first the port itself: an answer in `timeout_s` whatever the driver does
        socket.create_connection((url.host or "localhost", port), timeout=timeout_s).close()
    except OSError as err:
        raise ConfigError(
            f"study.mlflow.tracking_uri: the database at {where} does not answer within "
            f"{timeout_s:g} s ({err.strerror or type(err).__name__}); start it, or fix the "
            "URI's host and port"
        ) from None
    timeout = {"connect_timeout": max(1, round(timeout_s))}  # libpq and MySQL drivers: seconds
    try:
        engine = sqlalchemy.create_engine(url, connect_args=timeout, poolclass=sqlalchemy.NullPool)
        with engine.connect():
            pass
    except ImportError as err:  # the URI's driver is not installed here
        raise ConfigError(
            f"study.mlflow.tracking_uri: {uri} needs the database driver {err.name or err}, "
            "which is not installed; install it or use another store"
        ) from None
    except Exception as err:  # noqa: BLE001 - any driver's failure to connect, as one line
        reason = str(getattr(err, "orig", None) or err).strip().splitlines()
        raise ConfigError(
            f"study.mlflow.tracking_uri: the database at {where} did not accept a connection "
            f"within {timeout_s:g} s ({reason[0] if reason else type(err).__name__}); start it, "
            "or fix the URI (host, port, database, login)"
        ) from None


def resolve(study: StudySpec | ResolvedStudy) -> ResolvedStudy:
    """`study` itself if already resolved, else its vocabulary and cells (built once here)."""
    if isinstance(study, ResolvedStudy):
        return study
    vocab = vocab_size(study)
    check_validation_windows(study)
    # the starting grid, then what LR-search rounds, the looks and a resolve's extensions added
    # (their state files in the study folder)
    added = [*added_points(study), *added_look_points(study), *added_resolve_points(study.folder)]
    check_grid_size(study, len(added))
    return ResolvedStudy(study, vocab, tuple(expand_cells(study, vocab, added)))


def check_grid_size(study: StudySpec, num_added: int = 0) -> None:
    """Refuse, at once, a grid over `MAX_CELLS`: counted by arithmetic, before the cells are
    built (`plan` costs ~13 s and ~140 MB per 10^4 cells: benchmarks/bench_plan_scale.py)."""
    per_point = max(1, len(study.tokens.branches or []))  # WSD: a run per branch budget
    scan, followers = len(study.scan_seeds), len(study.seeds) - len(study.scan_seeds)
    points = sum(  # the starting grid, then (LR search) each follower seed at least once
        len(learning_rates(study, variant, size)) * scan + followers
        for size in study.sizes
        for variant in study.variants
    )
    count = points * per_point + num_added
    if count > MAX_CELLS:
        raise ConfigError(
            f"study: {count:,} cells (sizes x variants x learning rates x seeds"
            f"{' x branches' if per_point > 1 else ''}), over the cap of {MAX_CELLS:,}; split "
            "it into several studies, or use fewer seeds, learning rates or sizes"
        )


def added_points(study: StudySpec) -> list[tuple[str, str, int, float, int]]:
    """(size, variant, seed, lr, round) of every cell the search added, for `expand_cells`.

    Arms are stored by their arm name; the spec's own variant string (e.g. `module:function`)
    is handed back to the grid so that the cell is built exactly as the starting grid's are.
    """
    if study.lr.search is None:
        return []
    spec_variant = {resolve_arm(v)[0]: v for v in study.variants}
    seen: set[tuple[str, str, int, float]] = set()
    points = []
    for a in read_state(study.folder).added:
        for seed in a.seeds:
            key = (a.size, a.variant, seed, a.lr)
            if key not in seen:  # one cell per LR even when several token budgets ask for it
                seen.add(key)
                points.append((a.size, spec_variant.get(a.variant, a.variant), seed, a.lr, a.round))
    return points


def looks_over(study: StudySpec) -> bool:
    """True when the study has no sequential seeds, or its last look stopped it."""
    if study.seed_rounds is None:
        return True
    looks = read_looks(study.folder)["looks"]
    return bool(looks) and bool(looks[-1]["stop"])


def added_look_points(study: StudySpec) -> list[tuple[str, str, int, float, int]]:
    """(size, variant, seed, lr, round) of every cell the looks added, for `expand_cells`.

    Arms are stored by their arm name; the spec's own variant string is handed back to the grid
    so that the cell is built exactly as the starting grid's are.
    """
    if study.seed_rounds is None:
        return []
    spec_variant = {resolve_arm(v)[0]: v for v in study.variants}
    points = []
    for look in read_looks(study.folder)["looks"]:
        for a in look["added"]:
            variant = spec_variant.get(a["variant"], a["variant"])
            round_ = int(look["round"])
            points += [(a["size"], variant, int(s), float(a["lr"]), round_) for s in a["seeds"]]
    return points
