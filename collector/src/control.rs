//! Armed mode's capture requests: the queue of one pending request that
//! the triggers fill and the writer takes, and the control socket
//! (`DIR/.control/NAME.sock`, a Unix socket only this user can reach)
//! served by its own collector thread, never by the application's.

use crate::error::ControlError;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use streamscope_core::protocol::armed::{self as proto, CaptureRequest, CaptureStatus};

/// Capture numbers and the one request waiting for the writer.
#[derive(Debug)]
pub struct Requests {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    next_k: u32,
    pending: Option<(u32, CaptureRequest)>,
    active: Option<u32>,
    /// The last capture whose file is written (0: none).
    written: u32,
}

impl Default for Requests {
    fn default() -> Self {
        Requests {
            state: Mutex::new(State {
                next_k: 1,
                pending: None,
                active: None,
                written: 0,
            }),
        }
    }
}

impl Requests {
    /// Queues a capture; its number, or why not (one running or waiting).
    pub fn submit(&self, r: CaptureRequest) -> Result<u32, ControlError> {
        let mut st = self.state.lock().map_err(|_| ControlError::Poisoned)?;
        if let Some(k) = st.active.or(st.pending.map(|p| p.0)) {
            return Err(ControlError::Busy(k));
        }
        let k = st.next_k;
        st.next_k += 1;
        st.pending = Some((k, r));
        Ok(k)
    }

    /// The writer takes the waiting request (it is then the active one).
    pub fn take(&self) -> Option<(u32, CaptureRequest)> {
        let mut st = self.state.lock().ok()?;
        let p = st.pending.take()?;
        st.active = Some(p.0);
        Some(p)
    }

    /// The active capture ended, its file written and closed.
    pub fn finish(&self) {
        if let Ok(mut st) = self.state.lock() {
            if let Some(k) = st.active.take() {
                st.written = st.written.max(k);
            }
        }
    }

    /// The capture waiting or running, and the last one written.
    pub fn status(&self) -> Result<CaptureStatus, ControlError> {
        let st = self.state.lock().map_err(|_| ControlError::Poisoned)?;
        Ok(CaptureStatus {
            busy: st.active.or(st.pending.map(|p| p.0)),
            written: st.written,
        })
    }
}

/// Creates `dir` with mode 0700, or accepts an existing one that is a real
/// folder of ours that nobody else can enter.
pub fn private_dir(dir: &Path) -> Result<(), ControlError> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(ControlError::Create {
                path: dir.to_path_buf(),
                source,
            })
        }
    }
    let m = std::fs::symlink_metadata(dir).map_err(|source| ControlError::Inspect {
        path: dir.to_path_buf(),
        source,
    })?;
    // SAFETY: getuid has no arguments and cannot fail.
    let uid = unsafe { libc::getuid() };
    if !m.is_dir() || m.uid() != uid || m.permissions().mode() & 0o077 != 0 {
        return Err(ControlError::NotPrivate(dir.to_path_buf()));
    }
    Ok(())
}

/// The control socket, bound and set to mode 0600 (the armed writer
/// removes the file at exit).
pub struct ControlSocket {
    pub path: PathBuf,
    listener: UnixListener,
}

impl ControlSocket {
    pub fn bind(
        out_dir: &Path,
        rank: Option<u32>,
        host: &str,
        pid: u32,
    ) -> Result<Self, ControlError> {
        let dir = out_dir.join(proto::CONTROL_DIR);
        private_dir(&dir)?;
        let path = dir.join(proto::control_socket_name(rank, host, pid));
        // A file left by an earlier process with our pid (pids wrap) is stale.
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|source| ControlError::Bind {
            path: path.clone(),
            source,
        })?;
        // The folder (0700) already keeps others out; the socket says so too.
        if let Err(source) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        {
            let _ = std::fs::remove_file(&path);
            return Err(ControlError::Chmod { path, source });
        }
        Ok(ControlSocket { path, listener })
    }

    /// Serves requests on a thread of its own until the process ends.
    pub fn serve(self, requests: &'static Requests) -> Result<PathBuf, ControlError> {
        let path = self.path.clone();
        std::thread::Builder::new()
            .name("streamscope-control".into())
            .spawn(move || {
                crate::session::block_signals();
                for conn in self.listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        answer(conn, requests)
                    }));
                }
            })
            .map_err(ControlError::Thread)?;
        Ok(path)
    }
}

