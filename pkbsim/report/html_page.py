"""Self-contained HTML pages: escaping, tables that sort and filter, embedded PNG plots and a
provenance block, shared by every ``--format html`` report.

A page needs no network: CSS and a small vanilla-JS sorter/filter are inline, images are
``data:`` URIs, and a Content-Security-Policy forbids loading anything else. The same input
gives the same page except the provenance's date line (:class:`Provenance` carries the date, so
tests pass a fixed one).

Sorting: a column whose cells are all numbers (or missing, ``-``) sorts numerically by each
cell's ``data-sort`` value, missing last; any other column sorts as text, digits as numbers.
Filtering: the rows holding every word typed into the table's box stay, the others are hidden.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pkbsim import __version__

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MISSING = ("", "-")
NUMERIC = ' data-type="num"'  # a header's mark: its column sorts numerically
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?", re.IGNORECASE)
_SUFFIXES = ("%", "x", " us", " µs")


@dataclass(frozen=True)
class Cell:
    """A cell shown as ``text`` and sorted by ``key`` (a raw number; None: missing)."""

    text: str
    key: float | None


CellLike = str | Cell


@dataclass(frozen=True)
class Provenance:
    """What made the page: the command as parsed, the topology, the run's date and the inputs
    (label, description) such as a file and its sha256."""

    command: str
    date: str
    topology: str
    inputs: tuple[tuple[str, str], ...] = ()
    version: str = __version__


def esc(text: object) -> str:
    """Text for an element or a quoted attribute value."""
    return html.escape(str(text), quote=True)


def sort_key(text: str) -> float | str | None:
    """A number when ``text`` reads as one (``1,234.5``, ``45.3%``, ``1.20x``, ``12 us``),
    None when missing (empty or ``-``), else the text itself."""
    value = text.strip()
    if value in MISSING:
        return None
    for suffix in _SUFFIXES:
        if value.endswith(suffix):
            value = value[: -len(suffix)]
            break
    if _NUMBER.fullmatch(value):
        return float(value.replace(",", ""))
    return text


def _key(cell: CellLike) -> float | str | None:
    if isinstance(cell, Cell):
        return float(cell.key) if cell.key is not None and math.isfinite(cell.key) else None
    key = sort_key(cell)
    return None if isinstance(key, float) and not math.isfinite(key) else key


def numeric_columns(head: Sequence[str], rows: Sequence[Sequence[CellLike]]) -> list[bool]:
    """Per column: every cell a number or missing, and at least one number."""
    out = []
    for i in range(len(head)):
        keys = [_key(row[i]) for row in rows]
        out.append(any(isinstance(k, float) for k in keys)
                   and all(k is None or isinstance(k, float) for k in keys))
    return out


def heading(text: str, level: int = 2) -> str:
    return f"<h{level}>{esc(text)}</h{level}>"


def paragraph(text: str, cls: str = "") -> str:
    return (f'<p class="{esc(cls)}">' if cls else "<p>") + f"{esc(text)}</p>"


def table(head: Sequence[str], rows: Sequence[Sequence[CellLike]], label: str) -> str:
    """A table that sorts (click a header) and filters (the box above it); ``label`` names it
    for the filter box."""
    numeric = numeric_columns(head, rows)
    ths = "".join(f'<th{NUMERIC if num else ""} tabindex="0">{esc(h)}</th>'
                  for h, num in zip(head, numeric, strict=True))
    out = ['<div class="table">',
           f'<input type="search" placeholder="filter rows" aria-label="filter: {esc(label)}">'
           '<span class="count"></span>',
           f"<table><thead><tr>{ths}</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(_td(cell, num) for cell, num in zip(row, numeric, strict=True))
                   + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _td(cell: CellLike, numeric: bool) -> str:
    text = cell.text if isinstance(cell, Cell) else cell
    if not numeric:
        return f"<td>{esc(text)}</td>"
    key = _key(cell)
    sort = "" if not isinstance(key, float) else str(int(key)) if key.is_integer() and abs(
        key) < 2**53 else repr(key)
    return f'<td class="n" data-sort="{sort}">{esc(text)}</td>'


def image(png: bytes, alt: str) -> str:
    """``png`` embedded as a base64 ``data:`` URI (a ValueError unless it is a PNG)."""
    if not png.startswith(PNG_MAGIC):
        raise ValueError(f"{alt}: not a PNG image")
    data = base64.b64encode(png).decode("ascii")
    return f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}"></figure>'


def provenance_block(p: Provenance) -> str:
    """The version, command, topology, date (one line of its own) and inputs."""
    rows = [("pkbsim", p.version), ("command", p.command), ("topology", p.topology),
            ("date of the run", p.date), *((f"input: {k}", v) for k, v in p.inputs)]
    lines = [f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows]
    return "\n".join(['<section class="provenance"><h2>Provenance</h2><table>', *lines,
                      "</table></section>"])


def page(title: str, body: Sequence[str], provenance: Provenance) -> str:
    """The whole document: ``body`` (fragments from the functions above) under an ``h1`` of
    ``title``, then the provenance block; CSS and the sorter/filter script inline."""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>", f"<style>{CSS}</style>", "</head><body>",
        heading(title, 1), *body, provenance_block(provenance),
        f"<script>{SCRIPT}</script>", "</body></html>"]) + "\n"


CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
       "script-src 'unsafe-inline'")

CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:110em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.5em}h3{font-size:1em}
table{border-collapse:collapse;margin:0.3em 0 1.2em}
th,td{border:1px solid #ccc;padding:3px 8px;font-size:13px;vertical-align:top}
th{background:#f0f0f0;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.table th{cursor:pointer;user-select:none}
.table th[aria-sort=ascending]::after{content:" \\25B2"}
.table th[aria-sort=descending]::after{content:" \\25BC"}
.table input{font-size:13px;padding:2px 4px;width:16em}
.count{color:#666;font-size:12px;margin-left:0.6em}
.note{color:#555}figure{margin:0.5em 0}img{max-width:100%}
.provenance{background:#f7f7f7;border:1px solid #ddd;padding:0.2em 1em;margin-top:2em}
.provenance th{background:none;border:none;white-space:nowrap}
.provenance td{border:none;font-family:monospace;word-break:break-all}
@media print{.table input,.count{display:none}}
""".strip()

