//! A bounded queue between CUPTI's buffer-completed callback and the writer
//! thread, and a budget on buffers outstanding. Memory stays bounded: a full
//! queue drops the buffer at once and counts its records, and past the
//! budget CUPTI is refused a buffer (it then drops records and counts them).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

pub struct BoundedQueue<T> {
    items: Mutex<VecDeque<T>>,
    capacity: usize,
    not_empty: Condvar,
    not_full: Condvar,
    dropped_records: AtomicU64,
}

impl<T> BoundedQueue<T> {
    pub fn new(capacity: usize) -> Self {
        BoundedQueue {
            items: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity: capacity.max(1),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            dropped_records: AtomicU64::new(0),
        }
    }

    /// Queues `item`, waiting up to `wait` for room; when there is none it
    /// is handed back and `records()` of it are counted as dropped.
    pub fn push(&self, item: T, wait: Duration, records: impl FnOnce(&T) -> u64) -> Result<(), T> {
        let Ok(mut q) = self.items.lock() else {
            self.dropped_records
                .fetch_add(records(&item), Ordering::Relaxed);
            return Err(item);
        };
        if q.len() >= self.capacity && !wait.is_zero() {
            q = match self
                .not_full
                .wait_timeout_while(q, wait, |q| q.len() >= self.capacity)
            {
                Ok((q, _)) => q,
                Err(_) => {
                    self.dropped_records
                        .fetch_add(records(&item), Ordering::Relaxed);
                    return Err(item);
                }
            };
        }
        if q.len() >= self.capacity {
            drop(q);
            self.dropped_records
                .fetch_add(records(&item), Ordering::Relaxed);
            return Err(item);
        }
        q.push_back(item);
        self.not_empty.notify_one();
        Ok(())
    }

    /// Takes the oldest item, waiting up to `wait` for one.
    pub fn pop(&self, wait: Duration) -> Option<T> {
        let q = self.items.lock().ok()?;
        let mut q = if q.is_empty() {
            self.not_empty
                .wait_timeout_while(q, wait, |q| q.is_empty())
                .ok()?
                .0
        } else {
            q
        };
        let item = q.pop_front();
        if item.is_some() {
            self.not_full.notify_one();
        }
        item
    }

    pub fn len(&self) -> usize {
        self.items.lock().map(|q| q.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records dropped because the queue was full.
    pub fn dropped_records(&self) -> u64 {
        self.dropped_records.load(Ordering::Relaxed)
    }
}

/// Counts activity buffers allocated and not yet freed (held by CUPTI,
/// queued, or being converted), so their total memory has a ceiling.
pub struct BufferBudget {
    outstanding: AtomicUsize,
    cap: usize,
    refused: AtomicU64,
}

impl BufferBudget {
    pub const fn new(cap: usize) -> Self {
        BufferBudget {
            outstanding: AtomicUsize::new(0),
            cap,
            refused: AtomicU64::new(0),
        }
    }

    /// Takes one slot; false (and counted as refused) when all are in use.
    pub fn try_acquire(&self) -> bool {
        let taken = self
            .outstanding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.cap).then_some(n + 1)
            })
            .is_ok();
        if !taken {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Gives back a slot taken by `try_acquire` (the buffer was freed).
    pub fn release(&self) {
        let _ = self
            .outstanding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    pub fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Acquire)
    }

    /// Buffer requests refused because the budget was spent.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn full_queue_drops_and_counts_records() {
        let q = BoundedQueue::new(2);
        assert!(q.push(10u64, Duration::ZERO, |n| *n).is_ok());
        assert!(q.push(20, Duration::ZERO, |n| *n).is_ok());
        assert_eq!(q.push(7, Duration::from_millis(5), |n| *n), Err(7));
        assert_eq!(q.push(5, Duration::ZERO, |n| *n), Err(5));
        assert_eq!(q.dropped_records(), 12);
        assert_eq!(q.pop(Duration::ZERO), Some(10));
        assert!(q.push(30, Duration::ZERO, |n| *n).is_ok());
        assert_eq!(q.len(), 2);
        assert_eq!(q.dropped_records(), 12);
    }

    #[test]
    fn the_budget_refuses_past_its_cap_until_a_buffer_is_freed() {
        let b = BufferBudget::new(3);
        assert!(b.try_acquire() && b.try_acquire() && b.try_acquire());
        assert!(!b.try_acquire());
        assert!(!b.try_acquire());
        assert_eq!((b.outstanding(), b.refused()), (3, 2));
        b.release();
        assert!(b.try_acquire());
        assert!(!b.try_acquire());
        assert_eq!((b.outstanding(), b.refused()), (3, 3));
        for _ in 0..5 {
            b.release(); // extra releases never wrap below zero
        }
        assert_eq!(b.outstanding(), 0);
    }

    #[test]
    fn the_budget_holds_under_concurrent_requests() {
        let b = Arc::new(BufferBudget::new(8));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || (0..100).filter(|_| b.try_acquire()).count())
            })
            .collect();
        let got: usize = threads.into_iter().filter_map(|t| t.join().ok()).sum();
        assert_eq!(got, 8);
        assert_eq!(b.outstanding(), 8);
        assert_eq!(b.refused(), 400 - 8);
    }

    #[test]
    fn a_waiting_push_succeeds_when_the_consumer_makes_room() {
        let q = Arc::new(BoundedQueue::new(1));
        assert!(q.push(1u64, Duration::ZERO, |_| 1).is_ok());
        let consumer = {
            let q = q.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                q.pop(Duration::from_secs(1))
            })
        };
        assert!(q.push(2, Duration::from_secs(5), |_| 1).is_ok());
        assert_eq!(consumer.join().ok().flatten(), Some(1));
        assert_eq!(q.pop(Duration::ZERO), Some(2));
        assert_eq!(q.pop(Duration::from_millis(1)), None);
        assert_eq!(q.dropped_records(), 0);
    }
}
