//! `streamscope record --armed`: the environment that arms the collector,
//! and the end-of-run lines (which captures were taken).

use std::path::Path;
use std::process::Command;

use streamscope_core::protocol::{armed as proto, env};

/// Sets (or clears) `STREAMSCOPE_ARMED` for the child.
pub fn set_env(cmd: &mut Command, armed: bool) {
    if armed {
        cmd.env(env::ARMED, "1");
    } else {
        cmd.env_remove(env::ARMED);
    }
}

/// After an armed run: removes this host's control sockets left by
/// processes that did not exit cleanly, lists the capture files, and says
/// how to read one capture. Returns `code`.
pub fn finish(out: &Path, host: &str, code: i32) -> i32 {
    if let Ok(rd) = std::fs::read_dir(out.join(proto::CONTROL_DIR)) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if proto::parse_control_socket_name(&name).is_some_and(|o| o.host == host) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let mut captures: Vec<String> = std::fs::read_dir(out)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".capture-") && n.ends_with(".pftrace"))
                .collect()
        })
        .unwrap_or_default();
    captures.sort();
    if captures.is_empty() {
        eprintln!("streamscope: armed run: no capture was taken. Exit code {code}.");
        return code;
    }
    eprintln!(
        "streamscope: armed run: {} capture file(s) in {}:",
        captures.len(),
        out.display()
    );
    let mut ks: Vec<&str> = Vec::new();
    for n in &captures {
        eprintln!("  {n}");
        if let Some(k) = n
            .split(".capture-")
            .nth(1)
            .and_then(|r| r.strip_suffix(".pftrace"))
            .map(|k| k.split('-').next().unwrap_or(k))
        {
            if !ks.contains(&k) {
                ks.push(k);
            }
        }
    }
    if let Some(k) = ks.first() {
        eprintln!(
            "Next (the files of one capture form one trace set): streamscope report {0}/*.capture-{k}.pftrace   |   streamscope view {0}/*.capture-{k}.pftrace",
            out.display()
        );
    }
    code
}
