//! Zeroed activity buffers, kept for CUPTI's next request.
//!
//! CUPTI asks for a buffer on the application's own thread, inside one of
//! its CUDA calls, each time that thread's buffer is handed back (at every
//! flush, so about ten times a second per thread that calls CUDA). A fresh
//! 2 MiB allocation there costs page faults, and by default CUPTI then
//! zeroes it on that thread: 0.2 to 4 ms a request on the H200 machine's
//! VM (`CUPTI overhead: activity buffer request` in the trace), on the
//! critical path of a host-bound loop. So the collector tells CUPTI its
//! buffers come zeroed (`CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER`),
//! and hands out buffers whose pages are already faulted in and zeroed: the
//! writer thread zeroes each buffer it has converted and keeps it here.

use std::alloc::Layout;
use std::sync::Mutex;

use crate::cupti_api::{Cupti, ATTR_ZEROED_OUT_ACTIVITY_BUFFER};

/// Buffers kept ready (zeroed, touched) beyond those in use: 16 MiB at 2 MiB.
pub const KEEP: usize = 8;
/// Buffers made ready when the writer starts.
pub const PREFILL: usize = 4;

/// Zeroed buffers of one size, as addresses.
pub struct Pool {
    layout: Layout,
    ready: Mutex<Vec<usize>>,
}

impl Pool {
    pub const fn new(layout: Layout) -> Self {
        Pool {
            layout,
            ready: Mutex::new(Vec::new()),
        }
    }

    /// A zeroed buffer: a kept one, else a new zeroed allocation (null when
    /// that fails). Never blocks for long: the lock guards a push or a pop.
    pub fn take(&self) -> *mut u8 {
        if let Ok(mut r) = self.ready.try_lock() {
            if let Some(p) = r.pop() {
                return p as *mut u8;
            }
        }
        // SAFETY: a non-zero-size layout.
        unsafe { std::alloc::alloc_zeroed(self.layout) }
    }

    /// Takes back a buffer of this pool's layout: zeroes it whole (CUPTI
    /// says only how many bytes of records it holds, not what else it
    /// wrote) and keeps it, or frees it past [`KEEP`].
    ///
    /// # Safety
    /// `p` came from [`Pool::take`] (or this layout's allocation) and is
    /// no longer used by anyone.
    pub unsafe fn give_back(&self, p: *mut u8) {
        if p.is_null() {
            return;
        }
        if self.ready() >= KEEP {
            // Not worth zeroing: it would be freed.
            // SAFETY: allocated with this layout, unused (the caller's word).
            unsafe { std::alloc::dealloc(p, self.layout) };
            return;
        }
        // Zeroed before the lock is taken: `take` must not wait for it.
        // SAFETY: the whole allocation, ours alone.
        unsafe { std::ptr::write_bytes(p, 0, self.layout.size()) };
        // SAFETY: zeroed, of this layout, ours alone.
        unsafe { self.keep(p) };
    }

    /// Keeps zeroed buffer `p` ready, or frees it when [`KEEP`] are.
    ///
    /// # Safety
    /// `p` is an all-zero allocation of this pool's layout, used by no one.
    unsafe fn keep(&self, p: *mut u8) {
        let mut r = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        if r.len() >= KEEP {
            drop(r);
            // SAFETY: an allocation of this layout (the caller's word).
            unsafe { std::alloc::dealloc(p, self.layout) };
            return;
        }
        r.push(p as usize);
    }

    /// Makes `n` buffers ready, their pages faulted in now (off the
    /// application's threads) rather than when CUPTI first writes them.
    pub fn prefill(&self, n: usize) {
        for _ in 0..n {
            if self.ready() >= KEEP {
                return;
            }
            // SAFETY: a non-zero-size layout.
            let p = unsafe { std::alloc::alloc_zeroed(self.layout) };
            if p.is_null() {
                return;
            }
            for off in (0..self.layout.size()).step_by(4096) {
                // SAFETY: inside the allocation; a volatile zero store so
                // the page is faulted in (the compiler may not drop it).
                unsafe { std::ptr::write_volatile(p.add(off), 0) };
            }
            // SAFETY: just allocated zeroed with this layout.
            unsafe { self.keep(p) };
        }
    }

    /// Buffers ready now.
    pub fn ready(&self) -> usize {
        self.ready.lock().map(|r| r.len()).unwrap_or(0)
    }
}

/// Tells CUPTI that our buffers come zeroed, so that it does not zero them
/// itself on the application's thread. Returns what the trace's
/// `activity_buffers` metadata says.
pub(crate) fn tell_cupti(cupti: &Cupti, buffer_bytes: usize) -> String {
    let Some(set) = cupti.activity_set_attribute else {
        return "zeroed by CUPTI (no cuptiActivitySetAttribute)".into();
    };
    let mut value: u8 = 1;
    let mut size = std::mem::size_of::<u8>();
    // SAFETY: a uint8_t attribute: its size and a pointer to it, both live
    // for the call.
    let rc = unsafe {
        set(
            ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
            &mut size,
            (&mut value as *mut u8).cast(),
        )
    };
    match cupti.check("cuptiActivitySetAttribute(ZEROED_OUT_ACTIVITY_BUFFER)", rc) {
        Ok(()) => format!(
            "zeroed and faulted in by the writer, {} MiB each, up to {} kept ready",
            buffer_bytes >> 20,
            KEEP
        ),
        Err(e) => format!("zeroed by CUPTI ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout::from_size_align(64 << 10, 8).expect("layout")
    }

    #[test]
    fn a_buffer_given_back_comes_out_again_zeroed() {
        let pool = Pool::new(layout());
        let p = pool.take();
        assert!(!p.is_null());
        // SAFETY: a 64 KiB buffer of ours.
        unsafe {
            std::ptr::write_bytes(p, 0xAB, 1000);
            pool.give_back(p);
        }
        assert_eq!(pool.ready(), 1);
        let q = pool.take();
        assert_eq!(q, p, "the kept buffer is reused");
        // SAFETY: the whole 64 KiB is ours.
        let all = unsafe { std::slice::from_raw_parts(q, 64 << 10) };
        assert!(all.iter().all(|&b| b == 0), "reused buffers are zeroed");
        // SAFETY: unused from here on.
        unsafe { pool.give_back(q) };
    }

    #[test]
    fn at_most_keep_buffers_are_kept_and_prefill_respects_it() {
        let pool = Pool::new(layout());
        pool.prefill(3);
        assert_eq!(pool.ready(), 3);
        let taken: Vec<*mut u8> = (0..KEEP + 3).map(|_| pool.take()).collect();
        assert_eq!(pool.ready(), 0);
        for p in taken {
            // SAFETY: each from `take`, unused.
            unsafe { pool.give_back(p) };
        }
        assert_eq!(pool.ready(), KEEP);
        pool.prefill(2);
        assert_eq!(pool.ready(), KEEP);
    }
}
