//! NCCL kernel names and record_param_comms arguments: which collective,
//! algorithm, protocol, reduction and data type, and the nccl-tests bus
//! bandwidth factor.
//!
//! Kernel names seen in the wild:
//! `ncclDevKernel_AllGather_RING_LL(...)`,
//! `ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(...)` (NCCL >= 2.19),
//! `ncclKernel_AllReduce_RING_LL_Sum_float(...)` (older),
//! `ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(...)`, `ncclDevKernel_SendRecv(...)`.

use serde::Serialize;

/// What a NCCL kernel does, as far as its name and arguments say.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct NcclInfo {
    /// Canonical: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, SendRecv, Send, Recv, AllToAll.
    pub collective: String,
    /// Algorithm token of the name (RING, TREE, ...); "" when absent.
    pub algorithm: String,
    /// Protocol token of the name (LL, LL128, SIMPLE); "" when absent.
    pub protocol: String,
    /// Reduction op token (Sum, ...); "" when absent.
    pub reduce_op: String,
    /// Data type tokens of the name, joined by "_"; "" when absent.
    pub dtype: String,
}

const COLLECTIVES: [&str; 9] = [
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "Broadcast",
    "Reduce",
    "SendRecv",
    "Send",
    "Recv",
    "AllToAll",
];
const ALGORITHMS: [&str; 8] = [
    "RING",
    "TREE",
    "NVLS",
    "NVLSTREE",
    "COLLNET",
    "COLLNETDIRECT",
    "COLLNETCHAIN",
    "PAT",
];
const PROTOCOLS: [&str; 3] = ["LL", "LL128", "SIMPLE"];
const OPS: [&str; 7] = [
    "Sum",
    "Prod",
    "Min",
    "Max",
    "PreMulSum",
    "SumPostDiv",
    "Avg",
];

/// Parses a NCCL kernel name; `None` when it is not one.
pub fn parse_kernel_name(name: &str) -> Option<NcclInfo> {
    let rest = ["ncclDevKernel_", "ncclKernel_"]
        .iter()
        .find_map(|p| name.find(p).map(|i| &name[i + p.len()..]))?;
    let rest = rest.split('(').next().unwrap_or(rest).trim();
    let mut info = NcclInfo::default();
    let mut dtype: Vec<&str> = Vec::new();
    for (k, tok) in rest.split('_').enumerate() {
        if k == 0 {
            info.collective = canonical_collective(tok).unwrap_or(tok).to_string();
        } else if ALGORITHMS.contains(&tok) && info.algorithm.is_empty() {
            info.algorithm = tok.to_string();
        } else if PROTOCOLS.contains(&tok) && info.protocol.is_empty() {
            info.protocol = tok.to_string();
        } else if OPS.contains(&tok) && info.reduce_op.is_empty() {
            info.reduce_op = tok.to_string();
        } else if !tok.is_empty() {
            dtype.push(tok);
        }
    }
    info.dtype = dtype.join("_");
    Some(info)
}

/// Maps the many spellings of a collective ("allreduce", "all_reduce",
/// "nccl:all_reduce", "_allgather_base", "reduce_scatter_tensor") to the kernel-name form.
pub fn canonical_collective(s: &str) -> Option<&'static str> {
    let lower: String = s
        .rsplit(':')
        .next()
        .unwrap_or(s)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let l = lower.as_str();
    let found = if l.contains("allreduce") {
        "AllReduce"
    } else if l.contains("allgather") {
        "AllGather"
    } else if l.contains("reducescatter") {
        "ReduceScatter"
    } else if l.contains("alltoall") {
        "AllToAll"
    } else if l.contains("broadcast") {
        "Broadcast"
    } else if l.contains("sendrecv") {
        "SendRecv"
    } else if l == "send" || l == "isend" {
        "Send"
    } else if l == "recv" || l == "irecv" {
        "Recv"
    } else if l.starts_with("reduce") {
        "Reduce"
    } else {
        return COLLECTIVES
            .iter()
            .copied()
            .find(|c| c.eq_ignore_ascii_case(s));
    };
    Some(found)
}

/// Bytes per element of a dtype as PyTorch (record_param_comms) or NCCL names it.
pub fn dtype_bytes(dtype: &str) -> Option<u64> {
    let d = dtype.trim().to_ascii_lowercase();
    let d = d.trim_start_matches("c10::").trim_start_matches("torch.");
    Some(match d {
        "double" | "float64" | "f64" | "long" | "int64" | "i64" | "u64" | "uint64" | "int64_t"
        | "uint64_t" => 8,
        "float" | "float32" | "f32" | "int" | "int32" | "i32" | "u32" | "uint32" | "int32_t"
        | "uint32_t" => 4,
        "half" | "float16" | "f16" | "bfloat16" | "bf16" | "short" | "int16" | "__nv_bfloat16"
        | "__half" => 2,
        "byte" | "char" | "int8" | "uint8" | "i8" | "u8" | "int8_t" | "uint8_t" | "bool"
        | "float8_e4m3fn" | "float8_e5m2" | "f8e4m3" | "f8e5m2" => 1,
        _ => return None,
    })
}