/// Longest request line read.
const MAX_LINE: u64 = 512;

/// Reads one line (2 s at most), answers one line: a capture request, or
/// `status`.
fn answer(conn: UnixStream, requests: &Requests) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
    let mut line = String::new();
    let mut reader = BufReader::new((&conn).take(MAX_LINE));
    let reply = match reader.read_line(&mut line) {
        Ok(_) if line.trim() == proto::STATUS_REQUEST.trim() => match requests.status() {
            Ok(st) => st.to_line(),
            Err(e) => format!("error {e}\n"),
        },
        Ok(_) => match CaptureRequest::parse(&line) {
            Ok(r) => match requests.submit(r) {
                Ok(k) => format!("ok capture {k}\n"),
                Err(e) => format!("error {e}\n"),
            },
            Err(e) => format!("error {e}\n"),
        },
        Err(e) => format!("error cannot read the request: {e}\n"),
    };
    let _ = (&conn).write_all(reply.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamscope_core::protocol::armed::CaptureLength;

    fn req() -> CaptureRequest {
        CaptureRequest {
            length: CaptureLength::Millis(10),
            start_ns: None,
        }
    }

    #[test]
    fn one_capture_at_a_time_numbered_from_1() {
        let r = Requests::default();
        assert_eq!(r.submit(req()).ok(), Some(1));
        assert!(
            matches!(r.submit(req()), Err(ControlError::Busy(1))),
            "one waiting"
        );
        assert_eq!(r.take().map(|p| p.0), Some(1));
        let e = r.submit(req()).expect_err("one running");
        assert!(matches!(e, ControlError::Busy(1)), "{e:?}");
        assert_eq!(e.to_string(), "capture 1 is already running");
        r.finish();
        assert_eq!(r.submit(req()).ok(), Some(2));
    }

    #[test]
    fn status_says_what_waits_runs_and_is_written() {
        let r = Requests::default();
        let st = |busy, written| Some(CaptureStatus { busy, written });
        let r_status = |r: &Requests| r.status().ok();
        assert_eq!(r_status(&r), st(None, 0));
        assert_eq!(r.submit(req()).ok(), Some(1));
        assert_eq!(r_status(&r), st(Some(1), 0), "waiting");
        let _ = r.take();
        assert_eq!(r_status(&r), st(Some(1), 0), "running");
        r.finish();
        assert_eq!(r_status(&r), st(None, 1), "written");
        r.finish();
        assert_eq!(r_status(&r), st(None, 1), "a second finish changes nothing");
    }

    #[test]
    fn the_socket_answers_and_is_private() {
        let dir = std::env::temp_dir().join(format!("ss-control-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let s = ControlSocket::bind(&dir, Some(2), "h", 5).expect("bind");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join(".control")), 0o700);
        assert_eq!(mode(&s.path), 0o600);
        let requests: &'static Requests = Box::leak(Box::default());
        let path = s.serve(requests).expect("serve");
        let ask = |line: &str| {
            let mut c = UnixStream::connect(&path).expect("connect");
            c.write_all(line.as_bytes()).expect("write");
            let mut out = String::new();
            c.read_to_string(&mut out).expect("read");
            out
        };
        assert_eq!(ask("capture duration_ms=5\n"), "ok capture 1\n");
        assert!(ask("capture duration_ms=5\n").starts_with("error capture 1 is already"));
        assert!(ask("hello\n").starts_with("error unknown command"));
        assert_eq!(ask("status\n"), "ok status written=0 busy=1\n");
        let _ = requests.take();
        requests.finish();
        assert_eq!(ask("status\n"), "ok status written=1\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
