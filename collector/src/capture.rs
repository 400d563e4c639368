//! The capture window: what `--capture-range`, `--delay` and `--duration`
//! of `streamscope record` reach the collector as (environment variables),
//! and the set of time intervals the collector keeps.
//!
//! Everything is recorded by CUPTI; the writer thread drops what falls
//! outside the window. The window is opened and closed in real time (by the
//! profiler-API and NVTX callbacks, or by the clock), and the writer sees a
//! record only after its end, so a record's fate is known when it arrives.

use crate::error::EnvError;
use std::sync::Mutex;

use streamscope_core::protocol::env;

pub const ENV_RANGE: &str = env::CAPTURE_RANGE;
pub const ENV_DELAY: &str = env::DELAY_S;
pub const ENV_DURATION: &str = env::DURATION_S;

/// The origin of `--delay`/`--duration`: `streamscope record`'s start
/// (CLOCK_MONOTONIC ns in `STREAMSCOPE_START_MONOTONIC_NS`, shared by every
/// process of the node), so all ranks capture the same wall-clock interval;
/// this process's own start (`now_ns`) when unset or not a time in the past.
pub fn window_origin(env_value: Option<&str>, now_ns: i64) -> i64 {
    env_value
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|&t| t > 0 && t <= now_ns)
        .unwrap_or(now_ns)
}

/// What opens the window.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// Open from the start (after the delay).
    Always,
    /// Between cudaProfilerStart/cuProfilerStart and the matching stop.
    ProfilerApi,
    /// While an NVTX range with this name is open (push/pop).
    Nvtx(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CaptureSpec {
    pub trigger: Trigger,
    pub delay_ns: i64,
    pub duration_ns: Option<i64>,
}

impl CaptureSpec {
    /// True when the whole run is kept (no option given).
    pub fn is_unlimited(&self) -> bool {
        self.trigger == Trigger::Always && self.delay_ns == 0 && self.duration_ns.is_none()
    }

    /// Parses the environment (through `get`); a malformed value is an
    /// error naming the variable.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let trigger = match get(ENV_RANGE).as_deref().map(str::trim) {
            None | Some("") => Trigger::Always,
            Some("cudaProfilerApi") => Trigger::ProfilerApi,
            Some(s) => match s.strip_prefix("nvtx:") {
                Some(name) if !name.is_empty() => Trigger::Nvtx(name.to_string()),
                _ => {
                    return Err(EnvError::CaptureRange {
                        var: ENV_RANGE,
                        value: s.to_string(),
                    })
                }
            },
        };
        let secs = |var: &str| -> Result<Option<i64>, EnvError> {
            match get(var) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => match v.trim().parse::<f64>() {
                    Ok(s) if s.is_finite() && s >= 0.0 => Ok(Some((s * 1e9) as i64)),
                    _ => Err(EnvError::Seconds {
                        var: var.to_string(),
                        value: v,
                    }),
                },
            }
        };
        Ok(CaptureSpec {
            trigger,
            delay_ns: secs(ENV_DELAY)?.unwrap_or(0),
            duration_ns: secs(ENV_DURATION)?,
        })
    }
}

/// Open/closed intervals of the capture, in collector clock ns.
#[derive(Debug)]
pub struct CaptureWindow {
    spec: CaptureSpec,
    origin_ns: i64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// (start, end); `None` = still open without a cap.
    intervals: Vec<(i64, Option<i64>)>,
    /// The last interval is open (its end, if any, is the duration cap).
    is_open: bool,
}

impl CaptureWindow {
    /// A window for `spec`, measured from `origin_ns` (collector start).
    pub fn new(spec: CaptureSpec, origin_ns: i64) -> Self {
        let mut state = State::default();
        if spec.trigger == Trigger::Always {
            let start = origin_ns + spec.delay_ns;
            state
                .intervals
                .push((start, spec.duration_ns.map(|d| start + d)));
        }
        CaptureWindow {
            spec,
            origin_ns,
            state: Mutex::new(state),
        }
    }

    pub fn spec(&self) -> &CaptureSpec {
        &self.spec
    }

    /// The trigger fired at `t_ns` (profiler start, NVTX range pushed).
    pub fn open(&self, t_ns: i64) {
        if self.spec.trigger == Trigger::Always {
            return;
        }
        let t = t_ns.max(self.origin_ns + self.spec.delay_ns);
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if st.is_open {
            return;
        }
        let first = st.intervals.first().map(|&(s, _)| s).unwrap_or(t);
        let cap = self.spec.duration_ns.map(|d| first + d);
        if cap.is_some_and(|c| t >= c) {
            return;
        }
        st.intervals.push((t, cap));
        st.is_open = true;
    }

    /// The trigger ended at `t_ns` (profiler stop, NVTX range popped).
    pub fn close(&self, t_ns: i64) {
        if self.spec.trigger == Trigger::Always {
            return;
        }
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if !st.is_open {
            return;
        }
        st.is_open = false;
        if let Some(last) = st.intervals.last_mut() {
            let end = last.1.map_or(t_ns, |cap| cap.min(t_ns));
            last.1 = Some(end.max(last.0));
        }
    }

