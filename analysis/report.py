"""The report: one list of blocks rendered both as Markdown and as a self-contained HTML page.

HTML embeds the PNGs as base64 so the page is a single file that opens anywhere (an MLflow
artifact view, an e-mail attachment) without its neighbours.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path


def fmt(value, digits: int = 4) -> str:
    if value is None:
        return "not available"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def fmt_ci(ci) -> str:
    return "not available" if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


METHOD = (
    "Intervals: parametric bootstrap (Efron & Tibshirani 1993, ch. 6) over the seed noise "
    "fitted as two variance components (a part shared by every run of one size and seed, and "
    "a per-run part; two-way ANOVA per size, pooled over sizes with a fitted N-trend), each "
    "draw's spread inflated by t_{0.975, df} / z_{0.975} for the df its variance was estimated "
    "on (Student's small-sample correction); the best LR is chosen again in every draw. "
    "Percentile intervals, 95% unless said otherwise. See docs/statistics.md."
)


def _extrap(v: dict) -> str:
    parts = []
    for name, e in v["extrapolated_gain_pct"].items():
        far = e["times_largest_measured_compute"]
        warn = " **far extrapolation (>100x)**" if e["far_extrapolation"] else ""
        parts.append(
            f"{name}: {fmt(e['gain_pct']['value'])}% {fmt_ci(e['gain_pct']['ci95'])} "
            f"at C = {fmt(e['flops'], 3)} ({fmt(far, 3)}x the largest measured C){warn}"
        )
    return "; ".join(parts) or "not available"


def _verdict_blocks(verdict: dict) -> list[tuple]:
    b: list[tuple] = [("h", "Verdict")]
    rows = []
    for v in verdict["variants"]:
        rows.append(
            [
                v["variant"],
                f"**{v['verdict']}**",
                v["reason"],
                f"{fmt(v['k0'])} {fmt_ci(v['k0_ci95'])}",
                f"{fmt(v['gamma'])} {fmt_ci(v['gamma_ci95'])}",
            ]
        )
    b.append(("table", ["variant", "verdict", "why", "k0 (at c_ref)", "gamma"], rows))
    lo, hi = verdict["measured_compute"]
    b.append(
        (
            "p",
            f"Measured compute: {fmt(lo, 3)} to {fmt(hi, 3)} FLOPs. Multiple comparisons: "
            f"{verdict['multiple_comparisons']}.",
        )
    )
    if len(verdict["baselines"]) > 1:
        chosen = ", ".join(f"{k}: {a}" for k, a in verdict["baseline_by_size"].items())
        b.append(("p", f"Strongest baseline per (size, tokens): {chosen}."))
    b.append(("h", "Extrapolation (shown, never the basis of a claim)"))
    per_pt = ", ".join(
        f"{k}: {fmt(x, 3)}" for k, x in verdict["flops_per_param_token_at_named_scales"].items()
    )
    b.append(
        (
            "p",
            "Named scales at 20 tokens/param; their C uses the measured points' own FLOPs "
            f"accounting (FLOPs per parameter per token: {per_pt}).",
        )
    )
    rows = [[v["variant"], _extrap(v)] for v in verdict["variants"]]
    b.append(("table", ["variant", "gain at named scales"], rows))
    if verdict["variants"]:
        b.append(("p", f"c_ref = {fmt(verdict['variants'][0]['c_ref'])} FLOPs."))
    b.append(("pre", verdict["rule"]))
    return b


def _blocks(verdict: dict, figures: dict[str, str]) -> list[tuple]:
    """("h", text) | ("p", text) | ("pre", text) | ("table", header, rows) | ("img", file, alt)."""
    b: list[tuple] = [("h", "Scaling analysis")]
    b.append(
        (
            "p",
            f"Baseline `{verdict['baseline']}`; {verdict['num_used']} of {verdict['num_runs']} "
            f"runs used, {verdict['num_seeds']} seed(s), {verdict['num_resamples']} bootstrap "
            f"draws. {METHOD}",
        )
    )
    if verdict["flops_estimated"]:
        b.append(("p", "Some runs had no `flops`; C = 6 N D was used for them."))
    b.extend(_verdict_blocks(verdict))
    b.append(("h", "Paired gain at each matched (size, tokens)"))
    rows = [
        [
            v["variant"],
            g["size"],
            fmt(g["tokens"], 3),
            g["baseline_arm"],
            fmt(g["gain_loss"]["value"]),
            fmt_ci(g["gain_loss"]["ci95"]),
            fmt(g["gain_pct"]["value"]),
            fmt_ci(g["gain_pct"]["ci95"]),
            g["num_paired_seeds"],
        ]
        for v in verdict["variants"]
        for g in v["gain_pct_by_budget"]
    ]
    header = ["variant", "size", "tokens", "vs", "gain (loss)", "CI", "gain %", "CI", "paired"]
    b.append(("table", header, rows))
    b.append(
        (
            "p",
            "Gains compare the two arms at one (size, tokens) only, on the seeds both "
            "completed; the largest common budget per size feeds k(C).",
        )
    )
    for key, title in (("gain_vs_n", "Gain vs N"), ("k_vs_c", "Effective compute")):
        if key in figures:
            b.append(("img", figures[key], title))
    b.append(("h", "Fitted laws"))
    rows = []
    for f in verdict["fits"]:
        # failed = the draw's fit did not converge; such draws are not in the CI
        used = f"{f['resamples_fitted']} ({f.get('resamples_failed', 0)} failed)"
        for name, p in f["params"].items():
            rows.append([f["variant"], f["law"], name, fmt(p["value"]), fmt_ci(p["ci95"]), used])
    header = ["variant", "law", "parameter", "value", "95% CI", "draws fitted"]
    b.append(("table", header, rows))
    b.append(
        (
            "p",
            "Fits: Chinchilla Approach 3 (log-sum-exp in log space, Huber delta 1e-3 summed "
            "over points, from the initialisation grid, best kept, polished by L-BFGS; draws "
            "warm-started from the full-data optimum). L(N), L(C) use each arm's largest "
            "token budget per size; L(N, D) every budget; k(C) is the joint fit with one "
            "shared E on matched points.",
        )
    )
    if "loss_vs_n" in figures:
        b.append(("img", figures["loss_vs_n"], "Loss vs N"))
    b.extend(_noise_blocks(verdict))
    b.extend(_lr_blocks(verdict, figures))
    if "training_curves" in figures:
        b.append(("h", "Training curves"))
        b.append(("img", figures["training_curves"], "Validation loss during training"))
    b.append(("h", "Excluded runs"))
    if verdict["excluded_runs"]:
        rows = [
            [r["run_id"], r["variant"], r["size"], r["seed"], fmt(r["lr"]), r["reason"]]
            for r in verdict["excluded_runs"]
        ]
        b.append(("table", ["run", "variant", "size", "seed", "lr", "reason"], rows))
    else:
        b.append(("p", "None."))
    return b


def _noise_blocks(verdict: dict) -> list[tuple]:
    b: list[tuple] = [("h", "Seed noise and power")]
    model = verdict["noise_model"]
    if model is not None:
        rows = [
            [s, fmt(u), fmt(e)]
            for s, u, e in zip(model["sizes"], model["sd_seed"], model["sd_run"], strict=True)
        ]
        b.append(("table", ["size", "shared per-seed sd", "per-run sd"], rows))
        b.append(
            (
                "p",
                f"Variance components on {fmt(model['df_seed'], 3)} (shared) and "
                f"{fmt(model['df_run'], 3)} (per-run) degrees of freedom; draws inflated by "
                f"{fmt(model['inflate_seed'], 3)} and {fmt(model['inflate_run'], 3)}.",
            )
        )
    rows = [
        [
            r["size"],
            r["variant"],
            r["num_seeds"],
            fmt(r["seed_sd"]),
            fmt(r.get("paired_diff_sd")),
            fmt(r.get("seeds_needed")) if "detect_gain_pct" in r else "",
        ]
        for r in verdict["seed_noise"]
    ]
    gain = next((r["detect_gain_pct"] for r in verdict["seed_noise"] if "detect_gain_pct" in r), 0)
    header = ["size", "variant", "seeds", "seed sd", "paired diff sd", f"seeds for {gain}%"]
    b.append(("table", header, rows))
    b.append(
        (
            "p",
            f"Seeds needed: paired test, 5% two-sided, 80% power, to detect a gain of {gain}% "
            "of the baseline's loss: n = ((1.96 + 0.84) sd_diff / gain)^2.",
        )
    )
    return b


def _lr_blocks(verdict: dict, figures: dict[str, str]) -> list[tuple]:
    b: list[tuple] = [("h", "Learning-rate selection")]
    if not verdict["lr_selection"]:
        b.append(("p", "No LR recorded: each arm's tuning could not be checked."))
        return b
    lrs = lambda xs: ", ".join(fmt(x, 3) for x in xs) or "none"  # noqa: E731
    rows = [
        [
            r["variant"],
            r["size"],
            fmt(r["tokens"], 3),
            fmt(r["best_lr"], 3),
            lrs(r["lrs"]),
            lrs(r["usable_lrs"]),
            r["state"] if r["bracketed"] else f"**{r['state']}**",
            lrs(r["next_lrs"]) if r["next_lrs"] else "",
        ]
        for r in verdict["lr_selection"]
    ]
    header = ["variant", "size", "tokens", "best LR", "tried", "usable", "state", "add"]
    b.append(("table", header, rows))
    b.append(
        (
            "p",
            f"Best LR = lowest mean `{verdict['lr_chosen_on']}` over all seeds of an LR; an LR "
            "is usable only when every one of its seeds completed (never chosen on the "
            "survivors). An LR whose next step up diverged counts as bracketed; a best LR at "
            "the edge of its grid makes a verdict inconclusive.",
        )
    )
    if "lr_sweeps" in figures:
        b.append(("img", figures["lr_sweeps"], "LR sweeps"))
    return b


def to_markdown(blocks: list[tuple]) -> str:
    out = []
    for block in blocks:
        kind = block[0]
        if kind == "h":
            out.append(f"{'#' if block[1] == 'Scaling analysis' else '##'} {block[1]}\n")
        elif kind == "p":
            out.append(block[1] + "\n")
        elif kind == "pre":
            out.append("```\n" + block[1] + "\n```\n")
        elif kind == "table":
            _, header, rows = block
            out.append("| " + " | ".join(header) + " |")
            out.append("|" + "---|" * len(header))
            out.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
            out.append("")
        elif kind == "img":
            out.append(f"![{block[2]}]({block[1]})\n")
    return "\n".join(out)


def _inline(text: str) -> str:
    """Escape, then the two Markdown marks the blocks use: **bold** and `code`."""
    parts = html.escape(text).split("**")
    text = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = text.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(blocks: list[tuple], out_dir: Path) -> str:
    body = []
    for block in blocks:
        kind = block[0]
        if kind == "h":
            tag = "h1" if block[1] == "Scaling analysis" else "h2"
            body.append(f"<{tag}>{html.escape(block[1])}</{tag}>")
        elif kind == "p":
            body.append(f"<p>{_inline(block[1])}</p>")
        elif kind == "pre":
            body.append(f"<pre>{html.escape(block[1])}</pre>")
        elif kind == "table":
            _, header, rows = block
            head = "".join(f"<th>{_inline(h)}</th>" for h in header)
            cells = "".join(
                "<tr>" + "".join(f"<td>{_inline(str(c))}</td>" for c in row) + "</tr>"
                for row in rows
            )
            body.append(f"<table><tr>{head}</tr>{cells}</table>")
        elif kind == "img":
            data = base64.b64encode((out_dir / block[1]).read_bytes()).decode()
            body.append(f'<img alt="{html.escape(block[2])}" src="data:image/png;base64,{data}">')
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:2em auto}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px}"
        "img{max-width:100%}pre{background:#f6f6f6;padding:1em}"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Scaling analysis</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>"
    )


def write_report(verdict: dict, figures: dict[str, str], out_dir: Path) -> tuple[Path, Path]:
    """Write ``report.md`` (images beside it) and a self-contained ``report.html``."""
    blocks = _blocks(verdict, figures)
    md, page = out_dir / "report.md", out_dir / "report.html"
    md.write_text(to_markdown(blocks))
    page.write_text(to_html(blocks, out_dir))
    return md, page
