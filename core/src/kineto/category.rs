//! Kineto event categories and how they map to slice kinds.

use crate::model::{CopyKind, SliceKind};

/// What a `cat` says about where an event lives and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cat {
    Kernel,
    Memcpy,
    Memset,
    Runtime,
    Driver,
    Sync,
    CpuOp,
    PythonFunction,
    Annotation,
    GpuAnnotation,
    /// The profiler's own span ("PyTorch Profiler (0)"): the capture window.
    ProfilerSpan,
    Other,
}

impl Cat {
    /// Current Kineto names, plus the capitalised ones older Kineto wrote.
    pub fn of(cat: &str) -> Cat {
        match cat {
            "kernel" | "Kernel" => Cat::Kernel,
            "gpu_memcpy" | "Memcpy" => Cat::Memcpy,
            "gpu_memset" | "Memset" => Cat::Memset,
            "cuda_runtime" | "Runtime" => Cat::Runtime,
            "cuda_driver" | "Driver" => Cat::Driver,
            "cuda_sync" => Cat::Sync,
            "cpu_op" | "Operator" => Cat::CpuOp,
            "python_function" => Cat::PythonFunction,
            "user_annotation" => Cat::Annotation,
            "gpu_user_annotation" => Cat::GpuAnnotation,
            "Trace" => Cat::ProfilerSpan,
            _ => Cat::Other,
        }
    }

    /// GPU work that has a device and a stream in its args.
    pub fn is_gpu_activity(self) -> bool {
        matches!(self, Cat::Kernel | Cat::Memcpy | Cat::Memset)
    }

    /// Events recorded on a host thread (pid = process, tid = thread).
    pub fn is_host(self) -> bool {
        matches!(
            self,
            Cat::Runtime | Cat::Driver | Cat::CpuOp | Cat::PythonFunction | Cat::Annotation
        )
    }

    /// The slice kind; ProfilerStep#N is always a range, whatever its
    /// category (older traces record it as a cpu_op), so step detection
    /// needs to look at one kind only.
    pub fn slice_kind(self, name: &str) -> SliceKind {
        if name.starts_with("ProfilerStep#")
            && !self.is_gpu_activity()
            && self != Cat::GpuAnnotation
        {
            return SliceKind::Range;
        }
        match self {
            Cat::Kernel => SliceKind::Kernel,
            Cat::Memcpy => SliceKind::Memcpy,
            Cat::Memset => SliceKind::Memset,
            Cat::Runtime => SliceKind::Runtime,
            Cat::Driver => SliceKind::Driver,
            Cat::Sync => SliceKind::Sync,
            Cat::CpuOp | Cat::PythonFunction => SliceKind::CpuOp,
            Cat::Annotation => SliceKind::Range,
            Cat::GpuAnnotation => SliceKind::GpuRange,
            Cat::ProfilerSpan | Cat::Other => SliceKind::Other,
        }
    }
}

/// Direction of a copy from its Kineto name, e.g. "Memcpy DtoH (Device -> Pinned)",
/// and whether host memory was pageable.
pub fn copy_kind_of(name: &str) -> (CopyKind, bool) {
    let pageable = name.contains("Pageable");
    let token = name
        .strip_prefix("Memcpy ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("");
    (CopyKind::from_name(token), pageable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_names() {
        assert_eq!(
            copy_kind_of("Memcpy DtoH (Device -> Pinned)"),
            (CopyKind::DeviceToHost, false)
        );
        assert_eq!(
            copy_kind_of("Memcpy HtoD (Pageable -> Device)"),
            (CopyKind::HostToDevice, true)
        );
        assert_eq!(
            copy_kind_of("Memcpy DtoD (Device -> Device)"),
            (CopyKind::DeviceToDevice, false)
        );
        assert_eq!(
            copy_kind_of("Memcpy PtoP (Device -> Device)"),
            (CopyKind::PeerToPeer, false)
        );
        assert_eq!(copy_kind_of("Memset (Device)"), (CopyKind::Unknown, false));
    }

    #[test]
    fn step_markers_are_ranges() {
        assert_eq!(
            Cat::of("cpu_op").slice_kind("ProfilerStep#3"),
            SliceKind::Range
        );
        assert_eq!(
            Cat::of("user_annotation").slice_kind("ProfilerStep#3"),
            SliceKind::Range
        );
        assert_eq!(Cat::of("cpu_op").slice_kind("aten::mm"), SliceKind::CpuOp);
        assert_eq!(Cat::of("kernel").slice_kind("x"), SliceKind::Kernel);
        assert_eq!(
            Cat::of("cuda_sync").slice_kind("Stream Sync"),
            SliceKind::Sync
        );
    }
}
