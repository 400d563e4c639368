//! Kineto (torch.profiler) Chrome JSON import.
//!
//! One file is one rank: host events (pid = process) become thread tracks,
//! GPU events (pid = device ordinal, tid = stream) become stream tracks under
//! a GPU track, and launch → kernel flows are rebuilt from CUDA correlation
//! ids. See `design/FORMATS.md` for the fields read.
//!
//! Mapped: complete events ("X") of every category (unknown ones become
//! `Other` slices on their thread or stream), "\[memory\]" instants as
//! allocator counters, "C" counters, process/thread names. The profiler's
//! own span becomes the capture window. Not mapped: flow events (ac2g is
//! what correlation ids already say; fwdbwd links are not modelled) and
//! other instants.

mod category;
mod devices;
mod document;
mod event;
mod import;
mod json;
mod order;
mod process;
mod split;
pub(crate) mod squeeze;
mod time;
mod top_level;

pub(crate) use time::us_text_to_ns;

/// JSON text read with its long whitespace runs cut ([`squeeze::Squeeze`]);
/// for a Kineto document (`kineto`) also the top-level values the import
/// does not read, cut to their shell.
pub(crate) fn squeeze<R: Read>(r: R, kineto: bool) -> impl Read {
    if kineto {
        squeeze::Squeeze::kineto(r)
    } else {
        squeeze::Squeeze::new(r)
    }
}

use std::io::Read;
use std::path::Path;

use crate::error::{Result, TraceError};
use crate::model::Trace;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Which free-form arguments (`args`) of complete events an import keeps
/// in the model's argument sets.
///
/// Kineto gives most events arguments no analysis reads (a CPU op's
/// `External id`, `Ev Idx`, `Sequence number`, input shapes; a kernel's
/// `queued`, occupancy estimates). The viewer shows them; `report` never
/// does, and reading them is a large part of an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeepArgs {
    /// Every argument (the viewer, `export`, `info`).
    #[default]
    All,
    /// Only the keys an analysis reads ([`crate::arg_keys::ARG_KEYS`]),
    /// besides those the import itself reads into columns (device,
    /// stream, correlation, launch configuration, bytes); the others of a
    /// complete event are left out of its argument set, and skipped
    /// unread when its `ph` comes before its `args` (as Kineto writes
    /// them). Counters, metadata and memory events keep every argument.
    /// Every analysis gives the same result as on [`KeepArgs::All`].
    /// Unlike it, a number beyond the range of f64 inside an array or
    /// object that is skipped is no error.
    Analysis,
}

impl KeepArgs {
    /// Whether a complete event's argument `key` goes into its argument
    /// set (the keys the import reads into columns are never stored).
    #[inline]
    pub(crate) fn stores(self, key: &str) -> bool {
        match self {
            KeepArgs::All => true,
            KeepArgs::Analysis => keys::analysis().holds(key),
        }
    }

    /// Whether the reader must read a complete event's argument `key`
    /// (the import reads it, or the argument set keeps it).
    #[inline]
    pub(crate) fn reads(self, key: &str) -> bool {
        match self {
            KeepArgs::All => true,
            KeepArgs::Analysis => keys::read().holds(key),
        }
    }
}

/// Sets of argument keys, for [`KeepArgs`]'s tests of membership on every
/// argument of every event: most keys tested are in neither set, and are
/// told apart by their length and first and last bytes, with no string
/// comparison.
mod keys {
    use std::sync::OnceLock;

    /// Slots of a set (a power of two, well above the keys held).
    const SLOTS: usize = 128;

    /// An open-addressing table of keys.
    pub(super) struct KeySet {
        slots: [Option<&'static str>; SLOTS],
    }

    #[inline]
    fn slot_of(key: &[u8]) -> usize {
        let (first, last) = match key {
            [] => (0, 0),
            [f, .., l] => (*f, *l),
            [f] => (*f, *f),
        };
        (key.len() * 31 + usize::from(first) * 7 + usize::from(last)) % SLOTS
    }

