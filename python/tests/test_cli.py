"""The installed CLI: `streamscope` and `python -m streamscope` run the
bundled binary, and `record` finds the bundled collector."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, cli

import streamscope


def test_installed_cli_reports_a_bundled_trace():
    p = cli("report", "traces/torch-fsdp2-h200x2")
    assert "rank 0" in p.stdout or "rank" in p.stdout
    assert "median" in p.stdout.lower()


def test_python_dash_m():
    p = subprocess.run(
        [sys.executable, "-m", "streamscope", "report", "--format", "json", "traces/sync-zoo-h200"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == cli("report", "--format", "json", "traces/sync-zoo-h200").stdout


def test_exit_code_and_error_line():
    p = subprocess.run(
        [sys.executable, "-m", "streamscope", "report", "traces/no-such-run"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 2
    assert p.stderr.startswith("streamscope: error: loading traces/no-such-run")


def test_wheel_bundles_the_binaries():
    bin_dir = Path(streamscope.__file__).parent / "_bin"
    for name in ("streamscope", "streamscope-gpu-sampler"):
        assert os.access(bin_dir / name, os.X_OK), name
    assert (bin_dir / "libstreamscope_collector.so").is_file()


def test_record_finds_the_collector_in_the_wheel(tmp_path):
    # No GPU here: the command runs untraced by CUDA, but `record` must have
    # found and injected the bundled collector (it says so otherwise).
    out = tmp_path / "rec"
    probe = "import os; print(os.environ.get('CUDA_INJECTION64_PATH', ''))"
    # Without --allow-untraced, `record` refuses to run the command when it
    # finds no collector.
    p = cli("record", "-o", str(out), "--", sys.executable, "-c", probe, check=False)
    assert "not found" not in p.stderr, p.stderr
    injected = p.stdout.strip().splitlines()[0]
    bundled = Path(streamscope.__file__).parent / "_bin" / "libstreamscope_collector.so"
    assert Path(injected).resolve() == bundled.resolve(), (p.stdout, p.stderr)


def test_version_is_the_distribution_s():
    from importlib.metadata import version

    assert streamscope.__version__ == version("streamscope")
