"""The API's report equals the CLI's JSON, on every run in traces/."""

import json

import pytest
from conftest import TRACES, cli_json, rel, run_folders

import streamscope

RUNS = run_folders()


def test_every_traces_folder_is_covered():
    # Each folder of traces/ gives a run, itself or its subfolders.
    top = {p.name for p in TRACES.iterdir() if p.is_dir()}
    assert {rel(r).split("/")[1] for r in RUNS} == top
    assert "traces/fsdp-ref-prefetch-h200x2/prefetch-0" in {rel(r) for r in RUNS}


@pytest.mark.parametrize("run", RUNS, ids=[rel(r) for r in RUNS])
def test_report_equals_cli_json(run):
    path = rel(run)
    api = streamscope.load(path).report()
    assert isinstance(api, dict)
    assert api == cli_json("report", "--format", "json", path)
    assert api["ranks"], path


def test_report_options_equal_cli_flags():
    path = "traces/torch-fsdp2-h200x2"
    t = streamscope.load(path)
    assert t.report(rank=1) == cli_json("report", "--format", "json", "--rank", "1", path)
    assert t.report(steps="4..6") == cli_json("report", "--format", "json", "--steps", "4..6", path)
    assert t.report(steps=(4, 6)) == t.report(steps="4..=6")
    assert t.report(steps=5) == cli_json("report", "--format", "json", "--steps", "5", path)
    flags = ["--sync-idle-threshold-us", "10", "--kernel-wait-us", "5"]
    assert t.report(sync_idle_threshold_us=10, kernel_wait_us=5) == cli_json(
        "report", "--format", "json", *flags, path
    )
    # Other options analyze anew: the default report is not changed.
    assert t.report() == cli_json("report", "--format", "json", path)
    assert [r["rank"] for r in t.report(rank=1)["ranks"]] == [1]


def test_several_paths_are_one_run():
    a, b = "traces/torch-fsdp2-h200x2/rank-0.pftrace.gz", "traces/torch-fsdp2-h200x2/rank-1.pftrace.gz"
    assert streamscope.load(a, b).report() == cli_json("report", "--format", "json", a, b)
    assert streamscope.load([a, b]).report() == streamscope.load(a, b).report()


def test_merge_as_the_cli():
    a, b = "traces/fsdp-ref-serial-h200x2", "traces/fsdp-ref-overlap-h200x2"
    with pytest.raises(streamscope.StreamscopeError):
        streamscope.load(a, b)
    merged = streamscope.load(a, b, merge=True).report()
    assert merged == cli_json("report", "--format", "json", "--merge", a, b)


def test_compare_equals_cli():
    a, b = "traces/fsdp-ref-serial-h200x2", "traces/fsdp-ref-overlap-h200x2"
    c = streamscope.compare(a, b)
    assert c == cli_json("compare", "--format", "json", a, b)
    assert streamscope.compare(a, b, rank=0) == cli_json("compare", "--format", "json", "--rank", "0", a, b)


def test_whatif_equals_cli():
    path = "traces/fsdp-ref-overlap-h200x2"
    w = streamscope.whatif(path, comm_scale=0.5)
    assert w == cli_json("whatif", "--format", "json", "--comm-scale", "0.5", path)
    w2 = streamscope.whatif(path, compute_scale=2, drop_syncs="cudaStreamSynchronize")
    assert w2 == cli_json(
        "whatif", "--format", "json", "--compute-scale", "2", "--drop-syncs", "cudaStreamSynchronize", path
    )
    assert w != w2
    w3 = streamscope.whatif(path, prefetch_deeper=1)
    assert w3 == cli_json("whatif", "--format", "json", "--prefetch-deeper", "1", path)


def test_report_is_a_fresh_dict_each_time():
    t = streamscope.load("traces/sync-zoo-h200")
    r = t.report()
    r["ranks"].clear()
    assert t.report()["ranks"]
    assert json.loads(json.dumps(t.report())) == t.report()
