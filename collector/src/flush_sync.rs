//! The handshake between whoever needs the trace on disk now (atexit, a
//! signal handler) and the writer thread: atomics only, so it is safe in a
//! signal handler, and every wait has a time bound. When a final flush
//! times out the writer is marked abandoned: the process is going away,
//! and CUPTI may be torn down under it, so it must not call CUPTI again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

#[derive(Default)]
pub struct FlushSync {
    /// Final flush requested (exit, or a terminating signal).
    pub stop: AtomicBool,
    /// The writer thread is gone (or never started).
    pub finished: AtomicBool,
    pub requested: AtomicU64,
    pub done: AtomicU64,
    /// A final flush was given up on: no more CUPTI calls.
    abandoned: AtomicBool,
}

impl FlushSync {
    /// Asks the writer for a flush (a final one when `finish`) and waits up
    /// to `wait` for it (nanosleep in 5 ms steps). Returns whether it was
    /// done in time; a final flush that was not abandons the writer.
    pub fn flush_and_wait(&self, finish: bool, wait: Duration) -> bool {
        if self.finished.load(Ordering::SeqCst) {
            return true;
        }
        if finish {
            self.stop.store(true, Ordering::SeqCst);
        }
        let ticket = self.requested.fetch_add(1, Ordering::SeqCst) + 1;
        let step = libc::timespec {
            tv_sec: 0,
            tv_nsec: 5_000_000,
        };
        let rounds = wait.as_millis() / 5;
        for _ in 0..=rounds {
            if self.done.load(Ordering::SeqCst) >= ticket || self.finished.load(Ordering::SeqCst) {
                return true;
            }
            // SAFETY: nanosleep with a valid timespec; async-signal-safe.
            unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
        }
        if finish {
            self.abandoned.store(true, Ordering::SeqCst);
        }
        false
    }

    /// False once a final flush was given up on.
    pub fn may_call_cupti(&self) -> bool {
        !self.abandoned.load(Ordering::SeqCst)
    }

    /// The writer finished the flushes requested so far.
    pub fn mark_done(&self, upto: u64) {
        self.done.store(upto, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_final_flush_that_times_out_abandons_the_writer() {
        let s = FlushSync::default();
        let t = Instant::now();
        assert!(!s.flush_and_wait(true, Duration::from_millis(50)));
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        assert!(s.stop.load(Ordering::SeqCst));
        assert!(!s.may_call_cupti());
    }

    #[test]
    fn a_timely_flush_keeps_the_writer() {
        let s = Arc::new(FlushSync::default());
        let writer = {
            let s = s.clone();
            std::thread::spawn(move || {
                while s.requested.load(Ordering::SeqCst) == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                s.mark_done(s.requested.load(Ordering::SeqCst));
            })
        };
        assert!(s.flush_and_wait(true, Duration::from_secs(5)));
        let _ = writer.join();
        assert!(s.may_call_cupti());
        // A timed-out flush that is not final does not abandon anything.
        assert!(!s.flush_and_wait(false, Duration::from_millis(10)));
        assert!(s.may_call_cupti());
        // Nothing to wait for once the writer is gone.
        s.finished.store(true, Ordering::SeqCst);
        assert!(s.flush_and_wait(true, Duration::from_millis(10)));
        assert!(s.may_call_cupti());
    }
}
