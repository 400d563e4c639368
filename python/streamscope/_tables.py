"""The report's tables as pandas DataFrames (lists of flat dicts without
pandas): nested objects flattened into ``parent_key`` columns (as
``pandas.json_normalize(sep="_")``), lists kept as object columns, and
each column typed from its JSON values: int64 (Int64 where some are
null), float64, bool (boolean where some are null), string."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List


def _flat(row: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}_"))
        else:
            out[prefix + k] = v
    return out


def _dtype(values: List[Any]) -> Any:
    seen = [v for v in values if v is not None]
    nulls = len(seen) < len(values)
    if not seen:
        return "float64" if nulls else None
    if all(isinstance(v, bool) for v in seen):
        return "boolean" if nulls else "bool"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in seen):
        return "Int64" if nulls else "int64"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
        return "float64"
    if all(isinstance(v, str) for v in seen):
        return "string"
    return "object"


def frame(rows: Iterable[Dict[str, Any]]):
    """A DataFrame of `rows` (flattened, typed), or the flat dicts when
    pandas is not installed."""
    flat = [_flat(r) for r in rows]
    try:
        import pandas as pd
    except ImportError:
        return flat
    columns: List[str] = []
    for r in flat:
        for k in r:
            if k not in columns:
                columns.append(k)
    data = {}
    for c in columns:
        values = [r.get(c) for r in flat]
        dtype = _dtype(values)
        if dtype == "object" or dtype is None:
            data[c] = pd.Series(values, dtype="object")
        else:
            data[c] = pd.Series(values, dtype=dtype)
    return pd.DataFrame(data, columns=columns)


def steps(report: Dict[str, Any]):
    return frame(report.get("steps", []))


def syncs(report: Dict[str, Any]):
    rows = []
    for r in report.get("ranks", []):
        for key in ("startup_syncs", "syncs", "after_window_syncs"):
            rows.extend(r.get(key, []))
    return frame(rows)


def collectives(report: Dict[str, Any]):
    return frame(report.get("collectives", []))


def kernels(report: Dict[str, Any]):
    rows = []
    for r in report.get("ranks", []):
        for k in r.get("top_kernels", []):
            rows.append({"rank": r["rank"], **k})
    return frame(rows)


def memory(report: Dict[str, Any]):
    rows = []
    for r in report.get("ranks", []):
        m = r.get("memory")
        if m:
            rows.append({"rank": r["rank"], **{k: v for k, v in m.items() if k not in ("live_at_peak", "out_of_memory")}})
    return frame(rows)


def memory_blocks(report: Dict[str, Any]):
    rows = []
    for r in report.get("ranks", []):
        m = r.get("memory") or {}
        for b in m.get("live_at_peak", []):
            rows.append({"rank": r["rank"], "gpu": m.get("gpu"), **b})
    return frame(rows)



def prefetch_layers(report: Dict[str, Any]):
    rows = []
    for r in report.get("ranks", []):
        for layer in (r.get("prefetch") or {}).get("per_layer", []):
            rows.append({"rank": r["rank"], **layer})
    return frame(rows)
