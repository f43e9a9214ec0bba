"""The report: what was found first (a sentence per variant), then the numbers behind it.

One list of blocks (``analysis.report.render``) becomes ``report.md`` and a self-contained
``report.html``. Numbers are rounded to what their interval supports and carry their unit
(``analysis.report.fmt``); extrapolations are marked as such wherever they appear.
"""

from __future__ import annotations

import re
from pathlib import Path

from analysis.report import fmt
from analysis.report.headline import headline, judged_level
from analysis.report.render import to_html, to_markdown
from analysis.report.sections.backtest import backtest_blocks, skill_sentence
from analysis.report.sections.code import code_note
from analysis.report.sections.downstream import downstream_blocks
from analysis.report.sections.excluded import excluded_blocks
from analysis.report.sections.inference import inference_blocks
from analysis.report.sections.looks import look_blocks, look_note
from analysis.report.sections.lr_selection import lr_blocks
from analysis.report.sections.matching import matching_blocks
from analysis.report.sections.reanalysis import TITLE, reanalysis_note
from analysis.report.sections.resolve import resolve_blocks
from analysis.report.sections.resolve_path import resolve_path_blocks
from analysis.report.sections.stability import stability_blocks
from analysis.report.sections.time_matched import time_blocks
from analysis.report.sections.tokens import token_blocks
from analysis.stats.planning.power import GRID_CAPS, MAX_SEEDS
from analysis.stats.rules import verdict as verdicts
from foundation import atomic

METHOD = (
    "Intervals: parametric bootstrap (Efron & Tibshirani 1993, ch. 6) over the seed noise "
    "fitted as two variance components (a part shared by every run of one size and seed, and "
    "a per-run part), each draw's spread inflated by t/z for the degrees of freedom its "
    "variance was estimated on (Student's small-sample correction); the best LR is chosen "
    "again in every draw. Percentile intervals, 95% unless said otherwise; numbers are rounded "
    "so that the interval's half-width keeps two significant digits. See docs/statistics.md."
)
NOT_PREDICTED = "not predicted"  # an extrapolation past the backtest's checked distance
CSV_NO_CURVES = (
    "No training curves: a run CSV holds final losses only. `scaling analyze STUDY` reads "
    "each run's per-step `train/loss` and `val/loss` from MLflow and draws them here."
)


def _badge(outcome: str) -> str:
    return f"[[{outcome}|{outcome}]]"


def _extrap_text(e: dict) -> str:
    beyond = fmt.times(e["times_largest_measured_compute"])
    what = "far extrapolation (>100×)" if e["far_extrapolation"] else "extrapolated"
    return f"[[extrap|{what}: {beyond} beyond the data]]"


def _conditional(v: dict) -> str:
    """The verdict the data would give had every arm's LR been its best (LRs not bracketed)."""
    cond = v.get("conditional_verdict")
    return f" (if {v.get('conditional_assumes')}: {_badge(cond)})" if cond else ""


def _intervals(verdict: dict) -> dict:
    return verdict.get("intervals") or {"available": True, "why": None}


def _verdict_blocks(verdict: dict) -> list[tuple]:
    b: list[tuple] = [("h", "Verdict")]
    rows = []
    for v in verdict["variants"]:
        top = v["decision"].get("top_gain_pct")
        level = 1 - judged_level(v)
        k = v["decision"].get("k0") or {}
        g = v["decision"].get("gamma") or {}
        rows.append(
            [
                v["variant"],
                _badge(v["verdict"]) + _conditional(v),
                fmt.with_ci(top["value"], top["ci"], "%") + f" at {top['size']}" if top else fmt.NA,
                fmt.with_ci(k.get("value"), k.get("ci"), "×"),
                fmt.with_ci(g.get("value"), g.get("ci")),
                fmt.level_pct(level),
                fmt.words(v["reason"]),
            ]
        )
    header = ["variant", "verdict", "top gain", "k0 (at c_ref)", "γ", "CI level", "why"]
    b.append(("table", header, rows))
    lo, hi = verdict["measured_compute"]
    b.append(
        (
            "p",
            f"Measured compute: {fmt.flops(lo)} to {fmt.flops(hi)}. Multiple comparisons: "
            f"{verdict['multiple_comparisons']}.",
        )
    )
    for note in verdict.get("noise_diagnostics") or []:
        b.append(("p", f"Noise check: {note}."))
    if len(verdict["baselines"]) > 1:
        chosen = ", ".join(f"{k}: {a}" for k, a in verdict["baseline_by_size"].items())
        b.append(("p", f"Strongest baseline per (size, tokens): {chosen}."))
    if verdict["variants"]:
        b.append(("p", f"c_ref = {fmt.flops(verdict['variants'][0]['c_ref'])}."))
    return b


