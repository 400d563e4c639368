//! Where a GPU event ran, as a rank's stream table and the report's stream
//! rows key it: no sentinel values, one variant per case.

use serde::{Deserialize, Serialize};

use crate::model::{DeviceId, Trace, TrackId, TrackKind};

/// Where a rank's GPU events ran: a CUDA stream of a device, a device's
/// own track (events with no stream), or a GPU track off any device. In
/// JSON, `device`, `stream` and (off any device) `track`, each null when
/// it does not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "StreamWire", try_from = "StreamWire")]
pub enum StreamKey {
    /// A CUDA stream of a device.
    Stream {
        /// The device.
        device: DeviceId,
        /// The CUDA stream id.
        stream: u32,
    },
    /// A device's group track.
    Device(DeviceId),
    /// A GPU track that belongs to no device.
    Track(TrackId),
}

impl Default for StreamKey {
    fn default() -> Self {
        StreamKey::Device(DeviceId::default())
    }
}

/// By device, then stream: a device's own track after its streams, tracks
/// off any device last.
impl Ord for StreamKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        let key = |k: &StreamKey| {
            let track = match k {
                StreamKey::Track(t) => Some(*t),
                _ => None,
            };
            (
                k.device().is_none(),
                k.device(),
                k.stream().is_none(),
                k.stream(),
                track,
            )
        };
        key(self).cmp(&key(o))
    }
}

impl PartialOrd for StreamKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl StreamKey {
    /// The key of a GPU track.
    pub fn of_track(t: &Trace, track: TrackId) -> StreamKey {
        match t.tracks()[track.index()].kind {
            TrackKind::Stream { device, stream } => StreamKey::Stream { device, stream },
            TrackKind::Gpu { device } => StreamKey::Device(device),
            _ => StreamKey::Track(track),
        }
    }

    /// The device, when on one.
    pub fn device(self) -> Option<DeviceId> {
        match self {
            StreamKey::Stream { device, .. } | StreamKey::Device(device) => Some(device),
            StreamKey::Track(_) => None,
        }
    }

    /// The CUDA stream id, when on a stream.
    pub fn stream(self) -> Option<u32> {
        match self {
            StreamKey::Stream { stream, .. } => Some(stream),
            _ => None,
        }
    }

    /// The stream column of a table: "7", "-" (a device's own track) or "track 12".
    pub fn stream_label(self) -> String {
        match self {
            StreamKey::Stream { stream, .. } => stream.to_string(),
            StreamKey::Device(_) => "-".to_string(),
            StreamKey::Track(t) => format!("track {}", t.get()),
        }
    }
}

/// [`StreamKey`] as its JSON fields.
#[derive(Serialize, Deserialize)]
struct StreamWire {
    device: Option<DeviceId>,
    stream: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    track: Option<TrackId>,
}

impl From<StreamKey> for StreamWire {
    fn from(k: StreamKey) -> Self {
        let track = match k {
            StreamKey::Track(t) => Some(t),
            _ => None,
        };
        StreamWire {
            device: k.device(),
            stream: k.stream(),
            track,
        }
    }
}

impl TryFrom<StreamWire> for StreamKey {
    type Error = String;
    fn try_from(w: StreamWire) -> Result<Self, String> {
        match (w.device, w.stream, w.track) {
            (Some(device), Some(stream), None) => Ok(StreamKey::Stream { device, stream }),
            (Some(device), None, None) => Ok(StreamKey::Device(device)),
            (None, None, Some(t)) => Ok(StreamKey::Track(t)),
            _ => Err("a stream row needs a device (and a stream), or a track alone".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_keys_read_back_as_written_and_half_keys_are_refused() {
        for (k, json) in [
            (
                StreamKey::Stream {
                    device: DeviceId::from_index(1),
                    stream: 7,
                },
                r#"{"device":1,"stream":7}"#,
            ),
            (
                StreamKey::Device(DeviceId::from_index(2)),
                r#"{"device":2,"stream":null}"#,
            ),
            (
                StreamKey::Track(TrackId::from_index(9)),
                r#"{"device":null,"stream":null,"track":9}"#,
            ),
        ] {
            assert_eq!(serde_json::to_string(&k).expect("json"), json);
            assert_eq!(serde_json::from_str::<StreamKey>(json).expect("read"), k);
        }
        for bad in [
            r#"{"device":null,"stream":7}"#,
            r#"{"device":1,"stream":7,"track":3}"#,
            r#"{"device":null,"stream":null}"#,
        ] {
            assert!(serde_json::from_str::<StreamKey>(bad).is_err(), "{bad}");
        }
        let mut v = [
            StreamKey::Track(TrackId::from_index(0)),
            StreamKey::Device(DeviceId::from_index(0)),
            StreamKey::Stream {
                device: DeviceId::from_index(1),
                stream: 3,
            },
            StreamKey::Stream {
                device: DeviceId::from_index(0),
                stream: 9,
            },
        ];
        v.sort();
        assert_eq!(
            v,
            [
                StreamKey::Stream {
                    device: DeviceId::from_index(0),
                    stream: 9
                },
                StreamKey::Device(DeviceId::from_index(0)),
                StreamKey::Stream {
                    device: DeviceId::from_index(1),
                    stream: 3
                },
                StreamKey::Track(TrackId::from_index(0)),
            ]
        );
    }
}
