//! collector
