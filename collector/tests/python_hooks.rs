//! The Python side of the collector, with python3 (and python3.10 to
//! python3.13 when they are installed) against a stand-in `torch` package:
//! - the frame reader (collector/src/pyframes.rs) returns the user's
//!   file:line from inside a C call made with the GIL released (what a
//!   CUDA callback inside `.item()` sees), through torch frames, generators,
//!   methods and other threads;
//! - python/sitecustomize.py: optimizer steps reach the library, a started
//!   torch.profiler is said once, warnings and tracebacks keep the user's
//!   frames (no frame of sitecustomize.py), a user sitecustomize still runs
//!   and its own import error is reported by Python.
//!
//! Needs python3 and the built cdylib (skipped without, except under CI).

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::cdylib;

/// A stand-in torch: `Tensor.item()` "syncs" by calling into the collector
/// through ctypes.CDLL, which releases the GIL, as PyTorch does around its
/// CUDA calls. The location comes back as the result.
const FAKE_TORCH: &str = r#"import ctypes, os, warnings
_lib = ctypes.CDLL(os.environ["STREAMSCOPE_PY_HOOK_LIB"])
_f = _lib.streamscope_debug_python_location
_f.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_f.restype = ctypes.c_size_t
def _sync():
    buf = ctypes.create_string_buffer(1024)
    _f(buf, 1024)
    return buf.value.decode()
class Tensor:
    def item(self):
        return _sync()
    def tolist(self):
        return [self.item()]
    def __float__(self):
        warnings.warn("converting a tensor to a Python float", UserWarning, stacklevel=2)
        return 1.0
    def fail(self):
        raise RuntimeError("CUDA error (stand-in)")
def synchronize():
    return _sync()
from . import optim, autograd
"#;

const FAKE_OPTIM: &str = r#"from . import optimizer
"#;

const FAKE_OPTIMIZER: &str = r#"_pre, _post = [], []
def register_optimizer_step_pre_hook(h):
    _pre.append(h)
def register_optimizer_step_post_hook(h):
    _post.append(h)
class Optimizer:
    def step(self):
        for h in _pre:
            h(self, (), {})
        for h in _post:
            h(self, (), {})
"#;

const FAKE_AUTOGRAD: &str = r#"from . import profiler
"#;

const FAKE_PROFILER: &str = r#"class profile:
    def __init__(self, cuda=True):
        self.kineto_activities = {"ProfilerActivity.CPU"} | ({"ProfilerActivity.CUDA"} if cuda else set())
    def _prepare_trace(self):
        pass
    def __enter__(self):
        self._prepare_trace()
        return self
    def __exit__(self, *a):
        return False
"#;

/// Each line ending in `# L` must be the location its print shows, in order.
const USER: &str = r#"import ctypes, os, sys, threading, warnings
import torch
t = torch.Tensor()
print(t.item())  # L
print(torch.synchronize())  # L
def step():
    return t.tolist()[0]  # L
print(step())
def gen():
    yield t.item()  # L
print(next(gen()))
class Model:
    def forward(self):
        return t.item()  # L
print(Model().forward())
out = []
th = threading.Thread(target=lambda: out.append(t.item()))  # L
th.start(); th.join(); print(out[0])
opt = torch.optim.optimizer.Optimizer()
for _ in range(3):
    opt.step()
lib = ctypes.CDLL(os.environ["STREAMSCOPE_PY_HOOK_LIB"])
lib.streamscope_debug_pending_optimizer_steps.restype = ctypes.c_size_t
print("steps", lib.streamscope_debug_pending_optimizer_steps())
with torch.autograd.profiler.profile(cuda=False):
    pass
with torch.autograd.profiler.profile():
    pass
with torch.autograd.profiler.profile():
    pass
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    float(t)  # W
    print("warning", w[0].filename, w[0].lineno)
import traceback
try:
    t.fail()  # T
except RuntimeError:
    print("traceback", "".join(traceback.format_exc()).count("sitecustomize"))
"#;

fn write(path: &Path, text: &str) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).expect("dir");
    }
    std::fs::write(path, text).expect("write");
}

fn lines_marked(text: &str, mark: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.ends_with(mark))
        .map(|(i, _)| i + 1)
        .collect()
}

