//! The argument keys the analyses read.

/// Every argument key an analysis reads from a slice's arguments (the
/// Python line of a sync, collective metadata, what the NCCL plugin
/// writes). An import made only for analysis
/// ([`crate::kineto::KeepArgs::Analysis`], as `report` loads Kineto
/// traces) keeps these and skips every other argument unread, so an
/// analysis that comes to read another key must add it here (the
/// differential tests in `core/tests/kineto_lean.rs` compare both imports'
/// reports).
pub const ARG_KEYS: &[&str] = &[
    "python",
    crate::comms::keys::COLLECTIVE,
    crate::comms::keys::IN_NELEMS,
    crate::comms::keys::OUT_NELEMS,
    crate::comms::keys::DTYPE,
    crate::comms::keys::GROUP_SIZE,
    crate::comms::keys::PG_NAME,
    crate::comms::keys::PG_RANKS,
    crate::comms::keys::SEQ,
    crate::comms::plugin::KERNEL_CORRELATION,
    crate::comms::plugin::FUNC,
    crate::comms::plugin::COUNT,
    crate::comms::plugin::DTYPE,
    crate::comms::plugin::NRANKS,
    crate::comms::plugin::COMM,
    crate::comms::plugin::SEQ,
];
