//! How each CUDA stream was created, as the collector writes it into the
//! process metadata (from CUPTI's stream records) and the analyses read it.
//! The legacy default stream (the NULL stream) waits for all earlier work
//! on the blocking streams of its context, and they wait for its work: a
//! tiny kernel there serializes streams that would otherwise overlap.

/// How a stream was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamCreation {
    /// The legacy default stream (NULL stream, `cudaStreamLegacy`).
    Legacy,
    /// `cudaStreamCreate` / `cudaStreamDefault`: it synchronizes with the
    /// legacy default stream.
    Blocking,
    /// `cudaStreamNonBlocking`: it does not.
    NonBlocking,
}

impl StreamCreation {
    /// The word the metadata uses.
    pub fn name(self) -> &'static str {
        match self {
            StreamCreation::Legacy => "legacy",
            StreamCreation::Blocking => "blocking",
            StreamCreation::NonBlocking => "non-blocking",
        }
    }

    /// The inverse of [`StreamCreation::name`].
    pub fn parse(word: &str) -> Option<StreamCreation> {
        [
            StreamCreation::Legacy,
            StreamCreation::Blocking,
            StreamCreation::NonBlocking,
        ]
        .into_iter()
        .find(|c| c.name() == word)
    }

    /// Whether work on streams created as `a` and `b` (two different
    /// streams of one context) is ordered by the legacy default stream's
    /// implicit synchronization.
    pub fn serializes(a: StreamCreation, b: StreamCreation) -> bool {
        use StreamCreation::*;
        matches!((a, b), (Legacy, Blocking) | (Blocking, Legacy))
    }
}

/// Process metadata key for device ordinal `ordinal`: its streams, as
/// [`format()`] writes them.
pub fn key(ordinal: u32) -> String {
    format!("cuda_streams.device{ordinal}")
}

/// `ID:KIND` pairs separated by spaces, in the order given
/// ("7:legacy 13:blocking 14:non-blocking").
pub fn format(streams: &[(u32, StreamCreation)]) -> String {
    streams
        .iter()
        .map(|(id, c)| format!("{id}:{}", c.name()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The pairs of a value [`format()`] wrote; malformed pairs are skipped.
pub fn parse(value: &str) -> Vec<(u32, StreamCreation)> {
    value
        .split_whitespace()
        .filter_map(|pair| {
            let (id, kind) = pair.split_once(':')?;
            Some((id.parse().ok()?, StreamCreation::parse(kind)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_parse_are_inverse_and_skip_junk() {
        let v = vec![
            (7, StreamCreation::Legacy),
            (13, StreamCreation::Blocking),
            (14, StreamCreation::NonBlocking),
        ];
        let s = format(&v);
        assert_eq!(s, "7:legacy 13:blocking 14:non-blocking");
        assert_eq!(parse(&s), v);
        assert_eq!(
            parse("x:legacy 9:odd 3 12:blocking"),
            vec![(12, StreamCreation::Blocking)]
        );
        assert_eq!(key(1), "cuda_streams.device1");
        assert!(StreamCreation::serializes(
            StreamCreation::Blocking,
            StreamCreation::Legacy
        ));
        assert!(!StreamCreation::serializes(
            StreamCreation::NonBlocking,
            StreamCreation::Legacy
        ));
        assert!(!StreamCreation::serializes(
            StreamCreation::Blocking,
            StreamCreation::Blocking
        ));
    }
}
