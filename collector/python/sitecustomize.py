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
            emit = lib.streamscope_optimizer_step
            emit.argtypes = [ctypes.c_int64, ctypes.c_int64]
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
                    emit(local.starts.pop(), mono())
                except Exception:
                    pass

            register_optimizer_step_pre_hook(pre)
            register_optimizer_step_post_hook(post)
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
