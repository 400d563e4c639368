//! The two threads of a piece-by-piece import.
//!
//! Pieces come in rounds of up to [`Split::round_pieces`] buffers (reused
//! from round to round). In a round, a helper thread inflates the pieces in
//! order and publishes each; this thread takes them from the front, in file
//! order, parsing each straight into the trace. Whenever the helper is
//! ahead (at least [`Split::claim_at`] published pieces nobody took yet), it
//! takes the last of them and parses it into batches of events, which this
//! thread maps when it reaches that piece; once the round is inflated (and
//! the next round's first piece with it), the helper keeps taking pieces
//! from the back until none is left. So neither thread waits on a share
//! fixed in advance: the one that parses and maps, and the one that alone
//! can inflate, meet wherever their speeds put them.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::{Cutter, Outcome, PieceBuf, Split};
use crate::error::{Result, TraceError};
use crate::kineto::event::Event;
use crate::kineto::import::{self, ParsedEnd, Pieces};
use crate::kineto::KeepArgs;

/// Reads the text of `decoder` (about `total_bytes`) piece by piece (see
/// the module doc).
pub(super) fn read_pieces(
    path: &std::path::Path,
    decoder: impl std::io::Read + Send,
    total_bytes: usize,
    split: Split,
    keep: KeepArgs,
    read_error: impl Fn(std::io::Error) -> TraceError,
) -> Result<Outcome> {
    let piece_bytes = split.piece_bytes.max(1);
    let mut cutter = Cutter::new(decoder);
    let mut bufs: Vec<PieceBuf> = (0..split.round_pieces.max(1))
        .map(|_| PieceBuf::default())
        .collect();
    let mut next = PieceBuf::default();
    let mut next_last = cutter.piece(&mut next, piece_bytes).map_err(&read_error)?;
    if next_last {
        return Ok(Outcome::Whole(next.into_text()));
    }
    let mut pieces = Pieces::new(path, total_bytes, keep);
    let mut first = true;
    loop {
        std::mem::swap(&mut bufs[0], &mut next);
        let round = Round {
            bufs: &mut bufs,
            first,
            first_last: next_last,
            next: &mut next,
            piece_bytes,
            claim_at: split.claim_at.max(1),
            keep,
        };
        match round.read(&mut pieces, &mut cutter) {
            Ok(End::Trace) => return Ok(Outcome::Trace(Box::new(pieces.finish()))),
            Ok(End::Next { last }) => next_last = last,
            Ok(End::Failed) => return Ok(Outcome::Again),
            Err(e) => return Err(read_error(e)),
        }
        first = false;
    }
}

/// One round: `bufs[0]` already holds its first piece.
struct Round<'a> {
    bufs: &'a mut [PieceBuf],
    /// The round's first piece is the document's first.
    first: bool,
    /// The round's first piece is the text's last.
    first_last: bool,
    /// Gets the next round's first piece.
    next: &'a mut PieceBuf,
    piece_bytes: usize,
    claim_at: usize,
    keep: KeepArgs,
}

/// How a round ended.
enum End {
    /// The text's last piece was read.
    Trace,
    /// The next round's first piece is in `next`.
    Next { last: bool },
    /// A piece did not read as expected.
    Failed,
}

/// Where a piece of the round stands.
enum Slot<'b> {
    /// Not inflated yet.
    Pending,
    /// Inflated, taken by nobody yet.
    Ready(&'b [u8]),
    /// Taken by this thread, or by the helper.
    Taken,
    /// Parsed by the helper: how it ended (`None`: it did not parse).
    Parsed(Option<ParsedEnd>),
}

struct State<'b> {
    slots: Vec<Slot<'b>>,
    /// Pieces in the round, once known (the round is full or the text ended).
    count: Option<usize>,
    /// The text's last piece, once inflated.
    last: Option<usize>,
    /// Stop: a piece failed, reading failed, or the helper stopped.
    abort: bool,
}

