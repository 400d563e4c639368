//! python/sitecustomize.py against a stand-in `torch` package: the wrapped
//! calls see the user's file:line in the collector's thread-local, and it
//! is cleared after. Needs python3 and the built cdylib (skipped without).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The collector cdylib: target/debug after a `cargo build`, else the one a
/// test build leaves in target/debug/deps beside this test executable.
fn cdylib() -> Option<PathBuf> {
    let deps = std::env::current_exe().ok()?.parent()?.to_path_buf();
    let up = deps.parent()?.join("libstreamscope_collector.so");
    [up, deps.join("libstreamscope_collector.so")]
        .into_iter()
        .find(|p| p.is_file())
}

const FAKE_TORCH: &str = r#"import ctypes, os
_lib = ctypes.CDLL(os.environ["STREAMSCOPE_PY_HOOK_LIB"])
def seen():
    buf = ctypes.create_string_buffer(1024)
    _lib.streamscope_python_location(buf, 1024)
    return buf.value.decode()
class Tensor:
    def __init__(self, cuda=True):
        self.is_cuda = cuda
    def numpy(self):
        raise ValueError("boom")
    def item(self):
        return seen()
    def helper(self):
        return self.item()
    def tolist(self):
        return self.item()
from . import cuda
"#;

const FAKE_CUDA: &str = r#"from .. import seen
def synchronize():
    return seen()
class Event:
    def synchronize(self):
        return seen()
"#;

const USER: &str = r#"import torch
t = torch.Tensor()
print(t.item())
print(torch.cuda.synchronize())
def step():
    return t.helper()
print(step())
print(torch.cuda.Event().synchronize())
print(t.tolist())
print("after:" + torch.seen())
print("cpu:" + torch.Tensor(cuda=False).item())
try:
    t.numpy()
except ValueError:
    pass
print(t.item())
"#;

fn write(path: &Path, text: &str) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).expect("dir");
    }
    std::fs::write(path, text).expect("write");
}

#[test]
fn wrapped_torch_calls_report_the_user_line() {
    let Some(lib) = cdylib() else {
        // In CI (gcc, python3 and the cdylib are there) this must not skip.
        assert!(std::env::var_os("CI").is_none(), "cdylib not built");
        eprintln!("cdylib not built: skipped");
        return;
    };
    if Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        // In CI (gcc, python3 and the cdylib are there) this must not skip.
        assert!(std::env::var_os("CI").is_none(), "no python3");
        eprintln!("no python3: skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("ss-pyhooks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    write(&dir.join("pkgs/torch/__init__.py"), FAKE_TORCH);
    write(&dir.join("pkgs/torch/cuda/__init__.py"), FAKE_CUDA);
    write(&dir.join("app/user.py"), USER);
    // A user sitecustomize of its own must still run.
    write(
        &dir.join("usersite/sitecustomize.py"),
        "import os\nos.environ['USER_SITE_RAN'] = '1'\nprint('user sitecustomize')\n",
    );
    let path = format!(
        "{}:{}:{}",
        hooks.display(),
        dir.join("pkgs").display(),
        dir.join("usersite").display()
    );
    let out = Command::new("python3")
        .arg(dir.join("app/user.py"))
        .env("PYTHONPATH", path)
        .env("STREAMSCOPE_PY_HOOK_LIB", &lib)
        .env_remove("CUDA_INJECTION64_PATH")
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let user = dir.join("app/user.py");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        vec![
            "user sitecustomize".to_string(),
            format!("{}:3 (<module>)", user.display()),
            format!("{}:4 (<module>)", user.display()),
            format!("{}:6 (step)", user.display()),
            format!("{}:8 (<module>)", user.display()),
            format!("{}:9 (<module>)", user.display()),
            "after:".to_string(),
            "cpu:".to_string(),
            format!("{}:16 (<module>)", user.display()),
        ]
    );
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
