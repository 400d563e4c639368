//! `streamscope record`: the command to run and its environment (the
//! collector injected, CUPTI for NVTX, the Python hooks, the capture
//! settings, the GPU metrics sampler).

use crate::error::CollectorError;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use streamscope_core::protocol::env::{
    CAPTURE_RANGE as ENV_RANGE, CUPTI_LIB as ENV_CUPTI, DELAY_S as ENV_DELAY,
    DURATION_S as ENV_DURATION, OUT as ENV_OUT, PY_HOOK_LIB as ENV_PY_HOOK_LIB,
};

use super::{armed, gpu_metrics, nccl, RecordArgs};

const ENV_COLLECTOR: &str = "STREAMSCOPE_COLLECTOR";
const COLLECTOR_FILE: &str = "libstreamscope_collector.so";
/// Python hooks: optimizer-step markers, the torch.profiler notice and the
/// frame reader's self-check (collector/python/sitecustomize.py).
const PYTHON_HOOKS: &str = include_str!("../../../collector/python/sitecustomize.py");

/// The command ready to start, and what the end of the run needs.
pub struct Launch {
    /// The command with its environment set.
    pub cmd: Command,
    /// The collector library, or why it was not found (running untraced).
    pub collector: Result<PathBuf, CollectorError>,
    /// The Python hooks' folder (removed at the end).
    pub hooks_dir: Option<PathBuf>,
    /// The GPU metrics sampler beside the job (`--gpu-metrics`).
    pub sampler: Option<gpu_metrics::Sampler>,
}

/// The collector `record` would inject ($STREAMSCOPE_COLLECTOR, else
/// beside this executable), or why there is none.
pub fn locate_collector() -> Result<PathBuf, CollectorError> {
    let exe = std::env::current_exe().ok();
    find_collector(
        std::env::var_os(ENV_COLLECTOR).map(PathBuf::from),
        exe.as_deref(),
    )
}

/// `program rest...` with the collector injected and the environment of
/// `args`, writing into `out`.
pub fn launch(args: &RecordArgs, program: &OsString, rest: &[OsString], out: &Path) -> Launch {
    let exe = std::env::current_exe().ok();
    let collector = locate_collector();
    let mut cmd = Command::new(program);
    cmd.args(rest);
    let hooks_dir = inject_collector(&mut cmd, &collector, args);
    set_cupti_env(&mut cmd);
    set_capture_env(&mut cmd, args, out);
    gpu_metrics::clear_env(&mut cmd);
    let sampler = match &args.gpu_metrics {
        Some(list) => gpu_metrics::Sampler::start(
            gpu_metrics::find_sampler(collector.as_deref().ok(), exe.as_deref()),
            &mut cmd,
            out,
            list,
            args.gpu_metrics_hz,
        ),
        None => None,
    };
    Launch {
        cmd,
        collector,
        hooks_dir,
        sampler,
    }
}

/// CUDA_INJECTION64_PATH, the Python hooks and NCCL's profiler plugin;
/// returns the hooks' folder.
fn inject_collector(
    cmd: &mut Command,
    collector: &Result<PathBuf, CollectorError>,
    args: &RecordArgs,
) -> Option<PathBuf> {
    match collector {
        Ok(lib) => {
            cmd.env("CUDA_INJECTION64_PATH", lib);
        }
        Err(e) => eprintln!("streamscope: {e}; running untraced"),
    }
    let hooks_dir = match (collector, args.no_python_hooks) {
        (Ok(lib), false) => {
            // The hooks call into the collector through this (and only this).
            cmd.env(ENV_PY_HOOK_LIB, lib);
            install_python_hooks(cmd)
        }
        _ => None,
    };
    nccl::set_plugin(cmd, collector.as_deref().ok(), args.no_nccl_plugin);
    hooks_dir
}

/// libcupti for the collector and for NVTX injection (unless already set).
fn set_cupti_env(cmd: &mut Command) {
    let cupti = std::env::var_os(ENV_CUPTI)
        .map(PathBuf::from)
        .or_else(|| find_cupti(&cupti_dirs()));
    if let Some(c) = &cupti {
        cmd.env(ENV_CUPTI, c);
        if std::env::var_os("NVTX_INJECTION64_PATH").is_none() {
            cmd.env("NVTX_INJECTION64_PATH", c);
        }
    }
}

/// The output folder, the API filter, armed mode, Python lines and the
/// capture window (range, delay, duration).
fn set_capture_env(cmd: &mut Command, args: &RecordArgs, out: &Path) {
    cmd.env(ENV_OUT, out);
    if args.all_apis {
        cmd.env(streamscope_core::protocol::env::ALL_APIS, "1");
    }
    armed::set_env(cmd, args.armed);
    if args.no_python_lines {
        cmd.env(streamscope_core::protocol::env::PYTHON_LINES, "0");
    }
    if let Some(mode) = args.memory {
        cmd.env(streamscope_core::protocol::env::MEMORY, mode.env_value());
    }
    for (var, val) in [
        (ENV_RANGE, args.capture_range.clone()),
        (ENV_DELAY, args.delay.map(|v| v.to_string())),
        (ENV_DURATION, args.duration.map(|v| v.to_string())),
    ] {
        match val {
            Some(v) => cmd.env(var, v),
            None => cmd.env_remove(var),
        };
    }
}