impl<'b> State<'b> {
    /// The last piece published and not taken, when at least `at` are.
    fn claim_back(&mut self, at: usize) -> Option<(usize, &'b [u8])> {
        let ready = self
            .slots
            .iter()
            .filter(|s| matches!(s, Slot::Ready(_)))
            .count();
        if ready < at || self.abort {
            return None;
        }
        let j = self
            .slots
            .iter()
            .rposition(|s| matches!(s, Slot::Ready(_)))?;
        match std::mem::replace(&mut self.slots[j], Slot::Taken) {
            Slot::Ready(text) => Some((j, text)),
            _ => None,
        }
    }
}

/// The state both threads share, and the signal of its changes.
struct Shared<'b> {
    state: Mutex<State<'b>>,
    changed: Condvar,
}

impl<'b> Shared<'b> {
    fn lock(&self) -> MutexGuard<'_, State<'b>> {
        // A panic holding the lock leaves a state still worth reading: the
        // panic itself is raised again when the helper is joined.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut State<'b>)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }
}

/// Sets `abort` when the helper stops without saying it finished (an
/// error, or a panic), so this thread never waits for a piece in vain.
struct AbortUnlessDone<'s, 'b> {
    shared: &'s Shared<'b>,
    done: bool,
}

impl Drop for AbortUnlessDone<'_, '_> {
    fn drop(&mut self) {
        if !self.done {
            self.shared.update(|s| s.abort = true);
        }
    }
}

type Batch<'b> = Vec<Event<'b>>;

impl<'a> Round<'a> {
    fn read<R: std::io::Read + Send>(
        self,
        pieces: &mut Pieces,
        cutter: &mut Cutter<R>,
    ) -> std::io::Result<End> {
        let Round {
            bufs,
            first,
            first_last,
            next,
            piece_bytes,
            claim_at,
            keep,
        } = self;
        let n = bufs.len();
        let (head, rest) = bufs.split_first_mut().expect("a round has a piece");
        let head: &PieceBuf = head;
        let head = head.text();
        let mut slots: Vec<Slot> = (0..n).map(|_| Slot::Pending).collect();
        slots[0] = Slot::Taken; // this thread's, the document's first maybe
        let shared = Shared {
            state: Mutex::new(State {
                slots,
                count: first_last.then_some(1),
                last: first_last.then_some(0),
                abort: false,
            }),
            changed: Condvar::new(),
        };
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..n).map(|_| mpsc::channel::<Batch>()).unzip();
        let (to_helper, spent) = mpsc::channel::<Batch>();
        let shared = &shared;
        let helper = move || {
            let mut guard = AbortUnlessDone {
                shared,
                done: false,
            };
            let next_last = help(HelperArgs {
                shared,
                rest,
                cutter,
                next,
                piece_bytes,
                claim_at,
                keep,
                text_ended: first_last,
                senders,
                spent,
            });
            guard.done = next_last.is_ok();
            next_last
        };
        // The helper's thread comes from a pool (see `crate::par`), not
        // spawned each round.
        let (ok, next_last) = crate::par::beside(
            move || {
                let ok = map_round(shared, pieces, head, first, receivers, &to_helper);
                if !ok {
                    shared.update(|s| s.abort = true);
                }
                drop(to_helper);
                ok
            },
            helper,
        );
        let next_last = next_last?;
        if !ok {
            return Ok(End::Failed);
        }
        Ok(match next_last {
            None => End::Trace,
            Some(last) => End::Next { last },
        })
    }
}

