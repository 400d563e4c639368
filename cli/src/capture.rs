//! `streamscope capture DIR [--ranks 0,3] (--duration 5s | --steps N)
//! [--delay S]`: starts a capture in the armed processes (`streamscope
//! record --armed -o DIR`) of this host, through their control sockets in
//! `DIR/.control`. Every process gets the same CLOCK_MONOTONIC start
//! instant, so the ranks of the node start together; sockets of other
//! hosts (a shared directory) are skipped: same-host only.

use crate::error::{ArgError, SendError};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;
use streamscope_core::protocol::armed::{self as proto, CaptureLength, CaptureRequest};

#[derive(Debug, Clone, clap::Args)]
pub struct CaptureArgs {
    /// The output directory of `streamscope record --armed -o DIR`.
    pub dir: PathBuf,
    /// Only these ranks, comma-separated (e.g. 0,3).
    #[arg(long, value_name = "R,R,...")]
    pub ranks: Option<String>,
    /// How long to capture: 5s, 500ms, 1.5 (seconds).
    #[arg(long)]
    pub duration: Option<String>,
    /// Capture N whole training steps, counted as `report` finds steps:
    /// optimizer steps (from the Python hooks), else launches of one CUDA
    /// graph, else the period of the kernels.
    #[arg(long)]
    pub steps: Option<u32>,
    /// With --steps: the longest the capture may run (default 60s).
    #[arg(long, value_name = "DURATION")]
    pub max_duration: Option<String>,
    /// With --steps: end the capture, with a message, when no step at all
    /// is found within this long (default 30s).
    #[arg(long, value_name = "DURATION")]
    pub find_steps_within: Option<String>,
    /// Start this long from now (default and minimum 0.3 s, so that every
    /// process has the request before the common start instant).
    #[arg(long)]
    pub delay: Option<String>,
    /// Return only once every process that accepted has written its
    /// capture file (or ended); non-zero when one has not by the capture's
    /// longest length plus 30 s.
    #[arg(long)]
    pub wait: bool,
}

/// "5s", "500ms", "1.5" (seconds) as milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<u64, ArgError> {
    let t = s.trim();
    let (num, scale) = if let Some(v) = t.strip_suffix("ms") {
        (v, 1.0)
    } else if let Some(v) = t.strip_suffix('s') {
        (v, 1000.0)
    } else if let Some(v) = t.strip_suffix('m') {
        (v, 60_000.0)
    } else {
        (t, 1000.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale <= proto::MAX_DURATION_MS as f64 => {
            Ok((v * scale).round() as u64)
        }
        _ => Err(ArgError::Duration(s.to_string())),
    }
}

/// "0,3" as ranks.
pub fn parse_ranks(s: &str) -> Result<Vec<u32>, ArgError> {
    let v: Result<Vec<u32>, _> = s.split(',').map(|r| r.trim().parse::<u32>()).collect();
    match v {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => Err(ArgError::Ranks(s.to_string())),
    }
}

/// One armed process found in DIR/.control.
#[derive(Debug, Clone)]
pub struct Armed {
    pub socket: PathBuf,
    pub owner: proto::SocketOwner,
}

impl Armed {
    fn label(&self) -> String {
        match self.owner.rank {
            Some(r) => format!("rank {r} (pid {})", self.owner.pid),
            None => format!("pid {}", self.owner.pid),
        }
    }
}

/// The control sockets of DIR of host `host` (a host tag), and how many
/// belong to other hosts.
pub fn find_armed(dir: &Path, host: &str) -> anyhow::Result<(Vec<Armed>, usize)> {
    if !dir.is_dir() {
        bail!("{}: no such directory", dir.display());
    }
    let ctl = dir.join(proto::CONTROL_DIR);
    let mut found = Vec::new();
    let mut other_hosts = 0;
    if let Ok(rd) = std::fs::read_dir(&ctl) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(owner) = proto::parse_control_socket_name(&name) else {
                continue;
            };
            if owner.host != host {
                other_hosts += 1;
                continue;
            }
            found.push(Armed {
                socket: e.path(),
                owner,
            });
        }
    }
    found.sort_by_key(|a| (a.owner.rank, a.owner.pid));
    Ok((found, other_hosts))
}