/// python3, and the other CPython versions the frame reader knows, when
/// installed (on PATH, or under ~/.pyenv).
fn pythons() -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from("python3")];
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for minor in 10..=13 {
        let name = format!("python3.{minor}");
        let on_path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(&name).is_file()))
            .unwrap_or(false);
        if on_path && python_ok(Path::new(&name)) {
            v.push(PathBuf::from(name));
            continue;
        }
        if let Some(Ok(rd)) = home
            .as_ref()
            .map(|h| std::fs::read_dir(h.join(".pyenv/versions")))
        {
            let mut found: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&format!("3.{minor}.")))
                })
                .map(|p| p.join("bin/python3"))
                .filter(|p| p.is_file())
                .collect();
            found.sort();
            v.extend(found.pop());
        }
    }
    v
}

fn python_ok(py: &Path) -> bool {
    Command::new(py)
        .args(["-c", "pass"])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The built cdylib, when it and python3 are there; `None` (the test
/// skips, and says so) otherwise. In CI (gcc, python3 and the cdylib are
/// there) nothing may skip.
fn cdylib_and_python() -> Option<PathBuf> {
    let Some(lib) = cdylib() else {
        assert!(std::env::var_os("CI").is_none(), "cdylib not built");
        eprintln!("cdylib not built: skipped");
        return None;
    };
    if !python_ok(Path::new("python3")) {
        assert!(std::env::var_os("CI").is_none(), "no python3");
        eprintln!("no python3: skipped");
        return None;
    }
    Some(lib)
}

#[test]
fn frames_hooks_and_user_lines() {
    let Some(lib) = cdylib_and_python() else {
        return;
    };
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ss-pyhooks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    // The stand-in lives under a folder named torch: a library file to the
    // frame reader, as the real one is.
    write(&dir.join("pkgs/torch/__init__.py"), FAKE_TORCH);
    write(&dir.join("pkgs/torch/optim/__init__.py"), FAKE_OPTIM);
    write(&dir.join("pkgs/torch/optim/optimizer.py"), FAKE_OPTIMIZER);
    write(&dir.join("pkgs/torch/autograd/__init__.py"), FAKE_AUTOGRAD);
    write(&dir.join("pkgs/torch/autograd/profiler.py"), FAKE_PROFILER);
    let user = dir.join("app/user.py");
    write(&user, USER);
    write(
        &dir.join("usersite/sitecustomize.py"),
        "import os\nprint('user sitecustomize')\n",
    );
    let path = format!(
        "{}:{}:{}",
        hooks.display(),
        dir.join("pkgs").display(),
        dir.join("usersite").display()
    );
    let func = |line: usize| {
        let text = USER.lines().nth(line - 1).unwrap_or_default();
        match text {
            _ if text.starts_with("    return t.tolist") => "step",
            _ if text.starts_with("    yield") => "gen",
            _ if text.starts_with("        return") => "forward",
            _ if text.starts_with("th = ") => "<lambda>",
            _ => "<module>",
        }
    };
    let mut expected: Vec<String> = vec!["user sitecustomize".into()];
    expected.extend(
        lines_marked(USER, "# L")
            .into_iter()
            .map(|l| format!("{}:{l} ({})", user.display(), func(l))),
    );
    expected.push("steps 3".into());
    expected.push(format!(
        "warning {} {}",
        user.display(),
        lines_marked(USER, "# W")[0]
    ));
    expected.push("traceback 0".into());
    let mut ran = 0;
    for py in pythons() {
        if !python_ok(&py) {
            continue;
        }
        let out = Command::new(&py)
            .arg(&user)
            .env("PYTHONPATH", &path)
            .env("STREAMSCOPE_PY_HOOK_LIB", &lib)
            .env_remove("CUDA_INJECTION64_PATH")
            .output()
            .expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stdout}\n{stderr}", py.display());
        let got: Vec<&str> = stdout.lines().collect();
        assert_eq!(got, expected, "{}\n{stderr}", py.display());
        // The torch.profiler notice: once, though CUDA profiling started twice.
        assert_eq!(
            stderr
                .matches("torch.profiler was started while recorded")
                .count(),
            1,
            "{}: {stderr}",
            py.display()
        );
        assert!(
            !stderr.contains("frame reader is off"),
            "{}: {stderr}",
            py.display()
        );
        ran += 1;
    }
    assert!(ran >= 1);
    eprintln!("frame reader checked on {ran} Python version(s)");

    // An import failing inside the user's own sitecustomize is reported by
    // Python's site module as it would be without the hooks.
    write(
        &dir.join("usersite/sitecustomize.py"),
        "import streamscope_no_such_module\n",
    );
    let out = Command::new("python3")
        .args(["-c", "print('ran')"])
        .env(
            "PYTHONPATH",
            format!("{}:{}", hooks.display(), dir.join("usersite").display()),
        )
        .env("STREAMSCOPE_PY_HOOK_LIB", &lib)
        .output()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ran",
        "{stderr}"
    );
    assert!(stderr.contains("streamscope_no_such_module"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without the hooks (`--no-python-hooks`), the frame reader alone still
/// gives the user's line; an unknown Python says so in one line.
#[test]
fn the_frame_reader_needs_no_hooks() {
    let Some(lib) = cdylib_and_python() else {
        return;
    };
    let script = r#"import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
f = lib.streamscope_debug_python_location
f.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
f.restype = ctypes.c_size_t
buf = ctypes.create_string_buffer(256)
n = f(buf, 256)
print(buf.value.decode(), n)
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&lib)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.trim(), "<string>:7 (<module>) 21", "{stdout}");
}

/// A stand-in torch with just what the memory hooks touch: the history
/// switch records its arguments, `_lazy_call` runs at once.
const FAKE_CUDA_TORCH: &str = "from . import cuda\n";
const FAKE_CUDA: &str = r#"from . import memory
def _lazy_call(f):
    f()
def memory_allocated(device=0):
    return 0
def memory_reserved(device=0):
    return 0
"#;
const FAKE_CUDA_MEMORY: &str = r#"calls = []
def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=0):
    calls.append((enabled, context, stacks, max_entries))
