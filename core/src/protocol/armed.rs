//! Armed mode (`streamscope record --armed`) and on-demand captures: the
//! names and the one-line control protocol shared by the collector and
//! `streamscope capture`.
//!
//! An armed collector records nothing until a capture is triggered: by a
//! signal ([`super::env::CAPTURE_SIGNAL`], default SIGUSR2), by touching
//! `DIR/capture` ([`TRIGGER_FILE`]), or by a request on its control socket
//! (`DIR/.control/NAME.sock`, [`control_socket_name`]). A request is one
//! line, [`CaptureRequest::to_line`]; the answer is one line, `ok capture K`
//! or `error ...`. Capture K of a process goes to its own file,
//! [`capture_file_name`].

/// The private folder (mode 0700) under the output directory that holds
/// the control sockets (mode 0600).
pub const CONTROL_DIR: &str = ".control";

/// A file in the output directory whose creation or new mtime (`touch`)
/// starts a capture in every armed process writing there.
pub const TRIGGER_FILE: &str = "capture";

/// Length of a capture started by the signal or the trigger file, unless
/// `STREAMSCOPE_DURATION_S` (`record --armed --duration`) says otherwise.
pub const DEFAULT_DURATION_MS: u64 = 5_000;

/// A `steps=N` capture ends after this long when the steps do not come
/// (no Python hooks, a job that stalled), unless the request says `max_ms`.
pub const STEPS_TIME_BOUND_MS: u64 = 60_000;

/// A `steps=N` capture that has found no step at all after this long (no
/// optimizer-step marks, no graph launched twice, no repeating kernels)
/// ends, unless the request says `find_ms`.
pub const STEPS_FIND_BOUND_MS: u64 = 30_000;

/// A start instant further ahead than this is refused.
pub const MAX_START_AHEAD_NS: i64 = 60_000_000_000;

/// The longest capture a request may ask for (1 hour).
pub const MAX_DURATION_MS: u64 = 3_600_000;

/// The control socket of a process: `rank-R-HOST-PID.sock` when RANK is
/// set, else `pid-HOST-PID.sock`.
pub fn control_socket_name(rank: Option<u32>, host: &str, pid: u32) -> String {
    let host = super::host_tag(host);
    match rank {
        Some(r) => format!("rank-{r}-{host}-{pid}.sock"),
        None => format!("pid-{host}-{pid}.sock"),
    }
}

/// Who a control socket belongs to, from its file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketOwner {
    /// Rank, for a "rank-" socket.
    pub rank: Option<u32>,
    /// The host tag ([`super::host_tag`]).
    pub host: String,
    /// Process id.
    pub pid: u32,
}

/// Parses a name [`control_socket_name`] made; None for anything else.
pub fn parse_control_socket_name(name: &str) -> Option<SocketOwner> {
    let stem = name.strip_suffix(".sock")?;
    let (rank, rest) = if let Some(r) = stem.strip_prefix("rank-") {
        let (rank, rest) = r.split_once('-')?;
        (Some(rank.parse().ok()?), rest)
    } else {
        (None, stem.strip_prefix("pid-")?)
    };
    let (host, pid) = rest.rsplit_once('-')?;
    if host.is_empty() {
        return None;
    }
    Some(SocketOwner {
        rank,
        host: host.to_string(),
        pid: pid.parse().ok()?,
    })
}

/// The file of capture `k` (1, 2, ...): `rank-R.capture-K.pftrace`, else
/// `pid-HOST-N.capture-K.pftrace`. All the files of one capture form one
/// trace set (`streamscope report DIR/rank-*.capture-1.pftrace`).
pub fn capture_file_name(rank: Option<u32>, host: &str, pid: u32, k: u32) -> String {
    let base = super::trace_file_name(rank, host, pid);
    let stem = base.trim_end_matches(".pftrace");
    format!("{stem}.capture-{k}.pftrace")
}

/// How a capture ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureLength {
    /// After this many milliseconds.
    Millis(u64),
    /// After this many steps have ended (optimizer-step marks, else graph
    /// launches or the kernels' period, as `report` finds steps), or after
    /// `max_ms` when they do not come, or after `find_ms` when no step at
    /// all was found by then.
    Steps {
        /// Steps to capture.
        steps: u32,
        /// Longest the capture lasts, in milliseconds.
        max_ms: u64,
        /// How long the capture looks for a first step, in milliseconds.
        find_ms: u64,
    },
}

