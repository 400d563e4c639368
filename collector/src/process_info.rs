//! Who this process is (rank, host, command line), where its trace goes,
//! and the clock its timestamps are on.

use std::path::{Path, PathBuf};

use streamscope_core::{ClockDomain, Process};

pub const ENV_OUT: &str = streamscope_core::protocol::env::OUT;

fn parse_u32(v: Option<String>) -> Option<u32> {
    v.and_then(|s| s.trim().parse().ok())
}

pub use streamscope_core::protocol::{host_tag, trace_file_name};

/// How many suffixed names are tried before giving up.
const MAX_SUFFIX: u32 = 1000;

/// Creates the trace file in `dir` without ever replacing a file: a name
/// already taken (a second process with the same RANK, a launcher, a file
/// of an earlier run) gets a `-2`, `-3`, ... suffix. O_EXCL claims it.
pub fn create_trace_file(
    dir: &Path,
    rank: Option<u32>,
    host: &str,
    pid: u32,
) -> std::io::Result<(PathBuf, std::fs::File)> {
    let name = trace_file_name(rank, host, pid);
    let stem = name.trim_end_matches(".pftrace");
    let mut last = None;
    for n in 1..=MAX_SUFFIX {
        let path = if n == 1 {
            dir.join(&name)
        } else {
            dir.join(format!("{stem}-{n}.pftrace"))
        };
        match std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()))
}

/// The progress file `streamscope record` polls (".progress-HOST-PID").
pub fn progress_path(dir: &Path, host: &str, pid: u32) -> PathBuf {
    dir.join(streamscope_core::protocol::progress_file_name(host, pid))
}

/// The model's process, from the environment (`get`) and the host.
pub fn describe(
    get: impl Fn(&str) -> Option<String>,
    pid: u32,
    hostname: &str,
    cmdline: &str,
) -> Process {
    let rank = parse_u32(get("RANK"));
    let name = match rank {
        Some(r) => format!("rank {r} · {hostname} · {pid}"),
        None => format!("pid {pid} · {hostname}"),
    };
    Process {
        pid,
        name,
        rank,
        local_rank: parse_u32(get("LOCAL_RANK")),
        world_size: parse_u32(get("WORLD_SIZE")),
        hostname: hostname.to_string(),
        cmdline: cmdline.to_string(),
        clock: ClockDomain::Monotonic,
        ..Default::default()
    }
}

/// /proc/self/cmdline with NULs as spaces.
pub fn cmdline() -> String {
    std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Name of thread `tid` of this process (its `comm`).
pub fn thread_name(tid: u32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(clock, &mut t) };
    if rc != 0 {
        return 0;
    }
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// CLOCK_MONOTONIC in ns: the clock of every timestamp the collector writes
/// (shared by all processes of a node, so ranks line up).
pub fn monotonic_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Readings of MONOTONIC (Perfetto id 3), BOOTTIME (6) and REALTIME (1)
/// taken together: MONOTONIC is read before and after the others and the
/// midpoint kept, so the pairing error is half the read time.
pub fn clock_snapshot() -> Vec<(u32, i64)> {
    let m0 = clock_ns(libc::CLOCK_MONOTONIC);
    let boot = clock_ns(libc::CLOCK_BOOTTIME);
    let real = clock_ns(libc::CLOCK_REALTIME);
    let m1 = clock_ns(libc::CLOCK_MONOTONIC);
    vec![
        (ClockDomain::Monotonic.perfetto_id(), m0 + (m1 - m0) / 2),
        (ClockDomain::Boottime.perfetto_id(), boot),
        (ClockDomain::Realtime.perfetto_id(), real),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn file_names_follow_rank_or_pid() {
        assert_eq!(trace_file_name(Some(3), "n1", 77), "rank-3.pftrace");
        assert_eq!(
            trace_file_name(None, "n1.cluster", 77),
            "pid-n1.cluster-77.pftrace"
        );
        assert_eq!(trace_file_name(None, "a b/c", 7), "pid-a_b_c-7.pftrace");
        assert_eq!(trace_file_name(None, "", 7), "pid-host-7.pftrace");
        assert_eq!(
            progress_path(Path::new("/o"), "n1", 9),
            PathBuf::from("/o/.progress-n1-9")
        );
        let dir = std::env::temp_dir().join(format!("ss-naming-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (a, _) = create_trace_file(&dir, Some(1), "n1", 5).expect("first");
        assert_eq!(a, dir.join("rank-1.pftrace"));
        std::fs::write(&a, b"first").expect("write");
        let (b, _) = create_trace_file(&dir, Some(1), "n1", 6).expect("second");
        assert_eq!(b, dir.join("rank-1-2.pftrace"));
        let (b3, _) = create_trace_file(&dir, Some(1), "n1", 7).expect("third");
        assert_eq!(b3, dir.join("rank-1-3.pftrace"));
        assert_eq!(
            std::fs::read(&a).expect("read"),
            b"first",
            "the first file is never overwritten"
        );
        let (c, _) = create_trace_file(&dir, None, "n1", 7).expect("pid");
        assert_eq!(c, dir.join("pid-n1-7.pftrace"));
        std::fs::write(&c, b"old").expect("write");
        // The same pid on the same host (an earlier run): a suffix, no truncation.
        let (d, _) = create_trace_file(&dir, None, "n1", 7).expect("pid again");
        assert_eq!(d, dir.join("pid-n1-7-2.pftrace"));
        assert_eq!(std::fs::read(&c).expect("read"), b"old");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn process_from_env() {
        let env: HashMap<&str, &str> =
            [("RANK", "1"), ("LOCAL_RANK", "1"), ("WORLD_SIZE", "2")].into();
        let p = describe(
            |k| env.get(k).map(|v| v.to_string()),
            42,
            "h200",
            "python3 t.py",
        );
        assert_eq!(
            (p.rank, p.local_rank, p.world_size),
            (Some(1), Some(1), Some(2))
        );
        assert_eq!(p.name, "rank 1 · h200 · 42");
        assert_eq!(p.clock, ClockDomain::Monotonic);
        let q = describe(|_| None, 42, "h", "x");
        assert_eq!((q.rank, q.name.as_str()), (None, "pid 42 · h"));
    }

    #[test]
    fn snapshot_has_three_clocks() {
        let s = clock_snapshot();
        let ids: Vec<u32> = s.iter().map(|c| c.0).collect();
        assert_eq!(ids, vec![3, 6, 1]);
        assert!(s.iter().all(|c| c.1 > 0));
        assert!(s[0].1 <= monotonic_ns());
    }
}