    /// Whether something spanning [start, end] is kept: it overlaps an interval.
    pub fn keep(&self, start_ns: i64, end_ns: i64) -> bool {
        if self.spec.is_unlimited() {
            return true;
        }
        let Ok(st) = self.state.lock() else {
            return true;
        };
        st.intervals
            .iter()
            .any(|&(s, e)| end_ns >= s && e.is_none_or(|e| start_ns <= e))
    }

    /// (first open, last close) when the capture was limited, for
    /// `Process::capture_start_ns/capture_end_ns`.
    pub fn bounds(&self) -> (Option<i64>, Option<i64>) {
        if self.spec.is_unlimited() {
            return (None, None);
        }
        let Ok(st) = self.state.lock() else {
            return (None, None);
        };
        (
            st.intervals.first().map(|&(s, _)| s),
            st.intervals.last().and_then(|&(_, e)| e),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(vars: &[(&str, &str)]) -> Result<CaptureSpec, EnvError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        CaptureSpec::from_env(|k| m.get(k).cloned())
    }

    #[test]
    fn the_origin_is_records_start_when_given() {
        assert_eq!(window_origin(Some("1000"), 5000), 1000);
        assert_eq!(window_origin(Some(" 4999 "), 5000), 4999);
        assert_eq!(window_origin(None, 5000), 5000);
        assert_eq!(window_origin(Some("junk"), 5000), 5000);
        assert_eq!(window_origin(Some("9000"), 5000), 5000, "not in the past");
        assert_eq!(window_origin(Some("-3"), 5000), 5000);
        // Two processes started 3 s apart share one window.
        let spec = CaptureSpec {
            trigger: Trigger::Always,
            delay_ns: 10,
            duration_ns: Some(5),
        };
        let a = CaptureWindow::new(spec.clone(), window_origin(Some("100"), 200));
        let b = CaptureWindow::new(spec, window_origin(Some("100"), 3200));
        assert_eq!(a.bounds(), (Some(110), Some(115)));
        assert_eq!(a.bounds(), b.bounds());
    }

    #[test]
    fn env_parsing() {
        let none = parse(&[]).expect("empty env");
        assert!(none.is_unlimited());
        let p = parse(&[(ENV_RANGE, "cudaProfilerApi"), (ENV_DELAY, "1.5")]).expect("profiler");
        assert_eq!(p.trigger, Trigger::ProfilerApi);
        assert_eq!(p.delay_ns, 1_500_000_000);
        let n = parse(&[(ENV_RANGE, "nvtx:step 3"), (ENV_DURATION, "2")]).expect("nvtx");
        assert_eq!(n.trigger, Trigger::Nvtx("step 3".into()));
        assert_eq!(n.duration_ns, Some(2_000_000_000));
        assert!(matches!(
            parse(&[(ENV_RANGE, "nvtx:")]),
            Err(EnvError::CaptureRange { .. })
        ));
        assert!(parse(&[(ENV_RANGE, "bogus")]).is_err());
        let e = parse(&[(ENV_DELAY, "-1")]).expect_err("negative delay");
        assert_eq!(
            e,
            EnvError::Seconds {
                var: ENV_DELAY.into(),
                value: "-1".into()
            }
        );
        assert!(
            e.to_string().starts_with(&format!("{ENV_DELAY}=-1: ")),
            "{e}"
        );
        assert!(parse(&[(ENV_DURATION, "abc")]).is_err());
    }

    #[test]
    fn delay_and_duration_bound_an_always_window() {
        let spec = CaptureSpec {
            trigger: Trigger::Always,
            delay_ns: 100,
            duration_ns: Some(50),
        };
        let w = CaptureWindow::new(spec, 1000);
        assert!(!w.keep(0, 1099));
        assert!(w.keep(1090, 1110));
        assert!(w.keep(1149, 1200));
        assert!(!w.keep(1151, 1200));
        assert_eq!(w.bounds(), (Some(1100), Some(1150)));
        let all = CaptureWindow::new(
            CaptureSpec {
                trigger: Trigger::Always,
                delay_ns: 0,
                duration_ns: None,
            },
            5,
        );
        assert!(all.keep(0, 1));
        assert_eq!(all.bounds(), (None, None));
    }

    #[test]
    fn triggered_window_keeps_only_open_intervals() {
        let spec = CaptureSpec {
            trigger: Trigger::ProfilerApi,
            delay_ns: 0,
            duration_ns: None,
        };
        let w = CaptureWindow::new(spec, 0);
        assert!(!w.keep(10, 20), "nothing before the first start");
        w.open(100);
        w.open(110); // already open: ignored
        assert!(w.keep(150, 160), "open interval keeps later records");
        w.close(200);
        w.open(300);
        w.close(400);
        assert!(!w.keep(210, 290));
        assert!(w.keep(190, 210));
        assert!(w.keep(350, 360));
        assert_eq!(w.bounds(), (Some(100), Some(400)));
    }

    #[test]
    fn duration_caps_a_triggered_window() {
        let spec = CaptureSpec {
            trigger: Trigger::Nvtx("x".into()),
            delay_ns: 0,
            duration_ns: Some(100),
        };
        let w = CaptureWindow::new(spec, 0);
        w.open(50);
        w.close(500);
        assert_eq!(w.bounds(), (Some(50), Some(150)));
        w.open(600); // past first + duration: never reopens
        assert!(!w.keep(700, 710));
    }
}
