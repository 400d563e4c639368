//! chrome-json (Trace Event Format) export.
