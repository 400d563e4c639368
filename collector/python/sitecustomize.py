"""streamscope: the Python call sites of host syncs.

`streamscope record` puts this file's folder first on PYTHONPATH. PyTorch
drops the GIL around the CUDA calls of `.item()`, `torch.cuda.synchronize()`
and the like, so the collector cannot read the Python stack at the moment of
the CUDA call. These thin wrappers tell the collector the caller's
file:line (a thread-local in libstreamscope_collector) just before calling
the original, and clear it after. Nothing happens until torch is imported;
Tensor methods of CPU tensors and torch.compile regions run the original
at once; nothing here raises into user code. A user sitecustomize further
down the path is still imported (its own errors reach Python's site module
as they would without us). STREAMSCOPE_PY_HOOK_LIB names the collector
(`streamscope record` sets it); STREAMSCOPE_PYTHON_HOOKS=0 turns this off.
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
    import ctypes
    import functools
    import importlib.util
    import threading

    this_file = os.path.abspath(__file__)
    active = threading.local()

    try:
        # PyDLL: the call keeps the GIL (it is a few instructions).
        set_location = ctypes.PyDLL(lib_path).streamscope_set_python_location
    except (OSError, AttributeError):
        return
    set_location.argtypes = [ctypes.c_char_p]
    set_location.restype = None

    def caller():
        f = sys._getframe(2)
        while f is not None:
            name = f.f_code.co_filename
            if not (
                "/torch/" in name or name.startswith("<") or name.endswith("contextlib.py") or name == this_file
            ):
                break
            f = f.f_back
        if f is None:
            return None
        return f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})".encode("utf-8", "replace")

    def patch(torch):
        compiler = getattr(torch, "compiler", None)
        is_compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

        def on_cuda(args):
            try:
                return bool(args[0].is_cuda)
            except Exception:
                return False

        def wrap(fn, tensor_method):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                # Inside another wrapped call (tolist -> cpu), keep the outer site.
                try:
                    skip = is_compiling() or getattr(active, "on", False) or (tensor_method and not on_cuda(args))
                except Exception:
                    skip = True
                if skip:
                    return fn(*args, **kwargs)
                active.on = True
                try:
                    try:
                        set_location(caller())
                    except Exception:
                        pass
                    return fn(*args, **kwargs)
                finally:
                    active.on = False
                    try:
                        set_location(None)
                    except Exception:
                        pass

            wrapper.__streamscope_wrapped__ = True
            return wrapper

        cuda = getattr(torch, "cuda", None)
        targets = [(torch.Tensor, n) for n in ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__")]
        targets += [(cuda, "synchronize"), (getattr(cuda, "Stream", None), "synchronize"), (getattr(cuda, "Event", None), "synchronize")]
        for owner, name in targets:
            original = getattr(owner, name, None) if owner is not None else None
            if original is None or getattr(original, "__streamscope_wrapped__", False):
                continue
            try:
                setattr(owner, name, wrap(original, owner is torch.Tensor))
            except (AttributeError, TypeError):
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
