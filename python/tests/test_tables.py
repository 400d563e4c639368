"""The tables as DataFrames: rows from the report, flat snake_case
columns, proper dtypes; lists of dicts without pandas."""

import sys
import threading
import time

import pytest

import streamscope

pd = pytest.importorskip("pandas")

PATH = "traces/torch-fsdp2-h200x2"


@pytest.fixture(scope="module")
def trace():
    return streamscope.load(PATH)


def test_steps(trace):
    r = trace.report()
    df = trace.steps
    assert isinstance(df, pd.DataFrame)
    assert len(df) == len(r["steps"])
    assert list(df["step"]) == [s["step"] for s in r["steps"]]
    assert df["rank"].dtype == "int64"
    assert df["duration_us"].dtype == "float64"
    assert pd.api.types.is_string_dtype(df["name"].dtype)
    # Nested objects flattened as json_normalize(sep="_") would.
    assert df["breakdown_overlap_pct"].tolist() == [s["breakdown"]["overlap_pct"] for s in r["steps"]]
    # A column with nulls keeps its kind (nullable Int64, NaN in float64).
    assert all(c == c.lower() and " " not in c for c in df.columns)


def test_syncs(trace):
    r = trace.report()
    df = trace.syncs
    n = sum(len(k[w]) for k in r["ranks"] for w in ("syncs", "startup_syncs", "after_window_syncs"))
    assert len(df) == n > 0
    assert set(df["pattern"]) >= {"item-like"}
    assert df["count"].dtype == "int64"
    assert df["gpu_idle_us"].dtype == "float64"
    # per_step is null outside the window: float64 with NaN.
    assert df["per_step"].dtype == "float64"
    assert df["per_step"].isna().any()


def test_collectives(trace):
    r = trace.report()
    df = trace.collectives
    assert len(df) == len(r["collectives"]) > 0
    assert set(df["collective"]) == {c["collective"] for c in r["collectives"]}
    # bytes: null in this trace (no record_param_comms): a nullable Int64
    # or float column, never object.
    assert df["bytes"].dtype != "object"
    assert df["total_us"].sum() == pytest.approx(sum(c["total_us"] for c in r["collectives"]))


def test_kernels(trace):
    r = trace.report()
    df = trace.kernels
    assert len(df) == sum(len(k["top_kernels"]) for k in r["ranks"])
    assert list(df.columns[:2]) == ["rank", "name"]
    assert df["count"].dtype == "int64"
    top0 = df[df["rank"] == 0].iloc[0]
    assert top0["name"] == r["ranks"][0]["top_kernels"][0]["name"]
    assert top0["total_ms"] == r["ranks"][0]["top_kernels"][0]["total_ms"]


def test_report_options_give_their_tables(trace):
    df = trace.report(rank=1).kernels
    assert set(df["rank"]) == {1}


def test_nullable_int_column():
    from streamscope import _tables

    df = _tables.frame([{"a": 1, "b": {"c": None}}, {"a": None, "b": {"c": True}}])
    assert list(df.columns) == ["a", "b_c"]
    assert str(df["a"].dtype) == "Int64"
    assert str(df["b_c"].dtype) == "boolean"


def test_without_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    t = streamscope.load("traces/sync-zoo-h200")
    rows = t.kernels
    assert isinstance(rows, list) and rows
    assert rows[0]["rank"] == t.report()["ranks"][0]["rank"]
    assert rows[0]["name"] == t.report()["ranks"][0]["top_kernels"][0]["name"]
    assert isinstance(t.steps, list)


def test_the_gil_is_released_while_loading():
    # While another thread loads and analyzes, this one keeps running.
    ticks = 0
    done = threading.Event()

    def work():
        for _ in range(3):
            streamscope.load(PATH)
        done.set()

    th = threading.Thread(target=work)
    t0 = time.perf_counter()
    th.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.002)
    th.join()
    elapsed = time.perf_counter() - t0
    # With the GIL held through the loads, this loop would run about once.
    assert elapsed > 0.05
    assert ticks >= 20, (ticks, elapsed)


def test_memory_and_blocks_at_the_peak():
    # HTA's df_index_resolver trace: torch.profiler with profile_memory=True.
    t = streamscope.load("core/tests/data/hta/df_index_resolver/df_index_resolver.json.gz")
    r = t.report()
    m = r["ranks"][0]["memory"]
    df = t.memory
    assert len(df) == len(r["ranks"]) == 1
    assert df["peak_allocated_bytes"].tolist() == [m["peak_allocated_bytes"]] == [6629508096]
    assert "live_at_peak" not in df.columns
    b = t.memory_blocks
    assert len(b) == len(m["live_at_peak"]) == 10
    assert b["bytes"].tolist() == [x["bytes"] for x in m["live_at_peak"]]
    assert b["bytes"].is_monotonic_decreasing
    assert b["bytes"].dtype == "int64"
    assert "aten::mm" in set(b["op"])
    # A trace without allocator samples: empty tables.
    assert len(streamscope.load(PATH).memory) == 0


def test_prefetch_per_layer():
    # fsdp-ref with the NCCL plugin: 8 blocks gathered forward, then backward.
    t = streamscope.load("traces/fsdp-ref-nccl-h200x2")
    r = t.report()
    df = t.prefetch_layers
    assert len(df) == sum(len(k["prefetch"]["per_layer"]) for k in r["ranks"]) == 32
    first = df[(df["rank"] == 0) & (df["position"] == 0)]
    assert first["label"].iloc[0].startswith("all_gather forward block 0 (")
    held = df[df["rank"] == 0]["held_early_byte_s"].sum()
    want = r["ranks"][0]["prefetch"]["held_early_byte_s"]
    assert abs(held - want) <= 1e-9 * want
    # No all-gathers (a one-GPU sync zoo): an empty table.
    assert len(streamscope.load("traces/sync-zoo-h200").prefetch_layers) == 0
