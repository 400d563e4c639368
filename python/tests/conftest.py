"""Shared fixtures: the repository's traces/ and the installed CLI."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "traces"
TRACE_SUFFIXES = (".pftrace", ".pftrace.gz", ".perfetto-trace", ".json", ".json.gz")


def _has_traces(d: Path) -> bool:
    return any(f.is_file() and f.name.endswith(TRACE_SUFFIXES) for f in d.iterdir())


def run_folders():
    """Every run in traces/: a folder of trace files, or, for a folder whose
    runs are in subfolders, each subfolder."""
    out = []
    for d in sorted(p for p in TRACES.iterdir() if p.is_dir()):
        if _has_traces(d):
            out.append(d)
        else:
            out.extend(sorted(s for s in d.iterdir() if s.is_dir() and _has_traces(s)))
    return out


def cli_path() -> str:
    """The console script the wheel installed beside this Python."""
    exe = Path(sys.executable).parent / "streamscope"
    if not exe.is_file():
        pytest.fail(f"no installed streamscope CLI at {exe}: install the wheel in this venv")
    return str(exe)


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([cli_path(), *args], capture_output=True, text=True, cwd=REPO)
    if check and p.returncode != 0:
        pytest.fail(f"streamscope {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p


def cli_json(*args: str):
    return json.loads(cli(*args).stdout)


def cli_error(*args: str) -> str:
    """The CLI's one-line error for `args` (it must fail with exit code 2)."""
    p = cli(*args, check=False)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("streamscope: error: ")]
    assert len(lines) == 1, p.stderr
    return lines[0][len("streamscope: error: "):]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    # Relative paths in messages read as the CLI's (run from the repository).
    monkeypatch.chdir(REPO)


def rel(p: Path) -> str:
    return os.path.relpath(p, REPO)
