"""streamscope: Python hooks of `streamscope record`.

`streamscope record` puts this file's folder first on PYTHONPATH. Nothing
happens until torch is imported; then, through ctypes.PyDLL (the GIL is
kept; a few instructions each):
- the collector's frame reader (which reads the Python line of every host
  sync itself, without the GIL) is checked once against sys._getframe: a
  mismatch switches it off with one line on stderr;
- a global optimizer step pre/post hook pair notes every
  torch.optim.Optimizer.step(): a host range "streamscope:optimizer.step"
  in the trace, the end of a training step;
- the start of torch.profiler with CUDA activities is said once, on stderr
  and in the trace (CUPTI takes one subscriber: its CUDA events are
  missing while recorded).
No torch function is wrapped on the hot path: no frame of this file shows
up in user tracebacks or warnings. Nothing here raises into user code. A
user sitecustomize further down the path is still imported (its own
errors reach Python's site module as they would without us).
STREAMSCOPE_PY_HOOK_LIB names the collector (`streamscope record` sets it);
STREAMSCOPE_PYTHON_HOOKS=0 turns this off.
"""

import os
import sys


def _chain_user_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    saved_path = list(sys.path)
    ours = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        try:
            import importlib

            importlib.import_module("sitecustomize")
        except ImportError as e:
            # No user sitecustomize: fine. An import failing inside one is
            # the user's error, reported by site as without us.
            if e.name != "sitecustomize":
                raise
    finally:
        sys.path[:] = saved_path
        if ours is not None:
            sys.modules["sitecustomize"] = ours


# Allocator actions handed to the collector (collector/src/memory.rs).
_ACTIONS = {
    "alloc": 1,
    "free_requested": 2,
    "free_completed": 3,
    "segment_alloc": 4,
    "segment_free": 5,
    "segment_map": 6,
    "segment_unmap": 7,
    "oom": 8,
}


def _user_frame(frames):
    """The first frame of the program's own code in a history entry's
    frames (innermost first), else the innermost; "file.py:L (func)"."""
    first = None
    for f in frames or ():
        name = f.get("filename", "")
        loc = f"{name}:{f.get('line', 0)} ({f.get('name', '')})"
        if first is None:
            first = loc
        if not (name.startswith("<") or "/torch/" in name or "/contextlib.py" in name):
            return loc
    return first


def _here_outside_torch():
    f = sys._getframe(1)
    first = None
    while f is not None:
        name = f.f_code.co_filename
        loc = f"{name}:{f.f_lineno} ({f.f_code.co_name})"
        if first is None:
            first = loc
        if not (name.startswith("<") or "/torch/" in name or "/contextlib.py" in name or name == __file__):
            return loc
        f = f.f_back
    return first


def _memory_mode(value):
    """STREAMSCOPE_MEMORY as one of "on", "lines", "off" (unset or empty:
    "off", the default; another value: "on")."""
    v = (value or "").strip().lower()
    if v in ("", "0", "off", "no", "false"):
        return "off"
    if v in ("1", "lines", "stacks"):
        return "lines"
    return "on"


