//! SIGINT/SIGTERM, and the crashes SIGSEGV/SIGBUS/SIGABRT/SIGILL/SIGFPE:
//! flush the trace, then hand the signal to whoever had it.
//!
//! The handler only touches atomics, sleeps and (on a timeout) write(2)s
//! one line: all async-signal-safe. The work is done by the writer thread,
//! which was not interrupted: it asks CUPTI for everything buffered (a
//! forced flush), converts and writes it, while the handler waits, at most
//! [`SIGNAL_WAIT`] (INT/TERM) or [`CRASH_WAIT`] (crashes). Then the handler
//! calls the previous handler, or for a default action restores it and
//! re-raises, so the program ends exactly as it would have (same signal,
//! same core dump).
//!
//! Why a crash is safe enough to handle this way: the crashed thread itself
//! runs nothing but atomics and nanosleep, so whatever state it broke
//! (a heap it corrupted, a lock it held) is touched only by the writer
//! thread. If the writer then blocks on such a lock (malloc's, or CUDA's if
//! the crash was inside the driver) or faults itself, the handler stops
//! waiting after CRASH_WAIT and the process dies as it would have, only
//! that much later. A crash on the writer thread (or while a crash is
//! already being handled) does not wait at all. The handlers run on the
//! alternate signal stack when the program set one (SA_ONSTACK), so a stack
//! overflow still reaches the default action.

use crate::error::SignalError;
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::session::{session, CRASH_WAIT, SIGNAL_WAIT};

static PREV_INT: OnceLock<libc::sigaction> = OnceLock::new();
static PREV_TERM: OnceLock<libc::sigaction> = OnceLock::new();
static PREV_SEGV: OnceLock<libc::sigaction> = OnceLock::new();
static PREV_BUS: OnceLock<libc::sigaction> = OnceLock::new();
static PREV_ABRT: OnceLock<libc::sigaction> = OnceLock::new();
static PREV_ILL: OnceLock<libc::sigaction> = OnceLock::new();
static PREV_FPE: OnceLock<libc::sigaction> = OnceLock::new();

/// The writer thread's id (a crash there must not wait for itself).
pub static WRITER_TID: AtomicU32 = AtomicU32::new(0);
/// A crash is being handled: a second one (the writer faulting on what the
/// first broke, another thread) goes straight to the previous handler.
static CRASHING: AtomicBool = AtomicBool::new(false);

/// The signals a crash raises.
pub const CRASH_SIGNALS: [c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGABRT,
    libc::SIGILL,
    libc::SIGFPE,
];

fn prev(sig: c_int) -> Option<&'static libc::sigaction> {
    match sig {
        libc::SIGINT => PREV_INT.get(),
        libc::SIGTERM => PREV_TERM.get(),
        libc::SIGSEGV => PREV_SEGV.get(),
        libc::SIGBUS => PREV_BUS.get(),
        libc::SIGABRT => PREV_ABRT.get(),
        libc::SIGILL => PREV_ILL.get(),
        libc::SIGFPE => PREV_FPE.get(),
        _ => None,
    }
}

fn slot(sig: c_int) -> Option<&'static OnceLock<libc::sigaction>> {
    Some(match sig {
        libc::SIGINT => &PREV_INT,
        libc::SIGTERM => &PREV_TERM,
        libc::SIGSEGV => &PREV_SEGV,
        libc::SIGBUS => &PREV_BUS,
        libc::SIGABRT => &PREV_ABRT,
        libc::SIGILL => &PREV_ILL,
        libc::SIGFPE => &PREV_FPE,
        _ => return None,
    })
}

