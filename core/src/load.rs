//! Opening a TRACE argument: a .pftrace, a Kineto .json/.json.gz, or a directory of them.
