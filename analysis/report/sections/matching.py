"""The report's "Arms compared" section: per size, one table of what each arm is (N, FLOPs per
token, measured time per token) and one line saying how the arms were compared, from
verdict.json's ``arm_matching`` (``analysis.tables.arm_costs``)."""

from __future__ import annotations

from analysis.report import fmt
from analysis.tables.arm_costs import MATCHED

__all__ = ["HEADER", "NOT_TIMED", "matching_blocks", "matching_line", "per_token_time"]

HEADER = ["arm", "N (non-embedding)", "N (total)", "FLOPs per token", "time per token"]
NOT_TIMED = "not measured"


def per_token_time(seconds: float | None, num_runs: int) -> str:
    """``"1.25 µs (3 runs)"``, ``"1.23 ms (3 runs)"``, or ``NOT_TIMED``."""
    if seconds is None:
        return NOT_TIMED
    scale, unit = (
        (1e3, "ms") if seconds >= 1e-3 else (1e6, "\u00b5s") if seconds >= 1e-6 else (1e9, "ns")
    )
    return f"{fmt.num(seconds * scale)} {unit} ({num_runs} run{'s' if num_runs != 1 else ''})"


def matching_line(size: str, row: dict, baseline: str) -> str:
    """``"800K: FLOPs per token matched within 0.4% of linear's; compared at matched FLOPs:
    ..."``: how far the arms' compute per token lies apart, and where they were compared."""
    gap = row["matched_within_pct"]
    ways = row["compared_at_by_variant"]
    if gap is None or not ways:
        return f"{size}: no arm to compare with `{baseline}`."
    if all(w == MATCHED for w in ways.values()):
        within = f"FLOPs per token matched within {fmt.num(gap, sig=2)}% of `{baseline}`'s"
    else:
        within = f"FLOPs per token differ from `{baseline}`'s by up to {fmt.num(gap, sig=2)}%"
    if len(set(ways.values())) == 1:
        how = f"compared at {next(iter(ways.values()))}"
    else:
        how = "; ".join(f"{v} compared at {w}" for v, w in ways.items())
    return f"{size}: {within}; {how}."


def _arm_row(arm: str, a: dict) -> list[str]:
    n_total = a["num_params_total"]
    per_token = fmt.power10(a["flops_per_token"], sig=3) if a["flops_per_token"] else fmt.NA
    if a["flops_from_6nd"]:
        per_token += " (6N)"
    return [
        arm,
        fmt.count(a["num_nonembedding_params"]),
        fmt.count(n_total) if n_total is not None else fmt.NA,
        per_token,
        per_token_time(a["time_per_token_s"], a["num_timed_runs"]),
    ]


def matching_blocks(verdict: dict) -> list[tuple]:
    m = verdict.get("arm_matching")
    if not m:  # a verdict from before the section: nothing to say
        return []
    b: list[tuple] = [("h", "Arms compared: size, FLOPs and time per token")]
    for size, row in m["by_size"].items():
        b.append(("p", f"**{size}**"))
        rows = [_arm_row(arm, a) for arm, a in row["arms"].items()]
        b.append(("table", HEADER, rows))
        b.append(("p", matching_line(size, row, m["baseline"])))
    timed = f" (from {m['time_source']})" if m.get("time_source") else ""
    b.append(
        (
            "p",
            "N and FLOPs per token are each arm's runs' own (flops / tokens, the compute axis's "
            "accounting); time per token is measured, the geometric mean over the arm's timed "
            f"runs{timed}, never assumed. Arms whose FLOPs per token differ by more than 1% are "
            "compared at matched compute: one arm's loss moved along its own measured curve.",
        )
    )
    return b