def _model_gain(e: dict, verdict: dict) -> str:
    """The extrapolated gain with its interval only within the distance the backtest showed
    skill at; beyond it no number at all: "not predicted" (a point without an interval, 10⁸×
    past the data, reads as a prediction no check supports)."""
    g = e["gain_pct"]
    if e.get("within_backtest_skill", True):
        return fmt.with_ci(g["value"], g["ci95"], "%")
    shown = ((verdict.get("backtest") or {}).get("skill") or {}).get("shown_up_to_compute_ratio")
    where = f"the {fmt.times(shown)} the backtest checked" if shown else "any backtested skill"
    return f"{NOT_PREDICTED} (beyond {where})"


def _extrapolation_blocks(verdict: dict) -> list[tuple]:
    b: list[tuple] = [("h", "Extrapolation (shown, never the basis of a claim)")]
    skill = skill_sentence(verdict)
    if skill:
        b.append(("p", skill))
    b.append(
        (
            "note",
            "Every number in this section lies beyond the measured compute: it is the fitted "
            "k(C) carried outside the data, marked [[extrap|extrapolated]] with how far.",
        )
    )
    rows = []
    for v in verdict["variants"]:
        for name, e in v["extrapolated_gain_pct"].items():
            rows.append(
                [
                    v["variant"],
                    name,
                    fmt.count(e["n_params"]),
                    fmt.flops(e["flops"]),
                    _model_gain(e, verdict),
                    _extrap_text(e),
                ]
            )
    header = ["variant", "scale", "N", "C", "model gain", "distance from the data"]
    b.append(("table", header, rows) if rows else ("p", "No k(C) fit: nothing to extrapolate."))
    b.append(("p", named_scale_text(verdict["named_scales"])))
    return b


def named_scale_text(scales: dict) -> str:
    """How each named scale's N and C were set, with its FLOPs per parameter per token."""
    each = "; ".join(
        f"{name}: {x['shape']} shape ({x['num_layers']} layers, d {x['hidden_size']}), "
        f"N {fmt.count(x['n_params'])}, {fmt.num(x['flops_per_param_token'], sig=2)} FLOPs per "
        "parameter per token"
        for name, x in scales.items()
    )
    return (
        f"Named scales at 20 tokens/param, N and C from a standard shape of that size counted "
        f"with the project's FLOPs accounting (6 per parameter for the weights, plus attention "
        f"over the context and the output layer), never from a fit over the measured models: "
        f"{each}. Scales beyond {fmt.times(verdicts.FAR_EXTRAPOLATION)} the measured compute are "
        "listed here but not drawn."
    )


def _gain_blocks(verdict: dict, figures: dict[str, str]) -> list[tuple]:
    b: list[tuple] = [("h", "Paired gain at each matched (size, tokens)")]
    b.append(("table", fmt.GAIN_HEADER, fmt.gain_rows(verdict["variants"], "gain_pct_by_budget")))
    b.append(
        (
            "p",
            "gain = baseline loss − variant loss (positive: the variant is better), at one "
            "(size, tokens) only, on the seeds both arms completed; the largest common budget "
            "per size feeds k(C).",
        )
    )
    captions = {
        "gain_vs_n": "Paired gain per size (95% CI); k(C) model, dashed purple: extrapolated",
        "k_vs_c": "Compute multiplier k(C) with its 95% band; grey: measured compute",
    }
    b.extend(("img", figures[k], c) for k, c in captions.items() if k in figures)
    return b


