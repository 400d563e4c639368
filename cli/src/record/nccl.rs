//! `NCCL_PROFILER_PLUGIN` for the recorded command: the collector library
//! is also NCCL's profiler plugin (collector/README.md, "NCCL profiler
//! plugin").

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `record` does with `NCCL_PROFILER_PLUGIN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NcclPlugin {
    /// Set it to this library (absolute path).
    Set(PathBuf),
    /// The user's environment names a plugin: left as it is (the value).
    UserKept(String),
    /// `--no-nccl-plugin`, or no collector library.
    Off,
}

/// NCCL copies the plugin name into a 255-byte buffer: a longer path is cut.
pub const NCCL_PLUGIN_PATH_MAX: usize = 254;

/// Decides `NCCL_PROFILER_PLUGIN` from the user's value, the collector
/// library and `--no-nccl-plugin`. An empty user value counts as unset.
pub fn nccl_plugin(user: Option<&std::ffi::OsStr>, lib: Option<&Path>, off: bool) -> NcclPlugin {
    if off {
        return NcclPlugin::Off;
    }
    if let Some(v) = user.filter(|v| !v.is_empty()) {
        return NcclPlugin::UserKept(v.to_string_lossy().into_owned());
    }
    match lib {
        Some(l) => NcclPlugin::Set(std::path::absolute(l).unwrap_or_else(|_| l.to_path_buf())),
        None => NcclPlugin::Off,
    }
}

/// Sets (or leaves, saying so) `NCCL_PROFILER_PLUGIN` for `cmd`.
pub fn set_plugin(cmd: &mut Command, collector: Option<&Path>, off: bool) {
    let var = streamscope_core::protocol::env::NCCL_PROFILER_PLUGIN;
    match nccl_plugin(std::env::var_os(var).as_deref(), collector, off) {
        NcclPlugin::Set(lib) => {
            if lib.as_os_str().len() > NCCL_PLUGIN_PATH_MAX {
                eprintln!("streamscope: the collector's path is longer than NCCL accepts ({NCCL_PLUGIN_PATH_MAX} bytes): no NCCL operations in the trace");
            }
            cmd.env(var, lib);
        }
        NcclPlugin::UserKept(v) => eprintln!(
            "streamscope: {var}={v} is already set: NCCL keeps that profiler plugin, and the trace gets no NCCL operations"
        ),
        NcclPlugin::Off => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nccl_plugin_is_ours_unless_the_user_named_one() {
        use std::ffi::OsStr;
        let lib = Path::new("/opt/ss/libstreamscope_collector.so");
        assert_eq!(
            nccl_plugin(None, Some(lib), false),
            NcclPlugin::Set(lib.to_path_buf())
        );
        assert_eq!(
            nccl_plugin(Some(OsStr::new("")), Some(lib), false),
            NcclPlugin::Set(lib.to_path_buf())
        );
        assert_eq!(
            nccl_plugin(Some(OsStr::new("inspector")), Some(lib), false),
            NcclPlugin::UserKept("inspector".into())
        );
        assert_eq!(nccl_plugin(None, Some(lib), true), NcclPlugin::Off);
        assert_eq!(nccl_plugin(None, None, false), NcclPlugin::Off);
        match nccl_plugin(None, Some(Path::new("rel/lib.so")), false) {
            NcclPlugin::Set(p) => assert!(p.is_absolute(), "{}", p.display()),
            other => panic!("{other:?}"),
        }
    }
}
