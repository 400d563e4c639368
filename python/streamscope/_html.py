"""A report's headline as HTML tables, for Jupyter (``_repr_html_``)."""

from __future__ import annotations

from html import escape
from typing import Any, Dict, List, Sequence


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return escape(str(v))


def _table(caption: str, head: Sequence[str], rows: List[Sequence[Any]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return (
        f"<table><caption style='text-align:left'><b>{escape(caption)}</b></caption>"
        f"<thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    )


def report(r: Dict[str, Any]) -> str:
    head = r.get("headline", {})
    ranks = head.get("ranks", [])
    steps = [
        [
            k.get("rank"),
            k.get("device"),
            k.get("window"),
            k.get("steps"),
            k.get("median_step_ms"),
            k.get("min_step_ms"),
            k.get("max_step_ms"),
            k.get("overlap_pct"),
            k.get("exposed_comm_ms_per_step"),
            k.get("idle_pct"),
        ]
        for k in ranks
    ]
    parts = [
        _table(
            "Per rank (steady-state steps)",
            [
                "rank",
                "device",
                "window",
                "steps",
                "median step ms",
                "min ms",
                "max ms",
                "overlap %",
                "exposed comm ms/step",
                "GPU idle %",
            ],
            steps,
        )
    ]
    syncs = [
        [k.get("rank"), s.get("pattern"), s.get("api"), s.get("where"), s.get("count"),
         s.get("gpu_idle_ms_per_step")]
        for k in ranks
        if (s := k.get("costliest_sync"))
    ]
    if syncs:
        parts.append(
            _table(
                "Costliest host sync",
                ["rank", "pattern", "api", "where", "count", "GPU idle ms/step"],
                syncs,
            )
        )
    kernels = [
        [k.get("rank"), t.get("name"), t.get("class"), t.get("count"), t.get("per_step_ms"),
         t.get("share_pct")]
        for k in ranks
        if (t := k.get("top_kernel"))
    ]
    if kernels:
        parts.append(
            _table(
                "Top kernel",
                ["rank", "kernel", "class", "count", "ms/step", "share of GPU time %"],
                kernels,
            )
        )
    s = head.get("straggler")
    if s:
        parts.append(
            "<p>Straggler: rank {} in {} of {} steps (median wait {} ms)</p>".format(
                _cell(s.get("rank")), _cell(s.get("steps")), _cell(s.get("of_steps")),
                _cell(s.get("median_wait_ms")),
            )
        )
    n = len(r.get("diagnostics", []))
    if n:
        parts.append(f"<p>{n} diagnostic(s): see <code>report['diagnostics']</code></p>")
    return "<div class='streamscope-report'>" + "".join(parts) + "</div>"
