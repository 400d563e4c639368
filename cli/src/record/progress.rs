//! `streamscope record` while the command runs: the progress line (the
//! collectors' progress files summed) and the signals forwarded to it.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::Context;
use signal_hook::iterator::{exfiltrator::WithOrigin, SignalsInfo};
use streamscope_core::protocol::env::START_MONOTONIC_NS as ENV_START;

use super::{files, monotonic_ns};

/// Totals of one collector's progress file.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Progress {
    pub events: u64,
    pub bytes: u64,
    pub dropped: u64,
}

/// Parses a progress file (core::protocol::Progress, the collector's format).
pub fn parse_progress(text: &str) -> Progress {
    let p = streamscope_core::protocol::Progress::parse(text);
    Progress {
        events: p.events,
        bytes: p.bytes,
        dropped: p.dropped,
    }
}

/// The number of progress files in `dir` and their totals.
pub fn progress_total(dir: &Path) -> (usize, Progress) {
    let mut total = Progress::default();
    let ps = files(dir, |n| {
        n.starts_with(streamscope_core::protocol::PROGRESS_PREFIX) && !n.ends_with(".tmp")
    });
    for p in &ps {
        let one = parse_progress(&std::fs::read_to_string(p).unwrap_or_default());
        total.events += one.events;
        total.bytes += one.bytes;
        total.dropped += one.dropped;
    }
    (ps.len(), total)
}

/// `b` in B, KiB, MiB or GiB.
pub fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// Starts `cmd` (`program` names it in errors) and waits for it, showing
/// the progress and forwarding SIGINT/SIGTERM sent to us.
pub fn run_child(cmd: &mut Command, program: &OsString, out: &Path) -> anyhow::Result<ExitStatus> {
    let mut signals =
        SignalsInfo::<WithOrigin>::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
            .context("installing signal handlers")?;
    let started = Instant::now();
    // The origin of --delay/--duration for every process (one clock).
    cmd.env(ENV_START, monotonic_ns().to_string());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", program.to_string_lossy()))?;
    let status = wait_with_progress(&mut child, &mut signals, out, started);
    signals.handle().close();
    status
}

/// Polls the child every 200 ms: forwards signals, updates the progress line.
fn wait_with_progress(
    child: &mut Child,
    signals: &mut SignalsInfo<WithOrigin>,
    out: &Path,
    started: Instant,
) -> anyhow::Result<ExitStatus> {
    let child_pid = rustix::process::Pid::from_raw(child.id() as i32);
    let bar = progress_bar();
    let status = loop {
        forward_signals(signals, child_pid);
        if let Some(st) = child.try_wait().context("waiting for the command")? {
            break st;
        }
        bar.set_message(progress_message(out, started));
        bar.tick();
        std::thread::sleep(Duration::from_millis(200));
    };
    bar.finish_and_clear();
    Ok(status)
}

fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        None,
        indicatif::ProgressDrawTarget::stderr_with_hz(4),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} recording {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar
}

/// "12 s · 2 CUDA processes · 40000 events · 3.1 MiB written".
fn progress_message(out: &Path, started: Instant) -> String {
    let (procs, p) = progress_total(out);
    format!(
        "{:.0} s · {procs} CUDA process{} · {} events · {} written",
        started.elapsed().as_secs_f64(),
        if procs == 1 { "" } else { "es" },
        p.events,
        human_bytes(p.bytes)
    )
}

/// Passes on to the child the SIGINT/SIGTERM that arrived since last time.
fn forward_signals(signals: &mut SignalsInfo<WithOrigin>, child_pid: Option<rustix::process::Pid>) {
    for origin in signals.pending() {
        // A terminal's Ctrl-C reaches the child by itself (same process
        // group); forward only what a process sent to us.
        if origin.process.is_some() || origin.signal == signal_hook::consts::SIGTERM {
            let sig = if origin.signal == signal_hook::consts::SIGINT {
                rustix::process::Signal::INT
            } else {
                rustix::process::Signal::TERM
            };
            if let Some(pid) = child_pid {
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines() {
        let p = parse_progress("events=12 records=40 bytes=2048 dropped=3 done=1\n");
        assert_eq!(
            p,
            Progress {
                events: 12,
                bytes: 2048,
                dropped: 3
            }
        );
        assert_eq!(parse_progress("garbage"), Progress::default());
    }
}