def _fit_blocks(verdict: dict, figures: dict[str, str]) -> list[tuple]:
    b: list[tuple] = [("h", "Fitted laws")]
    intervals = _intervals(verdict)["available"]
    rows = []
    for f in verdict["fits"]:
        # failed = the draw's fit did not converge; such draws are not in the CI
        used = f"{f['resamples_fitted']} ({f.get('resamples_failed', 0)} failed)"
        used = used if intervals else "none (no intervals)"
        for name, p in f["params"].items():
            rows.append(
                [f["variant"], f["law"], name, fmt.param(name, p["value"], p["ci95"]), used]
            )
    header = ["variant", "law", "parameter", "value [95% CI]", "draws fitted"]
    b.append(("table", header, rows))
    if any(fmt.NOT_IDENTIFIED in r[3] for r in rows):
        b.append(("p", f"{fmt.NOT_IDENTIFIED}: the fit ran the parameter to the edge of its "
                  "range (a floor or exponent toward 0, a coefficient without limit); the data "
                  "do not pin it, so no value is shown."))  # fmt: skip
    b.append(
        (
            "p",
            "Fits: Chinchilla Approach 3 (log-sum-exp in log space, Huber δ = 1e-3 summed over "
            "points, from the initialisation grid, best kept; draws warm-started from the "
            "full-data optimum). L(N), L(C) use each arm's largest token budget per size; "
            "L(N, D) every budget; k(C) is the joint fit with one shared E on matched points.",
        )
    )
    if "loss_vs_n" in figures:
        b.append(("img", figures["loss_vs_n"], "Final validation loss vs N, per arm"))
    return b


def _seeds_needed(row: dict):
    """A seed-noise row's seeds for the named gain: a count, or why there is none."""
    if row.get("seeds_needed"):
        return row["seeds_needed"]
    return GRID_CAPS if row.get("grid_caps") else f"more than {MAX_SEEDS:,}"


def _noise_blocks(verdict: dict) -> list[tuple]:
    b: list[tuple] = [("h", "Seed noise and power")]
    rows = []
    gain = None
    for r in verdict["seed_noise"]:
        gain = r.get("detect_gain_pct", gain)
        has = "paired_diff_sd_pct" in r
        sd_pct = r.get("paired_diff_sd_pct")
        seed_pct = r.get("seed_sd_pct")
        rows.append(
            [
                r["size"],
                r["variant"],
                r["num_seeds"],
                fmt.num(r["seed_sd"], sig=2),
                fmt.num(seed_pct, sig=2) + "%" if seed_pct is not None else fmt.NA,
                fmt.num(sd_pct, sig=2) + "%" if has and sd_pct is not None else "",
                fmt.num(r["grid_sd_pct"], sig=2) + "%" if r.get("grid_sd_pct") else "",
                fmt.num(r.get("mde_pct"), sig=2) + "%" if has and r.get("mde_pct") else "",
                _seeds_needed(r) if has and sd_pct else "",
            ]
        )
    header = ["size", "arm", "seeds", "seed sd (loss)", "seed sd (% of loss)"]
    header += ["paired-difference sd", "LR grid sd"]
    header += ["detectable gain", f"seeds for {gain}%" if gain is not None else "seeds needed"]
    b.append(("table", header, rows))
    b.append(
        (
            "p",
            "Detectable gain: the smallest true gain the verdict's top-size test (a paired t-test "
            "on this many paired seeds, two-sided 4%) detects with 80% power (exact, noncentral t, "
            "on the upper 80% bound of the paired sd, with the LR grid's resolution that test "
            "carries, LR grid sd, which no number of seeds shrinks; "
            "`analysis.stats.planning.power`, the same figures `scaling plan --noise` prints). "
            "Seeds needed: the fewest paired seeds with "
            "that power at the gain named in the header. Seed sd (% of loss): the sd of one arm's "
            "final loss over its seeds, in % of its mean loss; the paired-difference sd (what the "
            "test sees) is in % of the baseline's loss.",
        )
    )
    model = verdict["noise_model"]
    if model is not None:
        b.append(
            (
                "p",
                f"Noise model: variance components on {fmt.num(model['df_seed'])} (shared per "
                f"seed) and {fmt.num(model['df_run'])} (per run) degrees of freedom; draws "
                f"inflated by {fmt.num(model['inflate_seed'])} and "
                f"{fmt.num(model['inflate_run'])}.",
            )
        )
    return b


