"""Shared by the in-process cost scripts (memory-cost.py,
memory-event-cost.py): the spread of per-round differences."""

import statistics


def quartiles(xs):
    """(first quartile, median, third quartile) of xs; with fewer than 4
    values, (min, median, max)."""
    xs = sorted(xs)
    if len(xs) < 4:
        return (xs[0], statistics.median(xs), xs[-1])
    q = statistics.quantiles(xs, n=4)
    return (q[0], q[1], q[2])
