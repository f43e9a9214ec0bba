"""Report blocks to Markdown and to one self-contained, styled HTML page.

Blocks: ``("h", text)``, ``("h1", text)``, ``("lead", [(outcome, sentence)])``, ``("p", text)``,
``("note", text)`` (a callout), ``("pre", text)``, ``("table", header, rows)``,
``("img", file, caption)``. Inline marks in text: ``**bold**``, ```code```, and
``[[class|text]]`` (a coloured badge in HTML: an outcome name, or ``extrap`` for an
extrapolated number; bold in Markdown). HTML embeds the PNGs as base64 and styles itself with
inline CSS, so the page opens anywhere (an MLflow artifact view, an e-mail) without its
neighbours.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

COLLAPSE_ROWS = 30
_BADGE = re.compile(r"\[\[([\w-]+)\|(.+?)\]\]")

CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg2:#f6f8fa;--extrap:#8250df}
*{box-sizing:border-box}
body{font:15px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:var(--fg);
 max-width:1180px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:26px;margin:8px 0 4px}
h2{font-size:19px;margin:36px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
p{margin:8px 0}
.lead{background:#f0f6ff;border:1px solid #b6d4fe;border-radius:8px;padding:12px 18px;
 margin:16px 0;font-size:17px}
.lead p{margin:6px 0}
.note{background:#f6f0ff;border-left:4px solid var(--extrap);padding:8px 14px;margin:12px 0}
table{border-collapse:collapse;margin:10px 0;font-size:13.5px;width:auto;max-width:100%}
th{background:var(--bg2);text-align:left;font-weight:600}
td,th{border:1px solid var(--line);padding:4px 9px;vertical-align:top}
tr:nth-child(even) td{background:#fbfcfd}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.scroll{overflow-x:auto}
figure{margin:14px 0;text-align:center}
figure img{max-width:100%;height:auto;border:1px solid var(--line);border-radius:6px}
figcaption{color:var(--muted);font-size:13px}
pre{background:var(--bg2);padding:12px 16px;border-radius:6px;font-size:12.5px;overflow-x:auto}
code{background:var(--bg2);padding:1px 4px;border-radius:4px;font-size:90%}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;
 font-size:90%;color:#fff;white-space:nowrap}
.persists,.grows,.helps{background:#1a7f37}.fades,.none,.undetected{background:#6e7781}
.hurts{background:#cf222e}.inconclusive{background:#9a6700}
.extrap{background:var(--extrap)}
summary{cursor:pointer;color:#0969da;margin:6px 0}
"""


def _md_inline(text: str) -> str:
    return _BADGE.sub(lambda m: f"**{m.group(2)}**", text)


def to_markdown(blocks: list[tuple]) -> str:
    out = []
    for block in blocks:
        kind = block[0]
        if kind == "h1":
            out.append(f"# {block[1]}\n")
        elif kind == "h":
            out.append(f"## {block[1]}\n")
        elif kind == "lead":
            out.extend(f"> {_md_inline(s)}\n>" for _, s in block[1])
            out.append("")
        elif kind in ("p", "note"):
            out.append(_md_inline(block[1]) + "\n")
        elif kind == "pre":
            out.append("```\n" + block[1] + "\n```\n")
        elif kind == "table":
            header, rows = block[1], block[2]
            out.append("| " + " | ".join(header) + " |")
            out.append("|" + "---|" * len(header))
            out.extend("| " + " | ".join(_md_inline(str(c)) for c in row) + " |" for row in rows)
            out.append("")
        elif kind == "img":
            out.append(f"![{block[2]}]({block[1]})\n")
    return "\n".join(out)


def inline(text: str) -> str:
    """Escape, then the marks: **bold**, `code`, [[class|badge]]."""
    text = html.escape(text)
    text = _BADGE.sub(lambda m: f'<span class="badge {m.group(1)}">{m.group(2)}</span>', text)
    parts = text.split("**")
    text = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = text.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


_NUMERIC = re.compile(r"^[\u2212\-+]?[\d.,]+(e[+-]?\d+)?[%×KMBT]?( \[.*\])?$")


def _cell(value) -> str:
    text = str(value)
    cls = ' class="num"' if _NUMERIC.match(text) else ""
    return f"<td{cls}>{inline(text)}</td>"


def to_html(blocks: list[tuple], out_dir: Path, title: str = "Scaling analysis") -> str:
    body = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h"):
            tag = "h1" if kind == "h1" else "h2"
            body.append(f"<{tag}>{html.escape(block[1])}</{tag}>")
        elif kind == "lead":
            sentences = "".join(
                f'<p data-outcome="{html.escape(o)}">{inline(s)}</p>' for o, s in block[1]
            )
            body.append(f'<div class="lead" id="headline">{sentences}</div>')
        elif kind == "p":
            body.append(f"<p>{inline(block[1])}</p>")
        elif kind == "note":
            body.append(f'<div class="note">{inline(block[1])}</div>')
        elif kind == "pre":
            body.append(f"<pre>{html.escape(block[1])}</pre>")
        elif kind == "table":
            header, rows = block[1], block[2]
            head = "".join(f"<th>{inline(h)}</th>" for h in header)
            cells = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
            table = f'<div class="scroll"><table><tr>{head}</tr>{cells}</table></div>'
            if len(rows) > COLLAPSE_ROWS:  # a long list is there to look up, not to read
                table = f"<details><summary>{len(rows)} rows (show)</summary>{table}</details>"
            body.append(table)
        elif kind == "img":
            data = base64.b64encode((out_dir / block[1]).read_bytes()).decode()
            alt = html.escape(block[2])
            body.append(
                f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">'
                f"<figcaption>{alt}</figcaption></figure>"
            )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>"
    )