/// One spelling per data type ("Float", "float", "f32" -> "f32"), so that
/// kernel names and record_param_comms arguments group together.
pub fn canonical_dtype(dtype: &str) -> String {
    let d = dtype.trim().to_ascii_lowercase();
    let d = d.trim_start_matches("c10::").trim_start_matches("torch.");
    let c = match d {
        "double" | "float64" | "f64" => "f64",
        "float" | "float32" | "f32" => "f32",
        "half" | "float16" | "f16" | "__half" => "f16",
        "bfloat16" | "bf16" | "__nv_bfloat16" => "bf16",
        "long" | "int64" | "i64" | "int64_t" => "i64",
        "int" | "int32" | "i32" | "int32_t" => "i32",
        "uint64" | "u64" | "uint64_t" => "u64",
        "uint32" | "u32" | "uint32_t" => "u32",
        "char" | "int8" | "i8" | "int8_t" => "i8",
        "byte" | "uint8" | "u8" | "uint8_t" => "u8",
        "bool" => "bool",
        _ => return dtype.trim().to_string(),
    };
    c.to_string()
}

/// nccl-tests bus bandwidth factor for a collective over `n` ranks.
pub fn bus_factor(collective: &str, n: u32) -> Option<f64> {
    if n == 0 {
        return None;
    }
    let nf = n as f64;
    Some(match collective {
        "AllReduce" => 2.0 * (nf - 1.0) / nf,
        "AllGather" | "ReduceScatter" | "AllToAll" => (nf - 1.0) / nf,
        _ => 1.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: &str) -> NcclInfo {
        parse_kernel_name(n).unwrap_or_default()
    }

    #[test]
    fn new_style_names() {
        let i = p("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
        assert_eq!(
            (
                i.collective.as_str(),
                i.algorithm.as_str(),
                i.protocol.as_str()
            ),
            ("AllGather", "RING", "LL")
        );
        assert_eq!(i.dtype, "");
        let i = p("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(x)");
        assert_eq!(i.collective, "ReduceScatter");
        assert_eq!((i.reduce_op.as_str(), i.dtype.as_str()), ("Sum", "f32"));
        assert_eq!((i.algorithm.as_str(), i.protocol.as_str()), ("RING", "LL"));
        let i = p("ncclDevKernel_AllReduce_Sum_bf16_NVLS_SIMPLE(x)");
        assert_eq!(
            (i.algorithm.as_str(), i.protocol.as_str(), i.dtype.as_str()),
            ("NVLS", "SIMPLE", "bf16")
        );
    }

    #[test]
    fn old_style_names() {
        let i = p("void ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)");
        assert_eq!(i.collective, "AllReduce");
        assert_eq!((i.algorithm.as_str(), i.protocol.as_str()), ("RING", "LL"));
        assert_eq!((i.reduce_op.as_str(), i.dtype.as_str()), ("Sum", "float"));
        let i = p(
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        );
        assert_eq!(i.collective, "SendRecv");
        assert_eq!(
            (i.protocol.as_str(), i.dtype.as_str()),
            ("SIMPLE", "int8_t")
        );
        assert_eq!(parse_kernel_name("ampere_sgemm_128x64_nn"), None);
    }

    #[test]
    fn spellings_and_factors() {
        assert_eq!(canonical_collective("nccl:all_reduce"), Some("AllReduce"));
        assert_eq!(canonical_collective("_allgather_base"), Some("AllGather"));
        assert_eq!(
            canonical_collective("reduce_scatter_tensor"),
            Some("ReduceScatter")
        );
        assert_eq!(canonical_collective("broadcast"), Some("Broadcast"));
        assert_eq!(canonical_collective("reduce"), Some("Reduce"));
        assert_eq!(dtype_bytes("BFloat16"), Some(2));
        assert_eq!(canonical_dtype("BFloat16"), "bf16");
        assert_eq!(canonical_dtype("int8_t"), "i8");
        assert_eq!(canonical_dtype("Float"), canonical_dtype("float"));
        assert_eq!(canonical_dtype("fp8_e4m3"), "fp8_e4m3");
        assert_eq!(dtype_bytes("Float"), Some(4));
        assert_eq!(bus_factor("AllReduce", 8), Some(1.75));
        assert_eq!(bus_factor("AllGather", 4), Some(0.75));
        assert_eq!(bus_factor("Broadcast", 4), Some(1.0));
    }
}
