//! The cutter: inflated text in pieces, each cut after an event (see
//! split.rs's module doc), its padding and unread top-level values cut
//! once a piece grows far past its size.

use super::super::squeeze::Blanks;
use super::super::top_level::TopLevel;
use super::{find_cut, PIECE_END, PIECE_START, SQUEEZE_FROM};

/// Inflated text in pieces, each cut after an event (see the module doc).
pub(super) struct Cutter<R> {
    decoder: R,
    /// The text after the last cut.
    carry: Vec<u8>,
    first: bool,
}

impl<R: std::io::Read> Cutter<R> {
    pub(super) fn new(decoder: R) -> Cutter<R> {
        Cutter {
            decoder,
            carry: Vec::new(),
            first: true,
        }
    }

    /// Fills `buf` with the next piece, of about `len` bytes of text;
    /// `true` when it is the last (the text ended).
    pub(super) fn piece(&mut self, buf: &mut PieceBuf, len: usize) -> std::io::Result<bool> {
        buf.len = 0;
        if !self.first {
            buf.push(PIECE_START);
        }
        self.first = false;
        let body = buf.len;
        let start = if body == 0 {
            TopLevel::document()
        } else {
            TopLevel::in_events()
        };
        buf.push(&self.carry);
        self.carry.clear();
        let mut want = len;
        // Once the piece is far past its size: its whitespace runs cut
        // (from `body`, outside any string: a piece starts at an event or
        // the document), up to `.1`.
        let mut blanks: Option<(TopLevel, Blanks, usize)> = None;
        loop {
            let end = (body + want).max(buf.len + 1);
            buf.grow_to(end + PIECE_END.len());
            while buf.len < end {
                match self.decoder.read(&mut buf.bytes[buf.len..end]) {
                    Ok(0) => {
                        // The text ended: what came since the last cut of
                        // padding is filtered too.
                        if let Some((top, state, from)) = blanks.as_mut() {
                            let came = buf.len - *from;
                            let came_top = top.filter(&mut buf.bytes[*from..], came);
                            if let Some(key) = top.oversized() {
                                return Err(super::super::squeeze::oversized(key));
                            }
                            buf.len = *from + state.filter(&mut buf.bytes[*from..], came_top);
                        }
                        return Ok(true);
                    }
                    Ok(n) => buf.len += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if let Some(cut) = find_cut(&buf.bytes[body..buf.len]) {
                let cut = body + cut;
                self.carry.extend_from_slice(&buf.bytes[cut + 1..buf.len]);
                buf.len = cut;
                buf.push(PIECE_END);
                return Ok(false);
            }
            // No cut yet (one long event, padding, or not events at all):
            // read on, doubling; past SQUEEZE_FROM pieces, padding is cut
            // as it comes and, where it was most of what came, the piece
            // grows by one piece at a time.
            if buf.len - body < SQUEEZE_FROM.saturating_mul(len) {
                want = want.saturating_mul(2);
                continue;
            }
            // From here the piece's top-level values the import does not
            // read are cut to their shell too (TopLevel, from the piece's
            // start: the document's, or an event's in `traceEvents`).
            let (top, state, from) =
                blanks.get_or_insert_with(|| (start.clone(), Blanks::default(), body));
            let came = buf.len - *from;
            let came_top = top.filter(&mut buf.bytes[*from..], came);
            if let Some(key) = top.oversized() {
                return Err(super::super::squeeze::oversized(key));
            }
            let kept = state.filter(&mut buf.bytes[*from..], came_top);
            buf.len = *from + kept;
            *from = buf.len;
            want = if kept < came / 2 {
                buf.len - body + len
            } else {
                want.saturating_mul(2)
            };
        }
    }
}

/// A piece's text, `bytes[..len]`. The bytes after it stay initialized, so
/// that refilling the buffer for the next round writes no zeros first.
#[derive(Debug, Default)]
pub(super) struct PieceBuf {
    pub(super) bytes: Vec<u8>,
    pub(super) len: usize,
}

impl PieceBuf {
    pub(super) fn text(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Makes room for `n` bytes (zeroing only bytes never used before).
    pub(super) fn grow_to(&mut self, n: usize) {
        if self.bytes.len() < n {
            self.bytes.resize(n, 0);
        }
    }

    pub(super) fn push(&mut self, s: &[u8]) {
        let end = self.len + s.len();
        self.grow_to(end);
        self.bytes[self.len..end].copy_from_slice(s);
        self.len = end;
    }

    pub(super) fn into_text(mut self) -> Vec<u8> {
        self.bytes.truncate(self.len);
        self.bytes
    }
}
