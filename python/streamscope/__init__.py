"""streamscope from Python: the report of a trace as Python objects and
pandas DataFrames, through the same Rust code as the ``streamscope`` CLI.

    import streamscope
    t = streamscope.load("traces/torch-fsdp2-h200x2")
    t.report()          # == json.loads(`streamscope report --format json ...`)
    t.steps             # a pandas DataFrame (a list of dicts without pandas)
    streamscope.compare("serial/", "overlap/")
    streamscope.whatif("run/", comm_scale=0.5)

Errors are :class:`StreamscopeError` with the CLI's one-line message.
Nothing is printed. The API: docs/PYTHON.md.
"""

from __future__ import annotations

import json
import numbers
import os
from typing import Iterable, Optional, Sequence, Tuple, Union

from . import _html, _tables
from ._native import StreamscopeError
from ._native import compare_json as _compare_json
from ._native import parse_steps as _parse_steps
from ._native import report_json as _report_json
from ._native import whatif_json as _whatif_json

__all__ = ["load", "compare", "whatif", "Trace", "Report", "StreamscopeError"]
try:
    from importlib.metadata import version as _version

    __version__ = _version("streamscope")
except Exception:  # not installed as a distribution (a source checkout)
    __version__ = "0.1.0"

PathLike = Union[str, "os.PathLike[str]"]
Steps = Union[int, str, Tuple[int, int], None]


def _paths(path: Union[PathLike, Sequence[PathLike]], more: Iterable[PathLike]) -> list:
    first = list(path) if isinstance(path, (list, tuple)) else [path]
    out = [os.fspath(p) for p in [*first, *more]]
    if not out:
        raise ValueError("no trace path given")
    return out


def _steps(steps: Steps) -> Optional[Tuple[int, int]]:
    """``--steps``: 5, "4..6", "4..=6" or (4, 6), as an inclusive pair."""
    if steps is None:
        return None
    if isinstance(steps, bool):
        raise TypeError("steps: expected an int, 'A..B' or (A, B)")
    if isinstance(steps, numbers.Integral):
        return (int(steps), int(steps))
    if isinstance(steps, str):
        return _parse_steps(steps)
    a, b = steps
    if not isinstance(a, numbers.Integral) or not isinstance(b, numbers.Integral):
        raise TypeError("steps: expected an int, 'A..B' or (A, B)")
    if b < a:
        raise ValueError(f"empty step range {a}..{b}")
    return (int(a), int(b))


class Report(dict):
    """``report --format json`` as a dict (equal to ``json.loads`` of the
    CLI's output), with its tables as DataFrames and an HTML view for
    Jupyter."""

    @property
    def steps(self):
        """One row per rank and step (``steps``): duration, breakdown, syncs."""
        return _tables.steps(self)

    @property
    def syncs(self):
        """Host synchronizations, grouped by pattern and call site, per rank
        and window (in the window, before it, after it)."""
        return _tables.syncs(self)

    @property
    def collectives(self):
        """Per-collective statistics of each rank's headline window."""
        return _tables.collectives(self)

    @property
    def kernels(self):
        """Each rank's top kernels (name, class, count, total and mean ms, share)."""
        return _tables.kernels(self)

    @property
    def memory(self):
        """GPU memory per rank (``ranks[].memory``): the allocator's peak,
        when, reserved then, peak reserved; empty without allocator samples
        (torch.profiler's ``profile_memory=True``)."""
        return _tables.memory(self)

    @property
    def memory_blocks(self):
        """The largest blocks live at each rank's memory peak
        (``ranks[].memory.live_at_peak``): bytes, address, when allocated,
        the op and Python line that allocated them."""
        return _tables.memory_blocks(self)

    @property
    def prefetch_layers(self):
        """All-gather prefetch per layer (``ranks[].prefetch.per_layer``):
        per rank and position in the step, the annotation around the
        launch, how many came late and by how much, the mean slack, the
        bytes gathered and the byte-seconds held early."""
        return _tables.prefetch_layers(self)

    def _repr_html_(self) -> str:
        return _html.report(self)