SCRIPT = """
(function () {
  "use strict";
  function key(cell, num) {
    var text = num ? cell.getAttribute("data-sort") : cell.textContent.trim();
    if (text === null || text === "" || text === "-") { return null; }
    return num ? parseFloat(text) : text.toLowerCase();
  }
  function sorter(table, th, col) {
    var heads = table.tHead.rows[0].cells, body = table.tBodies[0];
    var num = th.getAttribute("data-type") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var ka = key(a.cells[col], num), kb = key(b.cells[col], num);
      if (ka === null || kb === null) { return ka === kb ? 0 : (ka === null ? 1 : -1); }
      return dir * (num ? ka - kb : ka.localeCompare(kb, undefined, {numeric: true}));
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function filter(box) {
    var rows = box.querySelector("table").tBodies[0].rows;
    var words = box.querySelector("input").value.toLowerCase().split(/\\s+/).filter(Boolean);
    var shown = 0;
    Array.prototype.forEach.call(rows, function (r) {
      var text = r.textContent.toLowerCase();
      var keep = words.every(function (w) { return text.indexOf(w) >= 0; });
      r.hidden = !keep;
      shown += keep ? 1 : 0;
    });
    box.querySelector(".count").textContent =
      (words.length ? shown + " of " : "") + rows.length + " rows";
  }
  document.querySelectorAll("div.table").forEach(function (box) {
    var table = box.querySelector("table");
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener("click", function () { sorter(table, th, col); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter") { sorter(table, th, col); }
      });
    });
    box.querySelector("input").addEventListener("input", function () { filter(box); });
    filter(box);
  });
})();
""".strip()
