//! SIGINT/SIGTERM: flush the trace, then hand the signal to whoever had it.
//!
//! The handler only touches atomics and sleeps (both async-signal-safe)
//! while the writer thread flushes, for at most [`SIGNAL_WAIT`]; then it
//! calls the previous handler, or for a default action restores it and
//! re-raises, so the program ends exactly as it would have.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use crate::session::{session, SIGNAL_WAIT};

static PREV_INT: OnceLock<libc::sigaction> = OnceLock::new();
static PREV_TERM: OnceLock<libc::sigaction> = OnceLock::new();

fn prev(sig: c_int) -> Option<&'static libc::sigaction> {
    match sig {
        libc::SIGINT => PREV_INT.get(),
        libc::SIGTERM => PREV_TERM.get(),
        _ => None,
    }
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        let Some(old) = prev(sig) else { return };
        let handler = old.sa_sigaction;
        let terminating = handler == libc::SIG_DFL;
        if handler != libc::SIG_IGN {
            if let Some(s) = session() {
                s.flush_and_wait(terminating, SIGNAL_WAIT);
            }
        }
        if handler == libc::SIG_IGN {
            return;
        }
        if terminating {
            // SAFETY: restores the saved disposition and re-raises; the
            // signal is blocked while we run, so it is delivered (and ends
            // the process) right after this handler returns.
            unsafe {
                libc::sigaction(sig, old, std::ptr::null_mut());
                libc::raise(sig);
            }
        } else if old.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: with SA_SIGINFO the saved handler has this signature.
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                unsafe { std::mem::transmute(handler) };
            f(sig, info, ctx);
        } else {
            // SAFETY: without SA_SIGINFO the saved handler is `void (*)(int)`.
            let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(handler) };
            f(sig);
        }
    });
}

/// Our handler's flags: SA_SIGINFO, plus SA_RESTART and SA_ONSTACK only
/// when the previous disposition had them. Python installs its SIGINT
/// handler without SA_RESTART and relies on the EINTR a blocking call gets
/// to raise KeyboardInterrupt; forcing SA_RESTART would hang it.
fn handler_flags(old_flags: c_int) -> c_int {
    libc::SA_SIGINFO | (old_flags & (libc::SA_RESTART | libc::SA_ONSTACK))
}

/// Installs the handlers, keeping the previous ones to chain to.
pub fn install() -> Result<(), String> {
    for (sig, slot) in [(libc::SIGINT, &PREV_INT), (libc::SIGTERM, &PREV_TERM)] {
        // SAFETY: zeroed sigaction structs are valid; we fill the handler,
        // flags and an empty mask, and sigaction saves the old one in `old`.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                return Err(format!("sigaction({sig}) failed"));
            }
            if slot.set(old).is_err() {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as *const () as usize;
            act.sa_flags = handler_flags(old.sa_flags);
            libc::sigemptyset(&mut act.sa_mask);
            if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
                return Err(format!("sigaction({sig}) failed"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_and_onstack_follow_the_previous_handler() {
        assert_eq!(handler_flags(0), libc::SA_SIGINFO);
        assert_eq!(
            handler_flags(libc::SA_ONSTACK | libc::SA_NODEFER),
            libc::SA_SIGINFO | libc::SA_ONSTACK
        );
        assert_eq!(
            handler_flags(libc::SA_RESTART),
            libc::SA_SIGINFO | libc::SA_RESTART
        );
    }
}
