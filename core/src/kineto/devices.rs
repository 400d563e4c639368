//! `deviceProperties` → [`Device`].

use std::collections::HashMap;

use serde_json::Value;

use crate::model::{Device, ProcessId};

/// Properties of one GPU as Kineto lists them, keyed by CUDA ordinal.
pub fn parse_device_properties(v: &Value) -> HashMap<u32, Device> {
    let mut out = HashMap::new();
    let Some(list) = v.as_array() else { return out };
    for d in list {
        let Some(id) = d
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
        else {
            continue;
        };
        let u32_of = |k: &str| {
            d.get(k)
                .and_then(Value::as_u64)
                .and_then(|x| u32::try_from(x).ok())
                .unwrap_or(0)
        };
        let u64_of = |k: &str| d.get(k).and_then(Value::as_u64).unwrap_or(0);
        let major = u32_of("computeMajor");
        let minor = u32_of("computeMinor");
        let listed_blocks = ["maxBlocksPerMultiprocessor", "maxBlocksPerMultiProcessor"]
            .iter()
            .map(|k| u32_of(k))
            .find(|&b| b > 0);
        out.insert(
            id,
            Device {
                process: ProcessId::from_index(0),
                ordinal: id,
                name: d
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string(),
                compute_major: major,
                compute_minor: minor,
                sm_count: u32_of("numSms"),
                warp_size: u32_of("warpSize"),
                max_threads_per_block: u32_of("maxThreadsPerBlock"),
                max_threads_per_sm: u32_of("maxThreadsPerMultiprocessor"),
                max_blocks_per_sm: listed_blocks.unwrap_or_else(|| max_blocks_per_sm(major, minor)),
                regs_per_sm: u32_of("regsPerMultiprocessor"),
                regs_per_block: u32_of("regsPerBlock"),
                smem_per_sm_bytes: u64_of("sharedMemPerMultiprocessor"),
                smem_per_block_bytes: u64_of("sharedMemPerBlock"),
                global_mem_bytes: u64_of("totalGlobalMem"),
            },
        );
    }
    out
}

/// A device the GPU events use but `deviceProperties` does not describe.
pub fn unknown_device(ordinal: u32) -> Device {
    Device {
        ordinal,
        name: "unknown".to_string(),
        ..Default::default()
    }
}

/// Maximum resident blocks per SM by compute capability, for traces whose
/// `deviceProperties` lack it (Kineto does not record it). Source: CUDA C++
/// Programming Guide, "Technical Specifications per Compute Capability",
/// row "Maximum number of resident blocks per SM". 0 when unknown.
pub fn max_blocks_per_sm(major: u32, minor: u32) -> u32 {
    match (major, minor) {
        (3, _) => 16,
        (5, _) | (6, _) => 32,
        (7, 5) => 16,
        (7, _) => 32,
        (8, 0) => 32,
        (8, 9) => 24,
        (8, _) => 16,
        (9, _) | (10, _) | (11, _) | (12, _) => 32,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_properties_and_derives_block_limit() {
        let v: Value = serde_json::from_str(
            r#"[{"id": 1, "name": "NVIDIA A100", "computeMajor": 8, "computeMinor": 0, "numSms": 108,
                 "warpSize": 32, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
                 "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "sharedMemPerBlock": 49152,
                 "sharedMemPerMultiprocessor": 167936, "totalGlobalMem": 42297524224},
                {"id": 2, "name": "T4", "computeMajor": 7, "computeMinor": 5, "maxBlocksPerMultiprocessor": 20},
                {"name": "no id"}]"#,
        )
        .expect("valid test JSON");
        let m = parse_device_properties(&v);
        assert_eq!(m.len(), 2);
        let a = &m[&1];
        assert_eq!((a.ordinal, a.sm_count, a.max_blocks_per_sm), (1, 108, 32));
        assert_eq!(a.smem_per_sm_bytes, 167936);
        assert_eq!(a.global_mem_bytes, 42297524224);
        assert_eq!(
            m[&2].max_blocks_per_sm, 20,
            "listed value wins over the table"
        );
        assert_eq!(max_blocks_per_sm(7, 5), 16);
        assert_eq!(max_blocks_per_sm(8, 6), 16);
        assert_eq!(max_blocks_per_sm(8, 9), 24);
        assert_eq!(max_blocks_per_sm(9, 0), 32);
        assert_eq!(max_blocks_per_sm(1, 0), 0);
    }
}
