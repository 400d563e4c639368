//! Opening a FIFO (a named pipe, or `<(cat rank-0.pftrace)`) without
//! blocking forever on one that no process writes.
//!
//! A plain open of a FIFO waits until a writer opens it, with no end. It is
//! opened non-blocking instead, and read through [`Patient`]: while the
//! writer is there but has nothing yet, a read waits for it as a blocking
//! read would; before any byte came, an end (no writer) is waited out for
//! [`NO_WRITER_WAIT`] and then is an error that says so.

use std::io::{self, Read};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a FIFO may have no writer before its first byte.
pub(crate) const NO_WRITER_WAIT: Duration = Duration::from_secs(10);

/// Whether `path` is a FIFO (a pipe), links followed.
pub(crate) fn is_fifo(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Opens the FIFO at `path` without waiting for a writer.
pub(crate) fn open(path: &Path) -> io::Result<Patient> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK);
    }
    Ok(Patient {
        file: o.open(path)?,
        started: false,
        opened: Instant::now(),
        wait: NO_WRITER_WAIT,
    })
}

/// A non-blocking FIFO read as a blocking one, but for a missing writer.
pub(crate) struct Patient {
    file: std::fs::File,
    /// A byte came: an end is now the end.
    started: bool,
    opened: Instant,
    wait: Duration,
}

impl Read for Patient {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.file.read(buf) {
                Ok(0) if !self.started && !buf.is_empty() => {
                    if self.opened.elapsed() >= self.wait {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "a FIFO that nothing wrote to in {} s (no writer?)",
                                self.wait.as_secs()
                            ),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(n) => {
                    self.started |= n > 0;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn mkfifo(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ss-fifo-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("pipe");
        let ok = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .expect("mkfifo");
        assert!(ok.success());
        p
    }

    #[test]
    fn no_writer_is_an_error_after_the_wait_not_a_hang() {
        let p = mkfifo("none");
        let mut f = open(&p).expect("opens at once");
        f.wait = Duration::from_millis(200);
        let t0 = Instant::now();
        let e = f.read_to_end(&mut Vec::new()).expect_err("no writer");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_writer_that_comes_late_and_pauses_is_read_whole() {
        let p = mkfifo("late");
        let w = p.clone();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            std::thread::sleep(Duration::from_millis(100));
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&w)
                .expect("open for writing");
            f.write_all(b"first ").expect("write");
            std::thread::sleep(Duration::from_millis(100));
            f.write_all(b"second").expect("write");
        });
        let mut text = Vec::new();
        open(&p)
            .expect("opens")
            .read_to_end(&mut text)
            .expect("reads");
        writer.join().expect("writer");
        assert_eq!(text, b"first second");
    }
}