class Trace:
    """Traces on disk (one run: a file, or a folder of rank files), read and
    analyzed by :func:`load`."""

    def __init__(self, paths: Sequence[str], merge: bool, report_json: str):
        self._paths = tuple(paths)
        self._merge = merge
        self._json = report_json
        self._default: Optional[Report] = None

    @property
    def paths(self) -> Tuple[str, ...]:
        return self._paths

    def report(
        self,
        *,
        rank: Optional[int] = None,
        steps: Steps = None,
        sync_idle_threshold_us: float = 50.0,
        kernel_wait_us: float = 30.0,
    ) -> Report:
        """The report, as ``streamscope report --format json`` with the same
        options (``--rank``, ``--steps``, ``--sync-idle-threshold-us``,
        ``--kernel-wait-us``). With the defaults, the analysis :func:`load`
        made; otherwise the traces are read and analyzed again (GIL
        released). Each call returns a new dict."""
        pair = _steps(steps)
        if (rank, pair, sync_idle_threshold_us, kernel_wait_us) == (None, None, 50.0, 30.0):
            return Report(json.loads(self._json))
        text = _report_json(
            list(self._paths),
            merge=self._merge,
            rank=rank,
            steps=pair,
            sync_idle_threshold_us=float(sync_idle_threshold_us),
            kernel_wait_us=float(kernel_wait_us),
        )
        return Report(json.loads(text))

    def _report(self) -> Report:
        if self._default is None:
            self._default = self.report()
        return self._default

    @property
    def steps(self):
        """:attr:`Report.steps` of the default report."""
        return self._report().steps

    @property
    def syncs(self):
        """:attr:`Report.syncs` of the default report."""
        return self._report().syncs

    @property
    def collectives(self):
        """:attr:`Report.collectives` of the default report."""
        return self._report().collectives

    @property
    def kernels(self):
        """:attr:`Report.kernels` of the default report."""
        return self._report().kernels

    @property
    def memory(self):
        """:attr:`Report.memory` of the default report."""
        return self._report().memory

    @property
    def memory_blocks(self):
        """:attr:`Report.memory_blocks` of the default report."""
        return self._report().memory_blocks

    @property
    def prefetch_layers(self):
        """:attr:`Report.prefetch_layers` of the default report."""
        return self._report().prefetch_layers

    def _repr_html_(self) -> str:
        return self._report()._repr_html_()

    def __repr__(self) -> str:
        ranks = [r["rank"] for r in self._report()["ranks"]]
        return f"<streamscope.Trace {', '.join(self._paths)}: ranks {ranks}>"


def load(path: Union[PathLike, Sequence[PathLike]], *paths: PathLike, merge: bool = False) -> Trace:
    """Reads and analyzes a trace: a ``.pftrace``, a Kineto ``.json``
    (either gzip-compressed), a folder of rank files, several of them (one
    multi-rank run), or rank-set summaries (``report --summary-out``).
    Traces of different runs are refused unless ``merge=True``, as by the
    CLI. Raises :class:`StreamscopeError` with the CLI's message."""
    ps = _paths(path, paths)
    return Trace(ps, merge, _report_json(ps, merge=merge))


def compare(control: PathLike, test: PathLike, *, rank: Optional[int] = None) -> dict:
    """``streamscope compare --format json CONTROL TEST`` as a dict."""
    return json.loads(_compare_json(os.fspath(control), os.fspath(test), rank=rank))


def whatif(
    path: Union[PathLike, Sequence[PathLike]],
    *paths: PathLike,
    comm_scale: Optional[float] = None,
    link_bw: Optional[float] = None,
    compute_scale: Optional[float] = None,
    drop_syncs: Union[str, Sequence[str]] = (),
    launch_queue: Optional[int] = None,
    legacy_stream_nonblocking: bool = False,
    prefetch_deeper: Optional[int] = None,
) -> dict:
    """``streamscope whatif --format json`` as a dict: the steps replayed
    with communication × ``comm_scale`` (or at ``link_bw`` GB/s), compute ×
    ``compute_scale``, and the host syncs matching ``drop_syncs`` removed;
    ``launch_queue`` bounds how far a host freed of its syncs runs ahead
    (launches queued, ``--launch-queue``; default 1024);
    ``legacy_stream_nonblocking`` drops the legacy default stream's implicit
    waits; ``prefetch_deeper`` issues each all-gather that many positions
    earlier (``--prefetch-deeper``)."""
    drops = [drop_syncs] if isinstance(drop_syncs, str) else list(drop_syncs)
    text = _whatif_json(
        _paths(path, paths),
        comm_scale=comm_scale,
        link_bw=link_bw,
        compute_scale=compute_scale,
        drop_syncs=drops,
        launch_queue=launch_queue,
        legacy_stream_nonblocking=legacy_stream_nonblocking,
        prefetch_deeper=prefetch_deeper,
    )
    return json.loads(text)