/// One capture request: `capture duration_ms=N [start_ns=T]` or
/// `capture steps=N [max_ms=M] [find_ms=F] [start_ns=T]`. `start_ns` is an absolute
/// CLOCK_MONOTONIC instant (the same for every process of a node, so all
/// ranks start together); absent or past: at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureRequest {
    /// How the capture ends.
    pub length: CaptureLength,
    /// When to start (CLOCK_MONOTONIC ns); `None`: at once.
    pub start_ns: Option<i64>,
}

impl CaptureRequest {
    /// The request as one line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = match self.length {
            CaptureLength::Millis(ms) => format!("capture duration_ms={ms}"),
            CaptureLength::Steps {
                steps,
                max_ms,
                find_ms,
            } => {
                format!("capture steps={steps} max_ms={max_ms} find_ms={find_ms}")
            }
        };
        if let Some(t) = self.start_ns {
            s += &format!(" start_ns={t}");
        }
        s.push('\n');
        s
    }

    /// Parses one request line; Err is the text after `error `.
    pub fn parse(line: &str) -> Result<CaptureRequest, String> {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("capture") => {}
            Some(w) => {
                return Err(format!(
                    "unknown command {w:?} (expected: capture duration_ms=N | capture steps=N)"
                ))
            }
            None => {
                return Err(
                    "empty command (expected: capture duration_ms=N | capture steps=N)".into(),
                )
            }
        }
        let (mut duration, mut steps, mut max_ms, mut start) = (None, None, None, None);
        let mut find_ms = None;
        for w in words {
            let Some((k, v)) = w.split_once('=') else {
                return Err(format!("expected key=value, got {w:?}"));
            };
            let num = |v: &str| -> Result<u64, String> {
                v.parse::<u64>()
                    .map_err(|_| format!("{k}={v}: expected a whole number"))
            };
            match k {
                "duration_ms" => duration = Some(num(v)?),
                "steps" => steps = Some(num(v)?),
                "max_ms" => max_ms = Some(num(v)?),
                "find_ms" => find_ms = Some(num(v)?),
                "start_ns" => {
                    start = Some(
                        v.parse::<i64>()
                            .map_err(|_| format!("start_ns={v}: expected CLOCK_MONOTONIC ns"))?,
                    )
                }
                _ => return Err(format!("unknown key {k:?}")),
            }
        }
        let check_ms = |ms: u64, what: &str| {
            if ms == 0 || ms > MAX_DURATION_MS {
                Err(format!("{what}={ms}: expected 1..={MAX_DURATION_MS}"))
            } else {
                Ok(ms)
            }
        };
        let length = match (duration, steps) {
            (Some(ms), None) => CaptureLength::Millis(check_ms(ms, "duration_ms")?),
            (None, Some(n)) if (1..=100_000).contains(&n) => CaptureLength::Steps {
                steps: n as u32,
                max_ms: check_ms(max_ms.unwrap_or(STEPS_TIME_BOUND_MS), "max_ms")?,
                find_ms: check_ms(find_ms.unwrap_or(STEPS_FIND_BOUND_MS), "find_ms")?,
            },
            (None, Some(n)) => return Err(format!("steps={n}: expected 1..=100000")),
            (Some(_), Some(_)) => return Err("give duration_ms or steps, not both".into()),
            (None, None) => return Err("capture needs duration_ms=N or steps=N".into()),
        };
        Ok(CaptureRequest {
            length,
            start_ns: start,
        })
    }
}

/// The status request: `status`, answered by [`CaptureStatus::to_line`]
/// (`capture --wait` asks it until its capture is written).
pub const STATUS_REQUEST: &str = "status\n";

/// What an armed process says of its captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CaptureStatus {
    /// The capture waiting for its start or running, if any.
    pub busy: Option<u32>,
    /// The number of the last capture whose file is written and closed
    /// (0: none yet).
    pub written: u32,
}

impl CaptureStatus {
    /// The reply line, newline included: `ok status written=K [busy=B]`.
    pub fn to_line(&self) -> String {
        match self.busy {
            Some(b) => format!("ok status written={} busy={b}\n", self.written),
            None => format!("ok status written={}\n", self.written),
        }
    }

