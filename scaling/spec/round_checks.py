"""Checks of the rounds a study may add after its first: the LR search's and the sequential
seeds'. Part of `scaling.spec.checks.check_study`, which collects every problem at once."""

from __future__ import annotations

from foundation.config import Problems
from scaling.spec.study import StudySpec

# tried LRs either side of the winner that the followers also run: a handful brackets any
# optimum; a million made every follower seed a million cells and `plan` ran out of memory
MAX_FOLLOW_NEIGHBOURS = 8


def check_search(study: StudySpec, p: Problems) -> None:
    """`lr.search`: how the LR search may extend each arm's grid."""
    search = study.lr.search
    if search is None:
        return
    if search.step_factor is not None and not search.step_factor > 1:
        p.add(
            f"study.lr.search.step_factor: {search.step_factor} must be > 1 (e.g. 2: the next LR "
            "is the edge LR x or / 2), or null for the grid's own step"
        )
    if search.max_rounds < 0:
        p.add(f"study.lr.search.max_rounds: {search.max_rounds} must be >= 0 (e.g. 3)")
    if search.scan_seeds is not None and not 1 <= search.scan_seeds <= len(study.seeds):
        p.add(
            f"study.lr.search.scan_seeds: {search.scan_seeds} must be between 1 and the number "
            f"of study.seeds ({len(study.seeds)}), or null for every seed"
        )
    if not 0 <= search.follow_neighbours <= MAX_FOLLOW_NEIGHBOURS:
        p.add(
            f"study.lr.search.follow_neighbours: {search.follow_neighbours} must be in 0.."
            f"{MAX_FOLLOW_NEIGHBOURS} (0: the followers run the winner only, its neighbours "
            "bracket it on the scan seeds; 1: also one tried LR each side)"
        )
    if search.find_edge and study.tokens.branches:
        p.add(
            "study.lr.search.find_edge: a WSD family's divergence happens in its stable run, "
            "which the LR frontier does not read, so the edge would never be found; drop "
            "study.tokens.branches or set find_edge: false"
        )


def check_transfer(study: StudySpec, p: Problems) -> None:
    """`lr.search.transfer: law`: sizes in waves; the law needs sizes and one budget per size."""
    search = study.lr.search
    if search is None or search.transfer != "law":
        return
    if search.law_sizes < 2:
        p.add(
            f"study.lr.search.law_sizes: {search.law_sizes} must be >= 2 (the sizes scanned in "
            "full before each arm's LR-vs-N law is fitted; e.g. 3)"
        )
    if study.tokens.branches:
        p.add(
            "study.lr.search.transfer: 'law' needs one token budget per size; drop "
            "study.tokens.branches or set transfer: none"
        )


def check_seed_rounds(study: StudySpec, p: Problems) -> None:
    """`seeds: {start, max, step}` (analysis.stats.looks.sequential.Design holds the same rules)."""
    rounds, search = study.seed_rounds, study.lr.search
    if rounds is None:
        return
    if rounds.start < 3:
        p.add(f"study.seeds.start: {rounds.start} must be >= 3 (a look needs 3 paired seeds)")
    if rounds.start > rounds.max:
        p.add(f"study.seeds.start: {rounds.start} is above study.seeds.max ({rounds.max})")
    if rounds.step < 1:
        p.add(f"study.seeds.step: {rounds.step} must be >= 1 (seeds added per round)")
    if search is not None and search.scan_seeds is not None and rounds.max < search.scan_seeds:
        p.add(
            f"study.seeds.max: {rounds.max} is below study.lr.search.scan_seeds "
            f"({search.scan_seeds}), the seeds the LR search scans with"
        )