/// Whether a handler for `sig` may wait for the writer now.
fn may_wait(sig: c_int) -> bool {
    if !CRASH_SIGNALS.contains(&sig) {
        return true;
    }
    // SAFETY: gettid has no arguments and cannot fail (async-signal-safe).
    let me = unsafe { libc::gettid() } as u32;
    me != WRITER_TID.load(Ordering::SeqCst) && !CRASHING.swap(true, Ordering::SeqCst)
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        let Some(old) = prev(sig) else { return };
        let handler = old.sa_sigaction;
        let crash = CRASH_SIGNALS.contains(&sig);
        // A crash signal with the default action (or ignored: the kernel
        // kills on a synchronous fault anyway) ends the process: a final
        // flush. With a program's own handler (faulthandler, a runtime that
        // uses SIGSEGV on purpose) the process may go on: a plain flush,
        // which leaves the writer running.
        let terminating = handler == libc::SIG_DFL || (crash && handler == libc::SIG_IGN);
        if crash && terminating && !CRASHING.load(Ordering::SeqCst) {
            print_native_stack(sig, info);
        }
        if (handler != libc::SIG_IGN || crash) && may_wait(sig) {
            if let Some(s) = session() {
                s.flush_and_wait(terminating, if crash { CRASH_WAIT } else { SIGNAL_WAIT });
            }
        }
        if handler == libc::SIG_IGN && !crash {
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

// glibc's <execinfo.h>: the return addresses of the calling thread's stack,
// and writing them, symbolized from dynamic symbols, to a file descriptor
// (no malloc).
extern "C" {
    fn backtrace(buffer: *mut *mut c_void, size: c_int) -> c_int;
    fn backtrace_symbols_fd(buffer: *const *mut c_void, size: c_int, fd: c_int);
}

/// Loads what `backtrace` needs (libgcc's unwinder) now, outside any
/// signal handler, so a crash report does not dlopen inside one.
fn prime_backtrace() {
    let mut frames = [std::ptr::null_mut::<c_void>(); 4];
    // SAFETY: writes at most 4 pointers into the array we own.
    unsafe { backtrace(frames.as_mut_ptr(), 4) };
}

/// A process that is about to die of a crash says where, on stderr: the
/// signal, the faulting address and the faulting thread's native stack
/// (which library crashed it: the program's, CUDA's, CUPTI's or ours).
fn print_native_stack(sig: c_int, info: *mut libc::siginfo_t) {
    let mut line = [0u8; 160];
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGABRT => "SIGABRT",
        libc::SIGILL => "SIGILL",
        _ => "SIGFPE",
    };
    let addr = if info.is_null() {
        0
    } else {
        // SAFETY: `info` is the kernel's siginfo for this signal (SA_SIGINFO).
        (unsafe { (*info).si_addr() }) as usize
    };
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    let n = format_into(
        &mut line,
        format_args!(
            "streamscope: {name} (address {addr:#x}) in thread {tid}; its native stack:\n"
        ),
    );
    let mut frames = [std::ptr::null_mut::<c_void>(); 48];
    // SAFETY: write(2) of our buffer; backtrace writes at most 48 pointers
    // into the array we own; backtrace_symbols_fd reads them and writes to
    // fd 2 without allocating.
    unsafe {
        libc::write(2, line.as_ptr().cast(), n);
        let k = backtrace(frames.as_mut_ptr(), frames.len() as c_int);
        backtrace_symbols_fd(frames.as_ptr(), k, 2);
    }
}

/// Formats into a fixed buffer (no allocation); returns the length used.
fn format_into(buf: &mut [u8], args: std::fmt::Arguments<'_>) -> usize {
    struct W<'a>(&'a mut [u8], usize);
    impl std::fmt::Write for W<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let room = self.0.len() - self.1;
            let n = s.len().min(room);
            self.0[self.1..self.1 + n].copy_from_slice(&s.as_bytes()[..n]);
            self.1 += n;
            Ok(())
        }
    }
    let mut w = W(buf, 0);
    let _ = std::fmt::write(&mut w, args);
    w.1
}

/// Our handler's flags: SA_SIGINFO, plus SA_RESTART and SA_ONSTACK only
/// when the previous disposition had them. Python installs its SIGINT
/// handler without SA_RESTART and relies on the EINTR a blocking call gets
/// to raise KeyboardInterrupt; forcing SA_RESTART would hang it.
fn handler_flags(old_flags: c_int) -> c_int {
    libc::SA_SIGINFO | (old_flags & (libc::SA_RESTART | libc::SA_ONSTACK))
}

/// Installs the handlers, keeping the previous ones to chain to.
pub fn install() -> Result<(), SignalError> {
    prime_backtrace();
    let sigs = [libc::SIGINT, libc::SIGTERM]
        .into_iter()
        .chain(CRASH_SIGNALS);
    for sig in sigs {
        let Some(slot) = slot(sig) else { continue };
        // SAFETY: zeroed sigaction structs are valid; we fill the handler,
        // flags and an empty mask, and sigaction saves the old one in `old`.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                return Err(SignalError(sig));
            }
            if slot.set(old).is_err() {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as *const () as usize;
            act.sa_flags = handler_flags(old.sa_flags);
            if CRASH_SIGNALS.contains(&sig) {
                // On the alternate stack when there is one (stack overflow).
                act.sa_flags |= libc::SA_ONSTACK;
            }
            libc::sigemptyset(&mut act.sa_mask);
            if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
                return Err(SignalError(sig));
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
