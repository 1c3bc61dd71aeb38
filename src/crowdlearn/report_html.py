"""One self-contained HTML page for a fit: what a colleague needs to trust (or not) the labels.

:func:`render_html` draws, with inline SVG and a few lines of inline JavaScript (no CDN, no
external file; the page opens offline):

* a summary (answers, tasks, workers, classes, method, iterations, convergence);
* a sortable worker table (answers, estimated accuracy, agreement with the consensus,
  spammer and adversary flags from :mod:`crowdlearn.diagnostics.detection`, worst class),
  capped at the ``max_workers`` workers with the most answers (the page says so);
* the confusion matrices of the ``max_confusions`` busiest workers, as a grid of heat maps;
* the histogram of task confidences and the ``max_doubtful`` least confident tasks;
* with gold: accuracy, log-loss and a reliability diagram (confidence bins against accuracy);
* the convergence curve (``history_``);
* a method comparison table when several fits are given.

Only summaries and capped tables are embedded, so the page stays small for any number of
tasks (under 2 MB at 10^5 tasks; tested).
"""

from __future__ import annotations

import html
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .core.gold import keyed_gold

__all__ = ["render_html"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}
th{background:#f3f3f3;cursor:pointer;user-select:none}th.sorted-asc:after{content:" \\25B2"}th.sorted-desc:after{content:" \\25BC"}
td.l,th.l{text-align:left}.flag{color:#b00;font-weight:600}.note{color:#666;font-size:12px}
.grid{display:flex;flex-wrap:wrap;gap:10px}.cell{font-size:11px;text-align:center}
.kv td{text-align:left}.scroll{max-height:360px;overflow-y:auto;display:inline-block;border:1px solid #eee}
.charts{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}
"""

_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
    var body=t.tBodies[0],rows=Array.from(body.rows),asc=!th.classList.contains('sorted-asc');
    t.querySelectorAll('th').forEach(function(h){h.classList.remove('sorted-asc','sorted-desc')});
    th.classList.add(asc?'sorted-asc':'sorted-desc');
    rows.sort(function(a,b){var x=a.cells[i].dataset.v,y=b.cells[i].dataset.v;
      var nx=parseFloat(x),ny=parseFloat(y);
      var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:String(x).localeCompare(String(y));return asc?c:-c;});
    rows.forEach(function(r){body.appendChild(r)});});});});
"""


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _fmt(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else ""
    if isinstance(v, (float, np.floating)):
        return "" if np.isnan(v) else f"{v:.3f}"
    return _esc(v)


def _table(df: pd.DataFrame, cls: str = "sortable", left: tuple = ()) -> str:
    head = "".join(f'<th class="{"l" if c in left else ""}">{_esc(c)}</th>' for c in df.columns)
    rows = []
    for _, r in df.iterrows():
        cells = []
        for c in df.columns:
            v = r[c]
            key = "" if (isinstance(v, float) and np.isnan(v)) else (int(v) if isinstance(v, (bool, np.bool_)) else v)
            flag = ' flag' if isinstance(v, (bool, np.bool_)) and v else ''
            cells.append(f'<td class="{"l" if c in left else ""}{flag}" data-v="{_esc(key)}">{_fmt(v)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _svg_bars(values: np.ndarray, edges: np.ndarray, xlabel: str, ylabel: str, cls: str) -> str:
    w, h, pad = 420, 220, 36
    top = max(values.max(), 1)
    bw = (w - 2 * pad) / len(values)
    bars = "".join(
        f'<rect x="{pad + i * bw:.1f}" y="{h - pad - (h - 2 * pad) * v / top:.1f}" width="{bw - 1:.1f}" '
        f'height="{(h - 2 * pad) * v / top:.1f}" fill="#4a7ab5"><title>{edges[i]:.2f}-{edges[i + 1]:.2f}: {int(v)}</title></rect>'
        for i, v in enumerate(values))
    return (f'<svg class="{cls}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">{bars}'
            f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#333"/>'
            f'<text x="{w / 2}" y="{h - 6}" font-size="11" text-anchor="middle">{_esc(xlabel)}</text>'
            f'<text x="10" y="{h / 2}" font-size="11" transform="rotate(-90 10 {h / 2})" text-anchor="middle">{_esc(ylabel)}</text>'
            f'<text x="{pad}" y="{h - pad + 14}" font-size="10">{edges[0]:.2f}</text>'
            f'<text x="{w - pad}" y="{h - pad + 14}" font-size="10" text-anchor="end">{edges[-1]:.2f}</text></svg>')


def _svg_line(x: np.ndarray, y: np.ndarray, cls: str, xlabel: str, ylabel: str, diagonal: bool = False,
              xlim=None, ylim=None, counts=None) -> str:
    """A line with a dot per point; ``counts`` (optional) sizes the dots by area and is named in
    each dot's tooltip (a reliability bin of 3 tasks should not look like one of 300)."""
    w, h, pad = 420, 240, 40
    x0, x1 = xlim or (float(np.min(x)), float(np.max(x)) if len(x) > 1 else float(np.min(x)) + 1)
    y0, y1 = ylim or (float(np.min(y)), float(np.max(y)))
    if y1 <= y0:
        y1 = y0 + 1
    if x1 <= x0:
        x1 = x0 + 1
    px = lambda v: pad + (w - 2 * pad) * (v - x0) / (x1 - x0)
    py = lambda v: h - pad - (h - 2 * pad) * (v - y0) / (y1 - y0)
    pts = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(x, y))
    if counts is None:
        radii, tips = [3.0] * len(x), [""] * len(x)
    else:
        counts = np.asarray(counts, dtype=float)
        radii = 2.0 + 6.0 * np.sqrt(counts / max(float(counts.max(initial=0.0)), 1.0))
        tips = [f" ({int(n)} tasks)" for n in counts]
    dots = "".join(f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="{r:.1f}" fill="#c0392b" fill-opacity="0.8">'
                   f'<title>{a:.3f}, {b:.3f}{tip}</title></circle>'
                   for a, b, r, tip in zip(x, y, radii, tips))
    diag = (f'<line x1="{px(x0)}" y1="{py(y0)}" x2="{px(x1)}" y2="{py(y1)}" stroke="#999" stroke-dasharray="4"/>'
            if diagonal else "")
    return (f'<svg class="{cls}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">'
            f'<rect x="{pad}" y="{pad}" width="{w - 2 * pad}" height="{h - 2 * pad}" fill="none" stroke="#ccc"/>{diag}'
            f'<polyline points="{pts}" fill="none" stroke="#c0392b"/>{dots}'
            f'<text x="{w / 2}" y="{h - 8}" font-size="11" text-anchor="middle">{_esc(xlabel)}</text>'
            f'<text x="12" y="{h / 2}" font-size="11" transform="rotate(-90 12 {h / 2})" text-anchor="middle">{_esc(ylabel)}</text>'
            f'<text x="{pad}" y="{h - pad + 14}" font-size="10">{x0:.3g}</text>'
            f'<text x="{w - pad}" y="{h - pad + 14}" font-size="10" text-anchor="end">{x1:.3g}</text>'
            f'<text x="{pad - 4}" y="{h - pad}" font-size="10" text-anchor="end">{y0:.3g}</text>'
            f'<text x="{pad - 4}" y="{pad + 4}" font-size="10" text-anchor="end">{y1:.3g}</text></svg>')


def _svg_confusion(conf: np.ndarray, classes, title: str) -> str:
    k = conf.shape[0]
    s = max(8, min(28, 168 // max(k, 1)))
    cells = "".join(
        f'<rect x="{j * s}" y="{i * s + 14}" width="{s}" height="{s}" fill="rgb({int(255 - 200 * conf[i, j])},'
        f'{int(255 - 140 * conf[i, j])},255)"><title>true {_esc(classes[i])}, answered {_esc(classes[j])}: {conf[i, j]:.2f}</title></rect>'
        for i in range(k) for j in range(k))
    return (f'<div class="cell"><svg class="confusion" width="{k * s}" height="{k * s + 14}" xmlns="http://www.w3.org/2000/svg">'
            f'<text x="0" y="10" font-size="10">{_esc(title)[:24]}</text>{cells}</svg></div>')


def render_html(result, *, truth: pd.Series | None = None, history: list | None = None,
                flags: pd.DataFrame | None = None, comparison: pd.DataFrame | None = None,
                summary: Mapping[str, Any] | None = None, max_workers: int = 500, max_confusions: int = 24,
                max_doubtful: int = 50, title: str | None = None) -> str:
    """The page for an :class:`~crowdlearn.report.AggregationResult` (see the module docstring).

    Parameters
    ----------
    result : AggregationResult
    truth : Series task -> true label, optional (accuracy, log-loss, reliability diagram);
        keyed by task id, an array or list is refused
    history : list of float, optional (the fit's objective per iteration)
    flags : DataFrame indexed by worker with boolean ``spammer`` / ``adversary`` columns, optional
    comparison : DataFrame, optional (one row per method: shown as a table)
    summary : mapping, optional (extra summary lines)
    """
    tasks, workers = result.tasks, result.workers.copy()
    n_answers = int(workers["n_labels"].sum())
    parts = [f"<h1>{_esc(title or f'crowdlearn report: {result.method}')}</h1>"]
    probas = getattr(result, "probas", None)
    classes = list(probas.columns) if probas is not None else sorted(tasks["label"].unique(), key=str)
    history = history if history is not None else getattr(result, "history", None)
    kv = {"method": result.method, "answers": n_answers, "tasks": len(tasks), "workers": len(workers),
          "classes": len(classes)}
    kv.update(summary or {})
    parts.append("<h2>Summary</h2><table class='kv'>" + "".join(
        f"<tr><th class='l'>{_esc(k)}</th><td>{_fmt(v)}</td></tr>" for k, v in kv.items()) + "</table>")

    # workers
    if flags is not None:
        for col in ("spammer", "adversary"):
            if col in flags:
                workers[col] = flags[col].reindex(workers.index).fillna(False).astype(bool)
    shown = workers.sort_values("n_labels", ascending=False).head(max_workers)
    wt = shown.reset_index().rename(columns={shown.index.name or "index": "worker"})
    wt = wt.rename(columns={wt.columns[0]: "worker"})
    note = (f"<p class='note'>The {max_workers} workers with the most answers of {len(workers)}; "
            "the full table is <code>summarize(...).workers</code>.</p>" if len(workers) > max_workers else "")
    parts.append("<h2>Workers</h2><p class='note'>Click a header to sort.</p>" + note
                 + "<div class='scroll'>" + _table(wt, "sortable workers", left=("worker", "worst_class")) + "</div>")

    # confusion grid
    if result.confusions is not None:
        pos = {w: i for i, w in enumerate(result.workers.index)}
        busiest = shown.index[:max_confusions]
        grid = "".join(_svg_confusion(result.confusions[pos[w]], classes, str(w)) for w in busiest)
        parts.append(f"<h2>Confusion matrices of the {len(busiest)} busiest workers</h2>"
                     "<p class='note'>Rows: true class; columns: answered class; darker = more likely.</p>"
                     f"<div class='grid confusion-grid'>{grid}</div>")

    # confidence
    conf = tasks["confidence"].to_numpy(float)
    counts, edges = np.histogram(conf, bins=20, range=(max(0.0, conf.min()) if len(conf) else 0.0, 1.0))
    parts.append("<h2>Task confidence</h2>" + _svg_bars(counts.astype(float), edges, "confidence (max posterior)", "tasks", "histogram"))
    doubt = tasks.sort_values("confidence").head(max_doubtful).reset_index()
    doubt = doubt.rename(columns={doubt.columns[0]: "task"})
    parts.append(f"<h3>The {len(doubt)} least confident tasks</h3><div class='scroll'>"
                 + _table(doubt, "sortable doubtful", left=("task", "label")) + "</div>")

    # gold
    if truth is not None:
        t = keyed_gold(truth, "truth").reindex(tasks.index)
        known = t.notna().to_numpy()
        if known.any():
            hit = (tasks["label"].to_numpy() == t.to_numpy())[known]
            acc = float(hit.mean())
            lines = [f"accuracy {acc:.4f} on {int(known.sum())} gold tasks"]
            if probas is not None:
                cols = pd.Index(probas.columns).get_indexer(t[known])
                ok = cols >= 0
                rows = probas.reindex(tasks.index).to_numpy(float)[known][ok]
                p = np.clip(rows[np.arange(len(rows)), cols[ok]], 1e-12, 1.0)
                lines.append(f"log-loss {float(-np.log(p).mean()):.4f}")
            bins = np.linspace(conf[known].min() if known.any() else 0, 1, 11)
            idx = np.clip(np.digitize(conf[known], bins) - 1, 0, len(bins) - 2)
            xs, ys, ns = [], [], []
            for b in range(len(bins) - 1):
                m = idx == b
                if m.sum() >= 1:
                    xs.append(conf[known][m].mean())
                    ys.append(hit[m].mean())
                    ns.append(int(m.sum()))
            parts.append("<h2>Against gold</h2><p>" + "; ".join(lines) + "</p>"
                         + "<p class='note'>Reliability: gold tasks binned by confidence; a dot's area is "
                           "its number of tasks.</p>"
                         + _svg_line(np.array(xs), np.array(ys), "reliability", "confidence", "accuracy",
                                     diagonal=True, xlim=(0.0, 1.0), ylim=(0.0, 1.0), counts=ns))
    if history:
        h = np.asarray(history, float)
        parts.append("<h2>Convergence</h2>" + _svg_line(np.arange(1, len(h) + 1), h, "convergence", "iteration", "objective"))
    if comparison is not None and len(comparison):
        parts.append("<h2>Method comparison</h2>" + _table(comparison.reset_index(), "sortable comparison", left=("method",)))
    body = "\n".join(parts)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(title or 'crowdlearn report')}</title>"
            f"<style>{_CSS}</style></head><body>{body}<script>{_JS}</script></body></html>")
