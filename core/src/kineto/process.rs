//! Process description from the top level of a Kineto trace: rank and world
//! size, and metadata pairs (source file, schema, distributed setup).

use serde_json::value::RawValue;
use serde_json::Value;

use super::document::TopInfo;
use crate::model::Process;

/// Fills rank, world size and metadata of `p` from the top-level sections.
pub fn describe_process(p: &mut Process, info: &TopInfo, label: &str) {
    p.metadata.push(("source_file".into(), label.to_string()));
    p.metadata.push(("format".into(), "kineto".into()));
    for (key, raw) in [
        ("schemaVersion", info.schema_version.as_deref()),
        ("traceName", info.trace_name.as_deref()),
        ("baseTimeNanoseconds", info.base_time_ns.as_deref()),
    ] {
        if let Some(v) = raw_text(raw) {
            p.metadata.push((key.into(), v));
        }
    }
    let dist = info
        .distributed_info
        .as_deref()
        .and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
    if let Some(d) = dist.as_ref().filter(|d| d.is_object()) {
        let num = |k: &str| {
            d.get(k)
                .and_then(Value::as_u64)
                .and_then(|x| u32::try_from(x).ok())
        };
        p.rank = num("rank");
        p.world_size = num("world_size");
        for key in ["backend", "nccl_version", "pg_count"] {
            if let Some(v) = d.get(key).filter(|v| !v.is_null()) {
                let text = v
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string());
                p.metadata.push((format!("distributed.{key}"), text));
            }
        }
        if let Some(s) = d.get("pg_config").and_then(pg_config_summary) {
            p.metadata.push(("distributed.pg_config".into(), s));
        }
    }
}

fn raw_text(r: Option<&RawValue>) -> Option<String> {
    let r = r?;
    match serde_json::from_str::<Value>(r.get()) {
        Ok(Value::String(s)) => Some(s),
        Ok(Value::Null) | Err(_) => None,
        Ok(v) => Some(v.to_string()),
    }
}
fn pg_config_summary(v: &Value) -> Option<String> {
    let list = v.as_array()?;
    const SHOWN: usize = 16;
    let mut parts: Vec<String> = list
        .iter()
        .take(SHOWN)
        .map(|pg| {
            let s = |k: &str| {
                pg.get(k).map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                })
            };
            let mut text = s("pg_name").unwrap_or_default();
            if let Some(d) = s("pg_desc") {
                text.push_str(&format!(" ({d})"));
            }
            let mut fields = Vec::new();
            if let Some(b) = s("backend_config") {
                fields.push(b);
            }
            if let Some(n) = s("pg_size") {
                fields.push(format!("size {n}"));
            }
            if let Some(r) = s("ranks") {
                fields.push(format!("ranks {r}"));
            }
            if !fields.is_empty() {
                text.push_str(": ");
                text.push_str(&fields.join(", "));
            }
            text
        })
        .collect();
    if list.len() > SHOWN {
        parts.push(format!("and {} more", list.len() - SHOWN));
    }
    Some(parts.join("; "))
}