def _blocks(verdict: dict, figures: dict[str, str], curves_from: str | None) -> list[tuple]:
    variants = ", ".join(v["variant"] for v in verdict["variants"]) or "no variant"
    again = TITLE if reanalysis_note(verdict) else ""  # a user's settings: not the study's
    b: list[tuple] = [("h1", f"Scaling analysis: {variants} vs {verdict['baseline']}{again}")]
    b.append(("lead", [(v["verdict"], s) for v, s in _pairs(verdict)]))
    if again:
        b.append(("note", reanalysis_note(verdict)))
    b.append(
        (
            "p",
            f"Baseline `{verdict['baseline']}`; {verdict['num_used']} of {verdict['num_runs']} "
            f"runs used, {verdict['num_seeds']} seed(s), {_draws(verdict)}. "
            + (METHOD if _intervals(verdict)["available"] else ""),
        )
    )
    if not _intervals(verdict)["available"]:
        b.append(("note", f"No intervals: {_intervals(verdict)['why']}."))
    note = (verdict.get("compute_axis") or {}).get("note")
    if note:
        b.append(("note", f"Compute axis: {note}."))
    if look_note(verdict):
        b.append(("note", look_note(verdict)))
    if code_note(verdict):  # the model code each variant's runs trained with
        b.append(("note", code_note(verdict)))
    b.extend(_verdict_blocks(verdict))
    b.extend(matching_blocks(verdict))  # per size: each arm's N, FLOPs and time per token
    b.extend(look_blocks(verdict))  # sequential seeds: the looks and the level they set
    b.extend(resolve_blocks(verdict))  # unresolved: the options priced, best per hour first
    b.extend(resolve_path_blocks(verdict))  # `run --resolve`: what each extension bought
    b.extend(_gain_blocks(verdict, figures))
    b.extend(time_blocks(verdict))  # the same gains at matched GPU-hours, from measured times
    b.extend(token_blocks(verdict, figures))  # the token axis, when measured
    b.extend(downstream_blocks(verdict))  # downstream tasks, when the runs logged any
    b.extend(backtest_blocks(verdict))  # the study's own extrapolation, checked on itself
    b.extend(_extrapolation_blocks(verdict))
    b.extend(_fit_blocks(verdict, figures))
    b.extend(_noise_blocks(verdict))
    b.extend(lr_blocks(verdict, figures))  # each arm's LRs and the LR search
    b.extend(inference_blocks(verdict))  # inference cost ratios beside the gains
    b.extend(stability_blocks(verdict))  # lr.search.find_edge: each arm's largest stable LR
    b.append(("h", "Training curves"))
    if "training_curves" in figures:
        caption = "Training loss at every logged step (EMA-smoothed; raw faint), validation dots"
        b.append(("img", figures["training_curves"], caption))
    elif curves_from == "csv":
        b.append(("p", CSV_NO_CURVES))
    else:
        b.append(("p", "No per-step `train/loss` or `val/loss` history was found for these runs."))
    b.extend(excluded_blocks(verdict))  # scan-only LRs named as such
    b.append(("h", "The verdict rule"))
    b.append(("pre", verdict["rule"]))
    return b


def _draws(verdict: dict) -> str:
    if not _intervals(verdict)["available"]:
        return "no bootstrap draws"
    return f"{verdict['num_resamples']} bootstrap draws"


def _pairs(verdict: dict) -> list[tuple[dict, str]]:
    sentences = headline(verdict)
    if not verdict["variants"]:
        return [({"verdict": "none"}, sentences[0])]
    return list(zip(verdict["variants"], sentences, strict=True))


_CI_WORDS = re.compile(r" \[95% CI\]| \(95% CIs?\)|,? (with )?(its )?95% band")


def _no_interval_words(blocks: list[tuple]) -> list[tuple]:
    """Table headers and captions without "95% CI" / "95% band": the study has none."""
    out = []
    for block in blocks:
        if block[0] == "table":
            block = ("table", [_CI_WORDS.sub("", h) for h in block[1]], block[2])
        elif block[0] == "img":
            block = ("img", block[1], _CI_WORDS.sub("", block[2]))
        out.append(block)
    return out


def write_report(
    verdict: dict, figures: dict[str, str], out_dir: Path, curves_from: str | None = None
) -> tuple[Path, Path]:
    """Write ``report.md`` (images beside it) and a self-contained ``report.html``.

    ``curves_from``: ``"csv"`` when the runs came from a CSV (the report says why there are no
    training curves), ``"mlflow"`` when per-step history was read, None when unknown.
    """
    blocks = _blocks(verdict, figures, curves_from)
    if not _intervals(verdict)["available"]:
        blocks = _no_interval_words(blocks)
    md, page = out_dir / "report.md", out_dir / "report.html"
    atomic.write_text(md, to_markdown(blocks))  # a link planted at its name: refused
    atomic.write_text(page, to_html(blocks, out_dir, blocks[0][1]))
    return md, page