    /// Parses a reply line (trimmed or not); Err says what is wrong.
    pub fn parse(line: &str) -> Result<CaptureStatus, String> {
        let mut words = line.split_whitespace();
        if (words.next(), words.next()) != (Some("ok"), Some("status")) {
            return Err(format!("not a status reply: {:?}", line.trim()));
        }
        let mut st = CaptureStatus::default();
        let mut written = None;
        for w in words {
            let Some((k, v)) = w.split_once('=') else {
                return Err(format!("expected key=value, got {w:?}"));
            };
            let n = v
                .parse::<u32>()
                .map_err(|_| format!("{k}={v}: expected a whole number"))?;
            match k {
                "written" => written = Some(n),
                "busy" => st.busy = Some(n),
                _ => return Err(format!("unknown key {k:?}")),
            }
        }
        st.written = written.ok_or("status reply without written=")?;
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names_round_trip() {
        let n = control_socket_name(Some(3), "node-1.x", 77);
        assert_eq!(n, "rank-3-node-1.x-77.sock");
        assert_eq!(
            parse_control_socket_name(&n),
            Some(SocketOwner {
                rank: Some(3),
                host: "node-1.x".into(),
                pid: 77
            })
        );
        let p = control_socket_name(None, "a b", 9);
        assert_eq!(p, "pid-a_b-9.sock");
        assert_eq!(
            parse_control_socket_name(&p).map(|o| (o.rank, o.pid)),
            Some((None, 9))
        );
        for bad in [
            "rank-x-h-1.sock",
            "pid-1.sock",
            "rank-0.pftrace",
            "x.sock",
            "pid-h-.sock",
        ] {
            assert_eq!(parse_control_socket_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn capture_files() {
        assert_eq!(
            capture_file_name(Some(0), "h", 1, 2),
            "rank-0.capture-2.pftrace"
        );
        assert_eq!(
            capture_file_name(None, "h", 12, 1),
            "pid-h-12.capture-1.pftrace"
        );
        assert!(super::super::is_collector_file("rank-0.capture-2.pftrace"));
    }

    #[test]
    fn requests_parse_and_print() {
        let r = CaptureRequest::parse("capture duration_ms=5000\n").expect("duration");
        assert_eq!(r.length, CaptureLength::Millis(5000));
        assert_eq!(r.start_ns, None);
        let s = CaptureRequest {
            length: CaptureLength::Steps {
                steps: 3,
                max_ms: 1000,
                find_ms: 500,
            },
            start_ns: Some(42),
        };
        assert_eq!(
            s.to_line(),
            "capture steps=3 max_ms=1000 find_ms=500 start_ns=42\n"
        );
        assert_eq!(CaptureRequest::parse(&s.to_line()), Ok(s));
        let d = CaptureRequest::parse("capture steps=2").expect("steps");
        assert_eq!(
            d.length,
            CaptureLength::Steps {
                steps: 2,
                max_ms: STEPS_TIME_BOUND_MS,
                find_ms: STEPS_FIND_BOUND_MS,
            }
        );
        for bad in [
            "",
            "stop",
            "capture",
            "capture duration_ms=0",
            "capture duration_ms=abc",
            "capture steps=0",
            "capture steps=1 duration_ms=5",
            "capture bogus=1",
            "capture duration_ms",
            "capture duration_ms=99999999999",
        ] {
            let e = CaptureRequest::parse(bad).expect_err(bad);
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn status_replies_round_trip() {
        for st in [
            CaptureStatus::default(),
            CaptureStatus {
                busy: Some(3),
                written: 2,
            },
        ] {
            assert_eq!(CaptureStatus::parse(&st.to_line()), Ok(st));
        }
        assert_eq!(
            CaptureStatus::parse("ok status written=4 busy=5"),
            Ok(CaptureStatus {
                busy: Some(5),
                written: 4
            })
        );
        for bad in [
            "ok capture 1",
            "error unknown command \"status\"",
            "ok status busy=1",
            "ok status written=x",
            "ok status written=1 late=2",
        ] {
            assert!(CaptureStatus::parse(bad).is_err(), "{bad}");
        }
    }
}