/// The collector library: $STREAMSCOPE_COLLECTOR, else next to this executable.
pub fn find_collector(
    env_value: Option<PathBuf>,
    exe: Option<&Path>,
) -> Result<PathBuf, CollectorError> {
    if let Some(p) = env_value {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(CollectorError::Missing {
                var: ENV_COLLECTOR,
                path: p,
            })
        };
    }
    let dir = exe
        .and_then(Path::parent)
        .ok_or(CollectorError::NoExecutable)?;
    let candidates = [
        dir.join(COLLECTOR_FILE),
        dir.join("../lib").join(COLLECTOR_FILE),
    ];
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        return Ok(p.clone());
    }
    // A cargo build folder (target/release, target/debug, target/PROFILE):
    // the collector of another profile, the newest, when this one has none.
    if let Some(p) = other_profiles(dir) {
        return Ok(p);
    }
    let profile = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    let build = match profile.as_deref() {
        Some("release") => "cargo build --release -p streamscope-collector".to_string(),
        Some("debug") => "cargo build -p streamscope-collector".to_string(),
        Some(p) => format!("cargo build --profile {p} -p streamscope-collector"),
        None => "cargo build --release -p streamscope-collector".to_string(),
    };
    Err(CollectorError::NotBuilt {
        file: COLLECTOR_FILE,
        dir: dir.to_path_buf(),
        build,
        var: ENV_COLLECTOR,
    })
}

/// The newest collector in a sibling profile folder of `dir` when `dir`
/// is a cargo profile folder (its parent holds CACHEDIR.TAG).
fn other_profiles(dir: &Path) -> Option<PathBuf> {
    let target = dir.parent()?;
    if !target.join("CACHEDIR.TAG").is_file() {
        return None;
    }
    std::fs::read_dir(target)
        .ok()?
        .flatten()
        .map(|e| e.path().join(COLLECTOR_FILE))
        .filter(|p| p.is_file())
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
}

/// libcupti for NVTX injection: the first `libcupti.so*` in `dirs`.
pub fn find_cupti(dirs: &[PathBuf]) -> Option<PathBuf> {
    const NAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so", "libcupti.so.12"];
    for d in dirs {
        for n in NAMES {
            let p = d.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Where CUPTI usually is: CUDA_HOME/CUDA_PATH, LD_LIBRARY_PATH, /usr/local/cuda*.
fn cupti_dirs() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    if let Ok(rd) = std::fs::read_dir("/usr/local") {
        let mut more: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("cuda-"))
            })
            .collect();
        more.sort();
        more.reverse();
        roots.extend(more);
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    for r in roots {
        dirs.push(r.join("extras/CUPTI/lib64"));
        dirs.push(r.join("targets/x86_64-linux/lib"));
        dirs.push(r.join("lib64"));
    }
    dirs
}

/// A random 64-bit value for a folder name (/dev/urandom, else std's
/// randomly seeded hasher).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::io::Read;
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
    {
        return u64::from_le_bytes(b);
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Creates a fresh folder only we can use, like mkdtemp: a random name,
/// mode 0700, and never an existing path (another user's folder or a
/// symlink planted in /tmp would make Python run their code).
pub fn private_temp_dir(base: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = None;
    for _ in 0..100 {
        let dir = base.join(format!("{prefix}{:016x}", random_u64()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()))
}

/// Writes `text` to a file that must not exist yet.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// Writes the hooks into a private temporary folder put first on the
/// child's PYTHONPATH; returns the folder (removed at the end).
fn install_python_hooks(cmd: &mut Command) -> Option<PathBuf> {
    let dir = match private_temp_dir(&std::env::temp_dir(), "streamscope-python-") {
        Ok(d) => d,
        Err(e) => {
            eprintln!("streamscope: no Python call-site hooks (temporary folder: {e})");
            return None;
        }
    };
    if let Err(e) = write_new(&dir.join("sitecustomize.py"), PYTHON_HOOKS) {
        eprintln!("streamscope: no Python call-site hooks ({e})");
        let _ = std::fs::remove_dir_all(&dir);
        return None;
    }
    let mut path = OsString::from(dir.as_os_str());
    if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    cmd.env("PYTHONPATH", path);
    Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_libraries_where_they_are() {
        let dir = std::env::temp_dir().join(format!("ss-record-{}", std::process::id()));
        let lib = dir.join("lib");
        std::fs::create_dir_all(&lib).expect("temp dir");
        assert_eq!(find_cupti(std::slice::from_ref(&lib)), None);
        std::fs::write(lib.join("libcupti.so.13"), b"").expect("write");
        assert_eq!(
            find_cupti(&[dir.join("nope"), lib.clone()]),
            Some(lib.join("libcupti.so.13"))
        );
        let exe = dir.join("streamscope");
        assert!(matches!(
            find_collector(None, Some(&exe)),
            Err(CollectorError::NotBuilt { .. })
        ));
        std::fs::write(dir.join(COLLECTOR_FILE), b"").expect("write");
        assert_eq!(
            find_collector(None, Some(&exe)),
            Ok(dir.join(COLLECTOR_FILE))
        );
        let e = find_collector(Some(dir.join("missing.so")), Some(&exe)).expect_err("missing");
        assert!(matches!(e, CollectorError::Missing { .. }), "{e:?}");
        assert!(e.to_string().ends_with("missing.so does not exist"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn hook_folders_are_fresh_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("ss-record-priv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("temp dir");
        let a = private_temp_dir(&base, "h-").expect("first");
        let b = private_temp_dir(&base, "h-").expect("second");
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(base.as_path()));
        let mode = std::fs::metadata(&a).expect("meta").permissions().mode();
        assert_eq!(mode & 0o077, 0, "no access for group or others: {mode:o}");
        write_new(&a.join("sitecustomize.py"), "x = 1\n").expect("write");
        assert!(
            write_new(&a.join("sitecustomize.py"), "y = 2\n").is_err(),
            "an existing file is never written through"
        );
        assert_eq!(
            std::fs::read_to_string(a.join("sitecustomize.py")).expect("read"),
            "x = 1\n"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