    impl KeySet {
        fn of(lists: &[&[&'static str]]) -> KeySet {
            let mut slots = [None; SLOTS];
            let n: usize = lists.iter().map(|l| l.len()).sum();
            // A free slot ends every search.
            assert!(n < SLOTS, "{n} argument keys for {SLOTS} slots");
            for &k in lists.iter().flat_map(|l| l.iter()) {
                let mut i = slot_of(k.as_bytes());
                while let Some(there) = slots[i] {
                    if there == k {
                        break;
                    }
                    i = (i + 1) % SLOTS;
                }
                slots[i] = Some(k);
            }
            KeySet { slots }
        }

        #[inline]
        pub(super) fn holds(&self, key: &str) -> bool {
            let b = key.as_bytes();
            let mut i = slot_of(b);
            while let Some(k) = self.slots[i] {
                let kb = k.as_bytes();
                if kb.len() == b.len()
                    && kb.first() == b.first()
                    && kb.last() == b.last()
                    && k == key
                {
                    return true;
                }
                i = (i + 1) % SLOTS;
            }
            false
        }
    }

    /// The keys some analysis reads ([`crate::arg_keys::ARG_KEYS`]).
    pub(super) fn analysis() -> &'static KeySet {
        static T: OnceLock<KeySet> = OnceLock::new();
        T.get_or_init(|| KeySet::of(&[crate::arg_keys::ARG_KEYS]))
    }