def _snapshot():
    return {"device_traces": []}
"#;

/// STREAMSCOPE_MEMORY (what `record --memory` sets) picks the allocator
/// history's variant: none by default or for `off`, without stacks for
/// `on`, with them for `lines`; the ring's size follows
/// STREAMSCOPE_MEMORY_ENTRIES.
#[test]
fn memory_history_follows_streamscope_memory() {
    let Some(lib) = cdylib_and_python() else {
        return;
    };
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ss-pymem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    write(&dir.join("pkgs/torch/__init__.py"), FAKE_CUDA_TORCH);
    write(&dir.join("pkgs/torch/cuda/__init__.py"), FAKE_CUDA);
    write(&dir.join("pkgs/torch/cuda/memory.py"), FAKE_CUDA_MEMORY);
    let path = format!("{}:{}", hooks.display(), dir.join("pkgs").display());
    let on = "[('all', None, 'python', 1000000)]";
    let lines = "[('all', 'alloc', 'python', 1000000)]";
    for (value, entries, want) in [
        (None, None, "[]"),
        (Some(""), None, "[]"),
        (Some("on"), None, on),
        (Some("nostacks"), None, on),
        (Some("lines"), None, lines),
        (Some("1"), None, lines),
        (Some("off"), None, "[]"),
        (Some("0"), None, "[]"),
        (Some("on"), Some("5000"), "[('all', None, 'python', 5000)]"),
        (Some("on"), Some("many"), on),
    ] {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", "import torch; print(torch.cuda.memory.calls)"])
            .env("PYTHONPATH", &path)
            .env("STREAMSCOPE_PY_HOOK_LIB", &lib)
            .env_remove("CUDA_INJECTION64_PATH")
            .env_remove("STREAMSCOPE_MEMORY")
            .env_remove("STREAMSCOPE_MEMORY_ENTRIES");
        if let Some(v) = value {
            cmd.env("STREAMSCOPE_MEMORY", v);
        }
        if let Some(v) = entries {
            cmd.env("STREAMSCOPE_MEMORY_ENTRIES", v);
        }
        let out = cmd.output().expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{value:?}: {stdout}\n{stderr}");
        assert_eq!(stdout.trim(), want, "{value:?} {entries:?}\n{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
