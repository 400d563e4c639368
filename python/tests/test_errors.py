"""Bad input raises StreamscopeError with the CLI's one-line message."""

import gzip

import pytest
from conftest import cli_error, cli_json

import streamscope
from streamscope import StreamscopeError


def _message(excinfo) -> str:
    return str(excinfo.value)


def test_missing_path():
    with pytest.raises(StreamscopeError) as e:
        streamscope.load("traces/no-such-run")
    assert _message(e) == cli_error("report", "traces/no-such-run")
    assert "no-such-run" in _message(e)
    assert "\n" not in _message(e)


def test_parent_folder_names_its_runs():
    with pytest.raises(StreamscopeError) as e:
        streamscope.load("traces")
    assert _message(e) == cli_error("report", "traces")
    assert "subfolders hold traces" in _message(e)


@pytest.mark.parametrize(
    "name, data",
    [
        ("bad.json", b"{not json"),
        ("bad.pftrace", b"\x0a\xff\xff\xff\xff\x0f garbage"),
        ("bad.json.gz", b"not gzip at all"),
        ("empty.pftrace", b""),
    ],
)
def test_damaged_files(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(StreamscopeError) as e:
        streamscope.load(p)
    assert _message(e) == cli_error("report", str(p))
    assert name in _message(e)


def test_truncated_gzip_loads_what_it_holds(tmp_path):
    # As the CLI: never lost data; what was read is reported, the
    # truncation is a data-loss diagnostic.
    src = open("traces/sync-zoo-h200/rank-0.pftrace.gz", "rb").read()
    p = tmp_path / "rank-0.pftrace.gz"
    p.write_bytes(src[: len(src) // 2])
    r = streamscope.load(p).report()
    assert r == cli_json("report", "--format", "json", str(p))
    kinds = {(d["kind"], d["severity"]) for d in r["diagnostics"]}
    assert ("truncated", "data_loss") in kinds
    assert "diagnostic" in r._repr_html_()


def test_rank_and_steps_that_select_nothing():
    t = streamscope.load("traces/sync-zoo-h200")
    with pytest.raises(StreamscopeError) as e:
        t.report(rank=7)
    assert _message(e) == cli_error("report", "--rank", "7", "traces/sync-zoo-h200")
    with pytest.raises(StreamscopeError) as e:
        t.report(steps="9000..9001")
    assert _message(e) == cli_error("report", "--steps", "9000..9001", "traces/sync-zoo-h200")


def test_bad_options():
    t = streamscope.load("traces/sync-zoo-h200")
    with pytest.raises(StreamscopeError, match="non-negative"):
        t.report(kernel_wait_us=-1)
    with pytest.raises(ValueError, match="empty step range"):
        t.report(steps="6..4")
    with pytest.raises(ValueError, match="bad step number"):
        t.report(steps="x..4")
    with pytest.raises(TypeError):
        t.report(bogus=1)
    with pytest.raises(TypeError):
        t.report(steps=(1.5, 3))
    with pytest.raises(StreamscopeError, match="expected a positive number"):
        streamscope.whatif("traces/sync-zoo-h200", compute_scale=float("nan"))
    with pytest.raises(StreamscopeError, match="positive"):
        streamscope.whatif("traces/sync-zoo-h200", comm_scale=0)
    with pytest.raises(StreamscopeError, match="cannot be used together"):
        streamscope.whatif("traces/sync-zoo-h200", comm_scale=0.5, link_bw=100)


def test_compare_without_common_rank():
    with pytest.raises(StreamscopeError) as e:
        streamscope.compare("traces/sync-zoo-h200", "traces/fsdp-ref-overlap-h200x2", rank=1)
    assert _message(e) == cli_error(
        "compare", "--rank", "1", "traces/sync-zoo-h200", "traces/fsdp-ref-overlap-h200x2"
    )


def test_gzip_of_garbage(tmp_path):
    p = tmp_path / "rank-0.json.gz"
    p.write_bytes(gzip.compress(b"[1, 2, 3]"))
    with pytest.raises(StreamscopeError) as e:
        streamscope.load(p)
    assert _message(e) == cli_error("report", str(p))


def test_whatif_refusal_is_the_cli_line():
    with pytest.raises(StreamscopeError) as e:
        streamscope.whatif("traces/fsdp-ref-overlap-h200x2", drop_syncs=["no-such-call"])
    assert _message(e) == cli_error(
        "whatif", "--drop-syncs", "no-such-call", "traces/fsdp-ref-overlap-h200x2"
    )
    assert type(e.value).__module__ == "streamscope"
    # A recording that does not say how its streams were created.
    with pytest.raises(StreamscopeError) as e:
        streamscope.whatif("traces/sync-zoo-h200", legacy_stream_nonblocking=True)
    assert _message(e) == cli_error(
        "whatif", "--legacy-stream-nonblocking", "traces/sync-zoo-h200"
    )
