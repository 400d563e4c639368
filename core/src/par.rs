//! Two pieces of work at once, on threads that outlive them.
//!
//! A thread spawned for each piece of work costs its `clone3`, the mapping
//! and unmapping of its stack, and a scheduler wake-up: about 0.2 ms a
//! spawn on the VMs measured (docs/PERFORMANCE.md), paid on the path of the
//! thread that waits for it. The gzip Kineto import hands work to a second
//! thread once per round of pieces (about 20 times for a 54 MB trace), and
//! the model's sort and the analysis once each, so their second threads
//! come from rayon's pool, started once per process.

/// `(a(), b())`: `b` on another thread while `a` runs on this one; `a` may
/// wait for what `b` does (the pipeline's thread waits for the pieces its
/// helper inflates). A panic in either is raised here once both are done.
pub(crate) fn beside<A, B: Send>(a: impl FnOnce() -> A, b: impl FnOnce() -> B + Send) -> (A, B) {
    if rayon::current_thread_index().is_some() {
        // On a pool thread, `b` would be queued behind this thread's own
        // work, where `a` waiting for it could wait for ever (a pool of
        // one thread): a scoped thread of its own instead.
        return std::thread::scope(|s| {
            let other = s.spawn(b);
            let x = a();
            let y = other
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (x, y)
        });
    }
    let mut theirs = None;
    let mine = rayon::in_place_scope(|s| {
        let out = &mut theirs;
        s.spawn(move |_| *out = Some(b()));
        a()
    });
    // The scope returns once `b` has run (its panic is raised above).
    let theirs = theirs.expect("the scope waits for its spawned work");
    (mine, theirs)
}

#[cfg(test)]
mod tests {
    use super::beside;
    use std::sync::mpsc;

    #[test]
    fn either_side_may_wait_for_the_other() {
        // `a` waits for a value only `b` sends, from outside and from
        // inside the pool (where `b` must not be queued behind `a`).
        let run = || {
            let (tx, rx) = mpsc::channel();
            let (got, sent) = beside(
                move || rx.recv().expect("b sends"),
                move || {
                    tx.send(7).expect("a waits");
                    1
                },
            );
            assert_eq!((got, sent), (7, 1));
        };
        run();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a pool");
        pool.install(run);
    }

    #[test]
    fn a_panic_on_either_side_is_raised() {
        let a = std::panic::catch_unwind(|| beside(|| panic!("a"), || 1));
        let b = std::panic::catch_unwind(|| beside(|| 1, || panic!("b")));
        assert!(a.is_err() && b.is_err());
    }
}
