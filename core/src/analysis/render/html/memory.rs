//! The "GPU memory" section: per rank the allocator's peak, when, what was
//! reserved then, and the largest blocks live at the peak with the op and
//! Python line that allocated them. Absent when no rank has allocator
//! samples (torch.profiler's `profile_memory=True`).

use super::{esc, num, section, table, td, td_nowrap, Ctx, Val, MAX_ROWS};

/// Bytes shown in MiB.
const MIB: f64 = 1.0 / 1_048_576.0;

/// A cell of a byte count the JSON holds, shown in MiB (1 decimal).
fn mib(key: &str, bytes: Option<u64>) -> String {
    num(key, Val::F(bytes.map(|b| b as f64)), MIB, 1)
}

pub(super) fn memory(ctx: &Ctx) -> String {
    let r = ctx.r;
    let mut peaks = Vec::new();
    let mut blocks = Vec::new();
    let mut total_blocks = 0;
    for &(k, _) in &ctx.picks {
        let Some(m) = r.ranks.get(k).and_then(|rk| rk.memory.as_ref()) else {
            continue;
        };
        let p = format!("ranks.{k}.memory");
        peaks.push(format!(
            "{}{}{}{}{}{}{}{}",
            td_nowrap(&ctx.label(k)),
            num(&format!("{p}.gpu"), Val::U(u64::from(m.gpu)), 1.0, 0),
            mib(
                &format!("{p}.peak_allocated_bytes"),
                Some(m.peak_allocated_bytes)
            ),
            td(&m.peak_step.map_or("-".to_string(), |s| s.to_string())),
            mib(
                &format!("{p}.reserved_at_peak_bytes"),
                m.reserved_at_peak_bytes
            ),
            mib(
                &format!("{p}.unused_reserved_at_peak_bytes"),
                m.unused_reserved_at_peak_bytes
            ),
            mib(&format!("{p}.peak_reserved_bytes"), m.peak_reserved_bytes),
            num(&format!("{p}.samples"), Val::U(m.samples), 1.0, 0),
        ));
        total_blocks += m.live_at_peak.len();
        for (j, b) in m.live_at_peak.iter().enumerate() {
            if blocks.len() >= MAX_ROWS {
                break;
            }
            let q = format!("{p}.live_at_peak.{j}");
            let before_ms = (m.peak_at_ns.saturating_sub(b.allocated_at_ns)) as f64 / 1e6;
            blocks.push(format!(
                "{}{}{}<td class=\"n\">{before_ms:.1}</td>{}<td class=\"w\">{}</td>",
                td_nowrap(&ctx.label(k)),
                mib(&format!("{q}.bytes"), Some(b.bytes)),
                td(&format!("{:#x}", b.address)),
                td(if b.op.is_empty() { "-" } else { &b.op }),
                esc(b.python.as_deref().unwrap_or("-")),
            ));
        }
        if m.live_at_peak_other_blocks > 0 && blocks.len() < MAX_ROWS {
            blocks.push(format!(
                "{}{}<td>{} other blocks</td><td class=\"n\">-</td><td>-</td><td class=\"w\">-</td>",
                td_nowrap(&ctx.label(k)),
                mib(
                    &format!("{p}.live_at_peak_other_bytes"),
                    Some(m.live_at_peak_other_bytes)
                ),
                m.live_at_peak_other_blocks,
            ));
        }
    }
    if peaks.is_empty() {
        return String::new();
    }
    let n = peaks.len();
    let mut s = table(
        &[
            "rank",
            "GPU",
            "peak allocated MiB",
            "in step",
            "reserved then MiB",
            "reserved unused MiB",
            "peak reserved MiB",
            "samples",
        ],
        &peaks,
        n,
        n,
    );
    if !blocks.is_empty() {
        s.push_str("<h3>Largest blocks live at the peak</h3>\n");
        let n = blocks.len();
        s.push_str(&table(
            &[
                "rank",
                "MiB",
                "address",
                "allocated ms before",
                "op",
                "python",
            ],
            &blocks,
            n,
            n.max(total_blocks),
        ));
    }
    section("memory", "GPU memory (allocator)", &s)
}