/// This thread's part of a round: every piece in order, parsed here or
/// mapped from the helper's batches. `false` when a piece failed (or the
/// helper stopped).
fn map_round<'b>(
    shared: &Shared<'b>,
    pieces: &mut Pieces,
    head: &'b [u8],
    first: bool,
    receivers: Vec<Receiver<Batch<'b>>>,
    to_helper: &Sender<Batch<'b>>,
) -> bool {
    for (j, batches) in receivers.into_iter().enumerate() {
        let (mine, last) = if j == 0 {
            let s = shared.lock();
            (Some(head), s.last == Some(0))
        } else {
            let mut s = shared.lock();
            loop {
                if s.abort {
                    return false;
                }
                if s.count.is_some_and(|c| j >= c) {
                    return true;
                }
                match std::mem::replace(&mut s.slots[j], Slot::Taken) {
                    Slot::Ready(text) => break (Some(text), s.last == Some(j)),
                    Slot::Taken => break (None, s.last == Some(j)),
                    Slot::Parsed(end) => {
                        s.slots[j] = Slot::Parsed(end);
                        break (None, s.last == Some(j));
                    }
                    Slot::Pending => {
                        s.slots[j] = Slot::Pending;
                        s = shared.changed.wait(s).unwrap_or_else(|e| e.into_inner());
                    }
                }
            }
        };
        let ok = match mine {
            Some(text) => pieces.piece(text, first && j == 0, last),
            None => {
                // The helper's piece: its batches as they come, then its end.
                for batch in &batches {
                    pieces.map_events(&batch);
                    // Back to be freed by the thread that allocated it.
                    let _ = to_helper.send(batch);
                }
                let end = match std::mem::replace(&mut shared.lock().slots[j], Slot::Taken) {
                    Slot::Parsed(end) => end,
                    _ => None, // the helper stopped
                };
                end.is_some_and(|end| pieces.parsed(end, last))
            }
        };
        if !ok {
            return false;
        }
        if last {
            return true;
        }
    }
    true
}

/// [`State::claim_back`], the lock let go at once.
fn claim<'b>(shared: &Shared<'b>, at: usize) -> Option<(usize, &'b [u8])> {
    let mut state = shared.lock();
    state.claim_back(at)
}

struct HelperArgs<'s, 'b, R> {
    shared: &'s Shared<'b>,
    rest: &'b mut [PieceBuf],
    cutter: &'s mut Cutter<R>,
    next: &'s mut PieceBuf,
    piece_bytes: usize,
    claim_at: usize,
    keep: KeepArgs,
    text_ended: bool,
    senders: Vec<Sender<Batch<'b>>>,
    spent: Receiver<Batch<'b>>,
}

/// The helper's part of a round: inflate the round's pieces, parsing from
/// the back whenever ahead; then the next round's first piece (its `last`
/// flag, `None` when the text ended in this round); then parse from the
/// back while pieces are left.
fn help<R: std::io::Read>(a: HelperArgs<'_, '_, R>) -> std::io::Result<Option<bool>> {
    let HelperArgs {
        shared,
        rest,
        cutter,
        next,
        piece_bytes,
        claim_at,
        keep,
        mut text_ended,
        mut senders,
        spent,
    } = a;
    let mut parse = |j: usize, text| {
        let end = import::parse_piece(text, senders[j].clone(), &spent, keep);
        shared.update(|s| s.slots[j] = Slot::Parsed(end));
        // Closes the piece's channel, after its end is told.
        senders[j] = mpsc::channel().0;
        // Free here what the mapper sent back.
        while let Ok(batch) = spent.try_recv() {
            drop(batch);
        }
    };
    let mut inflated = 1;
    for (i, buf) in IntoIterator::into_iter(rest).enumerate() {
        if text_ended || shared.lock().abort {
            break;
        }
        let j = i + 1;
        let last = cutter.piece(buf, piece_bytes)?;
        let buf: &PieceBuf = buf;
        let text = buf.text();
        text_ended = last;
        inflated = j + 1;
        shared.update(|s| {
            s.slots[j] = Slot::Ready(text);
            if last {
                s.last = Some(j);
                s.count = Some(j + 1);
            }
        });
        // (The lock is let go before parsing.)
        while let Some((k, text)) = claim(shared, claim_at) {
            parse(k, text);
        }
    }
    shared.update(|s| {
        s.count.get_or_insert(inflated);
    });
    let next_last = if text_ended || shared.lock().abort {
        None
    } else {
        Some(cutter.piece(next, piece_bytes)?)
    };
    while let Some((k, text)) = claim(shared, 1) {
        parse(k, text);
    }
    Ok(next_last)
}