    /// Those and the keys the import reads from a complete event into the
    /// model's columns.
    pub(super) fn read() -> &'static KeySet {
        static T: OnceLock<KeySet> = OnceLock::new();
        T.get_or_init(|| {
            use super::import::{COPY_CONSUMED, KERNEL_CONSUMED, OTHER_CONSUMED};
            KeySet::of(&[
                crate::arg_keys::ARG_KEYS,
                KERNEL_CONSUMED,
                COPY_CONSUMED,
                OTHER_CONSUMED,
            ])
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn sets_hold_their_keys_and_no_other() {
            let all: Vec<&str> = crate::arg_keys::ARG_KEYS
                .iter()
                .chain(crate::kineto::import::KERNEL_CONSUMED)
                .chain(crate::kineto::import::COPY_CONSUMED)
                .copied()
                .collect();
            for k in &all {
                assert!(read().holds(k), "{k}");
                assert_eq!(
                    analysis().holds(k),
                    crate::arg_keys::ARG_KEYS.contains(k),
                    "{k}"
                );
            }
            // Near misses: same length and ends, a prefix, a case change, empty.
            for k in [
                "Sez",
                "Seq ",
                "Se",
                "sEq",
                "",
                "s",
                "device_",
                "devicE",
                "External id",
                "pythoN",
            ] {
                assert!(!read().holds(k), "{k:?}");
            }
            // Every slot filled but one still answers.
            let many: Vec<&'static str> = (0..SLOTS - 1)
                .map(|i| &*Box::leak(format!("key{i}").into_boxed_str()))
                .collect();
            let full = KeySet::of(&[&many]);
            assert!(many.iter().all(|k| full.holds(k)));
            assert!(!full.holds("key-1") && !full.holds("nokey"));
        }
    }
}

/// Reads a Kineto trace (`.json`, or gzip-compressed, detected by its magic
/// bytes rather than its name) of one rank into a trace with one process.
pub fn read_file(path: &Path) -> Result<Trace> {
    let bytes = std::fs::read(path).map_err(|e| TraceError::io(path, e))?;
    read_bytes(path, &bytes)
}

/// Like [`read_file`] on a plain (not gzip) file of `len` bytes whose
/// first bytes, `head`, are already read from `rest`: a large one is read
/// piece by piece, never held whole (`path` is read again, whole, in the
/// rare case that its pieces do not read as events).
pub(crate) fn read_plain_file(
    path: &Path,
    head: Vec<u8>,
    rest: impl Read + Send,
    len: usize,
    keep: KeepArgs,
) -> Result<Trace> {
    if head.is_empty() || crate::chrome::is_ours(&head) {
        return read_rest(path, head, rest, keep);
    }
    split::import_plain_file(path, head, rest, len, keep)
}

/// [`read_bytes_keeping`] of `head` and what is left of `rest`.
fn read_rest(path: &Path, head: Vec<u8>, mut rest: impl Read, keep: KeepArgs) -> Result<Trace> {
    let mut bytes = head;
    rest.read_to_end(&mut bytes)
        .map_err(|e| TraceError::io(path, e))?;
    read_bytes_keeping(path, &bytes, keep)
}

/// A regular gzip file of Kineto JSON, `len` bytes: `head` (its first
/// bytes, already read) then `rest`. Inflated as it is read, so the first
/// pieces are parsed while the rest of the file is still being read; a
/// file streamscope exported (chrome-json) or anything that does not read
/// this way is read again, whole, as [`read_bytes_keeping`] reads it.
pub(crate) fn read_gzip_file(
    path: &Path,
    head: Vec<u8>,
    rest: impl Read + Send,
    len: usize,
    keep: KeepArgs,
) -> Result<Trace> {
    if gzip_holds_ours(&head) {
        return read_rest(path, head, rest, keep);
    }
    split::import_gzip_file(path, head, rest, len, keep)
}

/// Like [`read_file`] on bytes already read; `path` only names the source in
/// errors and metadata.
pub fn read_bytes(path: &Path, bytes: &[u8]) -> Result<Trace> {
    read_bytes_keeping(path, bytes, KeepArgs::All)
}

/// Whether the gzip stream starting `gz` inflates to chrome-json that
/// streamscope exported (judged by its first 64 inflated bytes).
fn gzip_holds_ours(gz: &[u8]) -> bool {
    let mut head = Vec::new();
    let _ = flate2::read::MultiGzDecoder::new(gz)
        .take(64)
        .read_to_end(&mut head);
    crate::chrome::is_ours(&head)
}

/// [`read_bytes`], keeping the arguments `keep` says (a chrome-json file
/// written by streamscope keeps all).
pub fn read_bytes_keeping(path: &Path, bytes: &[u8], keep: KeepArgs) -> Result<Trace> {
    if bytes.is_empty() {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
        });
    }
    if bytes.starts_with(&GZIP_MAGIC) {
        if gzip_holds_ours(bytes) {
            let mut text = Vec::new();
            squeeze::Squeeze::new(flate2::bufread::MultiGzDecoder::new(bytes))
                .read_to_end(&mut text)
                .map_err(|e| TraceError::io(path, e))?;
            return crate::chrome::read_json(path, &text);
        }
        split::import_gzip(path, bytes, keep)
    } else if crate::chrome::is_ours(bytes) {
        // chrome-json exported by streamscope: read back exactly.
        crate::chrome::read_json(path, bytes)
    } else {
        import::import_keeping(path, bytes, keep)
    }
}

/// Cheap sniff for the loader: a JSON object (possibly gzip-compressed)
/// whose first few MiB name `traceEvents`.
pub fn looks_like_kineto(bytes: &[u8]) -> bool {
    const PREFIX_BYTES: u64 = 4 << 20;
    let mut prefix = Vec::new();
    let head: &[u8] = if bytes.starts_with(&GZIP_MAGIC) {
        // A read error (truncation) still leaves the prefix decoded so far.
        let _ = flate2::read::MultiGzDecoder::new(bytes)
            .take(PREFIX_BYTES)
            .read_to_end(&mut prefix);
        &prefix
    } else {
        &bytes[..bytes.len().min(PREFIX_BYTES as usize)]
    };
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let starts_object = head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    starts_object && head.windows(13).any(|w| w == b"\"traceEvents\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniff() {
        assert!(looks_like_kineto(
            br#" {"schemaVersion": 1, "traceEvents": []}"#
        ));
        assert!(!looks_like_kineto(br#"[{"ph": "X"}]"#));
        assert!(!looks_like_kineto(br#"{"other": 1}"#));
        assert!(!looks_like_kineto(b"\x0a\x0b\x08\x01"));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, br#"{"traceEvents": []}"#).expect("in-memory write");
        let gz = gz.finish().expect("in-memory gzip");
        assert!(looks_like_kineto(&gz));
    }
}