def _memory_history(torch, lib):
    """GPU memory from the caching allocator's own history
    (torch.cuda.memory._record_memory_history, a bounded ring of
    STREAMSCOPE_MEMORY_ENTRIES events, default 1,000,000), switched on when
    CUDA initializes. At exit, and when an allocation fails, the events not
    yet handed over go to the collector in one call per GPU, with the
    allocator's totals at that instant (which set the totals of every
    earlier event), their clock moved to CLOCK_MONOTONIC (the trace's), and
    the Python line of each allocation when stacks are kept.
    STREAMSCOPE_MEMORY (`record --memory`): "on", the events without
    stacks (no stack is gathered); "lines" (or "1"), with the Python stack
    of each allocation, for its line; unset or "off" (or "0"), no history:
    its cost on a host-bound FSDP2 step is above 1 % (docs/METRICS.md)."""
    mode = _memory_mode(os.environ.get("STREAMSCOPE_MEMORY"))
    if mode == "off":
        return
    import atexit
    import ctypes
    import time
    from array import array

    hist = getattr(torch.cuda.memory, "_record_memory_history", None)
    snapshot = getattr(torch.cuda.memory, "_snapshot", None)
    lazy = getattr(torch.cuda, "_lazy_call", None)
    if hist is None or snapshot is None or lazy is None:
        return
    try:
        entries = max(1000, int(os.environ.get("STREAMSCOPE_MEMORY_ENTRIES", "1000000")))
    except ValueError:
        entries = 1_000_000
    hand = lib.streamscope_memory_events
    hand.argtypes = [ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64]
    hand.restype = ctypes.c_int
    oom_said = lib.streamscope_memory_oom
    oom_said.argtypes = [ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p]
    oom_said.restype = None
    last_us = {}
    state = {"on": False}

    def start():
        try:
            if mode == "on":
                hist(enabled="all", context=None, stacks="python", max_entries=entries)
            else:
                hist(enabled="all", context="alloc", stacks="python", max_entries=entries)
            state["on"] = True
        except Exception:
            return
        try:
            torch._C._cuda_attach_out_of_memory_observer(observed)
        except Exception:
            pass

    def hand_over():
        if not state["on"]:
            return
        s = snapshot()
        # The history's time_us is the wall clock's (approximately);
        # the trace's is CLOCK_MONOTONIC.
        shift_ns = time.monotonic_ns() - time.time_ns()
        for dev, trace in enumerate(s.get("device_traces", ())):
            # The allocator's totals now: allocated moves at "alloc" and
            # "free_requested", reserved at the segment actions.
            allocated = torch.cuda.memory_allocated(dev)
            reserved = torch.cuda.memory_reserved(dev)
            after = last_us.get(dev, -1)
            rows = array("q")
            sites = []
            site_of = {}
            newest = after
            for e in trace:
                t = e.get("time_us", 0)
                if t <= after:
                    continue
                code = _ACTIONS.get(e.get("action"), 0)
                if code == 0:
                    continue
                newest = max(newest, t)
                site = -1
                if code == 1:
                    loc = _user_frame(e.get("frames"))
                    if loc is not None:
                        site = site_of.get(loc)
                        if site is None:
                            site = site_of[loc] = len(sites)
                            sites.append(loc)
                rows.extend((code, e.get("addr", 0), e.get("size", 0), t * 1000 + shift_ns, e.get("stream", 0), site))
            last_us[dev] = newest
            if rows or reserved:
                blob = "\n".join(sites).encode("utf-8", "replace")
                addr, n = rows.buffer_info()
                hand(dev, addr, n // 6, blob, allocated, reserved)

    def observed(device, alloc, device_total, device_free):
        # The observer's third argument is the card's capacity (79.18 GiB
        # on an H100), not what the allocator holds: that is read here.
        try:
            allocated = int(torch.cuda.memory_allocated(int(device)))
        except Exception:
            allocated = 0
        try:
            oom_said(int(device), time.monotonic_ns(), int(alloc), allocated, int(device_free),
                     (_here_outside_torch() or "").encode("utf-8", "replace"))
            hand_over()
        except Exception:
            pass

    def at_exit():
        try:
            hand_over()
        except Exception:
            pass

    lazy(start)
    atexit.register(at_exit)


def _install():
    lib_path = os.environ.get("STREAMSCOPE_PY_HOOK_LIB")
    if not lib_path or os.environ.get("STREAMSCOPE_PYTHON_HOOKS") == "0":
        return
    import importlib.util

    def here(f):
        return f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})".encode("utf-8", "replace")

    def patch(torch):
        import ctypes
        import threading
        import time

        try:
            lib = ctypes.PyDLL(lib_path)
        except OSError:
            return
        try:
            check = lib.streamscope_check_python_frames
            check.argtypes = [ctypes.c_char_p]
            check.restype = ctypes.c_int
            check(here(sys._getframe()))  # both sides read this very line
        except Exception:
            pass

        try:
            # Each step says which optimizer stepped (its id()): a loop
            # with two optimizers is one training step an iteration.
            emit = lib.streamscope_optimizer_step_of
            emit.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_uint64]
            emit.restype = None
            from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

            mono = time.monotonic_ns
            local = threading.local()

            def pre(optimizer, args, kwargs):
                try:
                    local.starts.append(mono())
                except AttributeError:
                    local.starts = [mono()]
                except Exception:
                    pass

            def post(optimizer, args, kwargs):
                try:
                    emit(local.starts.pop(), mono(), id(optimizer))
                except Exception:
                    pass

            register_optimizer_step_pre_hook(pre)
            register_optimizer_step_post_hook(post)
        except Exception:
            pass

        try:
            _memory_history(torch, lib)
        except Exception:
            pass

        try:
            said = lib.streamscope_torch_profiler_started
            said.argtypes = []
            said.restype = ctypes.c_int
            prof = importlib.import_module("torch.autograd.profiler").profile
            name = "_prepare_trace" if hasattr(prof, "_prepare_trace") else "__enter__"
            original = getattr(prof, name)

            def started(self, *args, **kwargs):
                try:
                    acts = getattr(self, "kineto_activities", None)
                    if acts is None or any("CUDA" in str(a) for a in acts):
                        said()
                except Exception:
                    pass
                return original(self, *args, **kwargs)

            setattr(prof, name, started)
        except Exception:
            pass

    class TorchFinder:
        """Patches torch right after `import torch` has run torch/__init__."""

        def find_spec(self, name, path=None, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec("torch")
            loader = getattr(spec, "loader", None)
            exec_module = getattr(loader, "exec_module", None)
            if exec_module is None:
                return spec

            def exec_and_patch(module):
                exec_module(module)
                try:
                    patch(module)
                except Exception:
                    pass

            loader.exec_module = exec_and_patch
            return spec

    sys.meta_path.insert(0, TorchFinder())


try:
    _install()
except Exception:
    pass
_chain_user_sitecustomize()