/// Sends one request; the reply line, or why there is none.
pub fn send(socket: &Path, line: &str) -> Result<String, SendError> {
    let mut c = UnixStream::connect(socket).map_err(|e| match e.kind() {
        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound => SendError::Stale(e),
        _ => SendError::Connect(e),
    })?;
    let _ = c.set_read_timeout(Some(Duration::from_secs(3)));
    let _ = c.set_write_timeout(Some(Duration::from_secs(3)));
    c.write_all(line.as_bytes()).map_err(SendError::Send)?;
    let mut reply = String::new();
    BufReader::new(c)
        .read_line(&mut reply)
        .map_err(SendError::Read)?;
    if reply.trim().is_empty() {
        return Err(SendError::NoAnswer);
    }
    Ok(reply.trim().to_string())
}

pub fn run(args: &CaptureArgs) -> anyhow::Result<()> {
    if args.steps.is_none() && (args.max_duration.is_some() || args.find_steps_within.is_some()) {
        bail!("--max-duration and --find-steps-within go with --steps");
    }
    let length = match (&args.duration, args.steps) {
        (Some(d), None) => {
            let ms = parse_duration_ms(d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
            if ms == 0 {
                bail!("--duration must be more than 0");
            }
            CaptureLength::Millis(ms)
        }
        (None, Some(n)) if (1..=100_000).contains(&n) => {
            let ms = |v: &Option<String>, flag: &str, default: u64| -> anyhow::Result<u64> {
                match v {
                    None => Ok(default),
                    Some(d) => match parse_duration_ms(d) {
                        Ok(0) => bail!("{flag} must be more than 0"),
                        Ok(ms) => Ok(ms),
                        Err(e) => bail!("{flag}: {e}"),
                    },
                }
            };
            let max_ms = ms(
                &args.max_duration,
                "--max-duration",
                proto::STEPS_TIME_BOUND_MS,
            )?;
            let find_ms = ms(
                &args.find_steps_within,
                "--find-steps-within",
                proto::STEPS_FIND_BOUND_MS,
            )?
            .min(max_ms);
            CaptureLength::Steps {
                steps: n,
                max_ms,
                find_ms,
            }
        }
        (None, Some(n)) => bail!("--steps {n}: expected 1..=100000"),
        (Some(_), Some(_)) => bail!("give --duration or --steps, not both"),
        (None, None) => bail!("give --duration (e.g. 5s) or --steps N"),
    };
    let delay_ms = match &args.delay {
        Some(d) => parse_duration_ms(d).map_err(|e| anyhow::anyhow!("--delay: {e}"))?,
        None => 0,
    }
    .max(300);
    if delay_ms as i64 * 1_000_000 > proto::MAX_START_AHEAD_NS {
        bail!("--delay: at most 60 s");
    }
    let ranks = args
        .ranks
        .as_deref()
        .map(parse_ranks)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let host = streamscope_core::protocol::host_tag(
        &std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default(),
    );
    let (mut armed, other_hosts) = find_armed(&args.dir, &host)?;
    if other_hosts > 0 {
        eprintln!(
            "streamscope: {other_hosts} control socket(s) of other hosts skipped (capture reaches this host only)"
        );
    }
    if armed.is_empty() {
        bail!(
            "no armed process in {} (no control socket of this host in {}; start the job with `streamscope record --armed -o {}`)",
            args.dir.display(),
            args.dir.join(proto::CONTROL_DIR).display(),
            args.dir.display()
        );
    }
    if let Some(r) = &ranks {
        armed.retain(|a| a.owner.rank.is_some_and(|x| r.contains(&x)));
    }
    let start_ns = crate::record::monotonic_ns() + delay_ms as i64 * 1_000_000;
    let line = CaptureRequest {
        length,
        start_ns: Some(start_ns),
    }
    .to_line();
    let mut accepted: Vec<(Armed, u32)> = Vec::new();
    let mut failed = 0;
    for a in &armed {
        match send(&a.socket, &line) {
            Ok(reply) => match reply
                .strip_prefix("ok capture ")
                .and_then(|k| k.parse::<u32>().ok())
            {
                Some(k) => {
                    println!("{}: capture {k} accepted", a.label());
                    accepted.push((a.clone(), k));
                }
                None => {
                    failed += 1;
                    eprintln!("streamscope: {}: {reply}", a.label());
                }
            },
            Err(e) => {
                failed += 1;
                eprintln!(
                    "streamscope: {}: {e}: {} skipped",
                    a.label(),
                    a.socket.display()
                );
            }
        }
    }
    if let Some(r) = &ranks {
        let missing: Vec<String> = r
            .iter()
            .filter(|x| !accepted.iter().any(|(a, _)| a.owner.rank == Some(**x)))
            .map(|x| x.to_string())
            .collect();
        if !missing.is_empty() {
            bail!(
                "rank(s) {} did not accept the capture ({} accepted)",
                missing.join(","),
                accepted.len()
            );
        }
    }
    if accepted.is_empty() {
        bail!(
            "no armed process accepted the capture ({failed} socket(s) in {} failed; see above)",
            args.dir.join(proto::CONTROL_DIR).display()
        );
    }
    let ks: std::collections::BTreeSet<u32> = accepted.iter().map(|(_, k)| *k).collect();
    let what = match length {
        CaptureLength::Millis(ms) => format!("{:.3} s", ms as f64 / 1000.0),
        CaptureLength::Steps { steps, .. } => format!("{steps} step(s)"),
    };
    println!(
        "capture of {what} starts in {:.1} s in {} process(es){}",
        delay_ms as f64 / 1000.0,
        accepted.len(),
        if failed > 0 {
            format!(" ({failed} skipped)")
        } else {
            String::new()
        }
    );
    if args.wait {
        let longest_ms = delay_ms
            + match length {
                CaptureLength::Millis(ms) => ms,
                CaptureLength::Steps { max_ms, .. } => max_ms,
            };
        wait_written(&accepted, Duration::from_millis(longest_ms + WAIT_GRACE_MS))?;
    }
    for k in ks {
        println!(
            "{}: streamscope report {}/*.capture-{k}.pftrace",
            if args.wait { "written" } else { "when it ends" },
            args.dir.display()
        );
    }
    Ok(())
}

/// How long `--wait` waits past a capture's longest length (its last
/// records flushed and the file closed).
const WAIT_GRACE_MS: u64 = 30_000;

/// `--wait`: asks each process's status until its capture is written or
/// the process is gone; an error naming those still running after `limit`.
fn wait_written(accepted: &[(Armed, u32)], limit: Duration) -> anyhow::Result<()> {
    let t0 = std::time::Instant::now();
    let mut left: Vec<&(Armed, u32)> = accepted.iter().collect();
    while !left.is_empty() {
        let mut still = Vec::new();
        for entry in left {
            let (a, k) = entry;
            let who = a.label();
            match send(&a.socket, proto::STATUS_REQUEST) {
                Ok(reply) => match proto::CaptureStatus::parse(&reply) {
                    Ok(st) if st.written >= *k => println!("{who}: capture {k} written"),
                    Ok(_) => still.push(entry),
                    Err(_) if reply.starts_with("error unknown command") => {
                        bail!("{who}: its collector is older and cannot say when capture {k} ends")
                    }
                    Err(e) => bail!("{who}: {e}"),
                },
                // The process is gone; its collector writes a running
                // capture as the process ends (unless it was killed).
                Err(SendError::Stale(_)) => {
                    println!("{who}: the process ended during capture {k}, written as it ended")
                }
                // Busy answering another request: asked again.
                Err(_) => still.push(entry),
            }
        }
        left = still;
        if left.is_empty() {
            break;
        }
        if t0.elapsed() >= limit {
            let who: Vec<String> = left
                .iter()
                .map(|(a, k)| format!("{} (capture {k})", a.label()))
                .collect();
            bail!(
                "not written after {:.0} s: {}",
                limit.as_secs_f64(),
                who.join(", ")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_ranks() {
        assert_eq!(parse_duration_ms("5s"), Ok(5000));
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("1.5"), Ok(1500));
        assert_eq!(parse_duration_ms("2m"), Ok(120_000));
        for bad in ["", "x", "-1s", "5h", "99999999s"] {
            assert_eq!(parse_duration_ms(bad), Err(ArgError::Duration(bad.into())));
        }
        assert_eq!(parse_ranks("0,3"), Ok(vec![0, 3]));
        assert_eq!(parse_ranks(" 1 "), Ok(vec![1]));
        for bad in ["", "a", "0,,1", "-1"] {
            assert_eq!(parse_ranks(bad), Err(ArgError::Ranks(bad.into())));
        }
    }
}
