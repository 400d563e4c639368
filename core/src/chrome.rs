//! chrome-json (Trace Event Format) export, for tools that read it
//! (chrome://tracing, older Perfetto UI loaders, speedscope, HTA-style
//! scripts).
//!
//! Each process keeps its pid; every track becomes a "thread" of that pid
//! (host threads keep their tid, other tracks get a synthetic tid above
//! 2^31 named after the track). Slices are complete ("X") events with µs
//! timestamps at ns precision, counters are "C" events, and launch→kernel
//! flows are "s"/"f" pairs keyed by the flow id.

use std::io::{self, Write};

use crate::model::*;

fn synthetic_tid(track: usize) -> u64 {
    (1u64 << 31) + track as u64
}

fn tid_of(t: &Trace, track: TrackId) -> u64 {
    match t.track(track).kind {
        TrackKind::Thread { tid } => tid as u64,
        _ => synthetic_tid(track.0 as usize),
    }
}

fn us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Writes `trace` as Trace Event Format JSON.
pub fn write_chrome_json<W: Write>(trace: &Trace, out: W) -> io::Result<W> {
    let mut w = io::BufWriter::with_capacity(1 << 20, out);
    writeln!(w, "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
    let mut first = true;
    let mut sep = |w: &mut io::BufWriter<W>| -> io::Result<()> {
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        Ok(())
    };
    for p in &trace.processes {
        sep(&mut w)?;
        let name = if p.name.is_empty() {
            p.label()
        } else {
            p.name.clone()
        };
        write!(
            w,
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":{}}}}}",
            p.pid,
            json_str(&name)
        )?;
        if let Some(r) = p.rank {
            sep(&mut w)?;
            write!(w, "{{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":{},\"args\":{{\"labels\":\"rank {r}\"}}}}", p.pid)?;
        }
    }
    for (i, tr) in trace.tracks.iter().enumerate() {
        let pid = trace
            .processes
            .get(tr.process as usize)
            .map(|p| p.pid)
            .unwrap_or(0);
        let tid = tid_of(trace, TrackId(i as u32));
        let mut name = trace.str(tr.name).to_string();
        if let Some(parent) = tr.parent {
            name = format!("{} / {name}", trace.track_name(parent));
        }
        sep(&mut w)?;
        write!(w, "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}}", json_str(&name))?;
        sep(&mut w)?;
        write!(w, "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{i}}}}}")?;
    }
    let sl = &trace.slices;
    for i in 0..sl.len() {
        let tr = trace.track(sl.track[i]);
        let pid = trace
            .processes
            .get(tr.process as usize)
            .map(|p| p.pid)
            .unwrap_or(0);
        let tid = tid_of(trace, sl.track[i]);
        sep(&mut w)?;
        write!(
            w,
            "{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":{},\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{{\"class\":\"{}\"",
            sl.kind[i].name(),
            json_str(trace.str(sl.name[i])),
            us(sl.start_ns[i]),
            us(sl.dur_ns[i]),
            sl.class[i].name()
        )?;
        if sl.correlation[i] != 0 {
            write!(w, ",\"correlation\":{}", sl.correlation[i])?;
        }
        if let TrackKind::Stream { device, stream } = tr.kind {
            let ord = trace
                .devices
                .get(device as usize)
                .map(|d| d.ordinal)
                .unwrap_or(device);
            write!(w, ",\"device\":{ord},\"stream\":{stream}")?;
        }
        if let Some(lc) = trace.launch_of(i) {
            write!(
                w,
                ",\"grid\":[{},{},{}],\"block\":[{},{},{}],\"registers per thread\":{},\"static shared memory\":{},\"dynamic shared memory\":{}",
                lc.grid[0], lc.grid[1], lc.grid[2], lc.block[0], lc.block[1], lc.block[2],
                lc.registers_per_thread, lc.static_smem_bytes, lc.dynamic_smem_bytes
            )?;
        }
        if let Some(c) = trace.copy_of(i) {
            write!(
                w,
                ",\"bytes\":{},\"copy kind\":\"{}\",\"pageable\":{}",
                c.bytes,
                c.kind.name(),
                c.pageable
            )?;
        }
        for (k, v) in trace.args_of(i) {
            let v = match v {
                ArgValue::Int(x) => x.to_string(),
                ArgValue::UInt(x) => x.to_string(),
                ArgValue::Double(x) if x.is_finite() => x.to_string(),
                ArgValue::Double(x) => json_str(&x.to_string()),
                ArgValue::Bool(x) => x.to_string(),
                ArgValue::Str(s) => json_str(trace.str(*s)),
            };
            write!(w, ",{}:{v}", json_str(trace.str(*k)))?;
        }
        w.write_all(b"}}")?;
    }
    for f in &trace.flows {
        for (ph, s, extra) in [("s", f.from, ""), ("f", f.to, ",\"bp\":\"e\"")] {
            let s = s.0 as usize;
            let tr = trace.track(sl.track[s]);
            let pid = trace
                .processes
                .get(tr.process as usize)
                .map(|p| p.pid)
                .unwrap_or(0);
            sep(&mut w)?;
            write!(
                w,
                "{{\"ph\":\"{ph}\",\"cat\":\"flow\",\"name\":\"launch\",\"id\":{},\"pid\":{pid},\"tid\":{},\"ts\":{}{extra}}}",
                f.id,
                tid_of(trace, sl.track[s]),
                us(sl.start_ns[s])
            )?;
        }
    }
    for i in 0..trace.counters.len() {
        let c = &trace.counters;
        let tr = trace.track(c.track[i]);
        let pid = trace
            .processes
            .get(tr.process as usize)
            .map(|p| p.pid)
            .unwrap_or(0);
        let v = if c.value[i].is_finite() {
            c.value[i]
        } else {
            0.0
        };
        sep(&mut w)?;
        write!(
            w,
            "{{\"ph\":\"C\",\"name\":{},\"pid\":{pid},\"ts\":{},\"args\":{{\"value\":{v}}}}}",
            json_str(trace.str(tr.name)),
            us(c.ts_ns[i])
        )?;
    }
    writeln!(w, "\n]}}")?;
    w.into_inner().map_err(|e| e.into_error())
}

/// Writes `trace` as Trace Event Format JSON to `path`.
pub fn write_file(trace: &Trace, path: &std::path::Path) -> crate::Result<()> {
    let err = |source| crate::TraceError::Write {
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::File::create(path).map_err(err)?;
    write_chrome_json(trace, f).map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{fsdp_like, SynthOptions};

    #[test]
    fn export_is_valid_json_with_every_slice() {
        let t = fsdp_like(&SynthOptions {
            target_slices: 2_000,
            ..Default::default()
        });
        let bytes = write_chrome_json(&t, Vec::new()).expect("write");
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
        let events = v["traceEvents"].as_array().expect("traceEvents");
        let x = events.iter().filter(|e| e["ph"] == "X").count();
        assert_eq!(x, t.slices.len());
        let flows = events.iter().filter(|e| e["ph"] == "s").count();
        assert_eq!(flows, t.flows.len());
        // ns precision survives: ts is µs with 3 decimals.
        let first = events.iter().find(|e| e["ph"] == "X").expect("a slice");
        let ts = first["ts"].as_f64().expect("ts");
        assert!((ts * 1000.0 - t.slices.start_ns[0] as f64).abs() < 1.0);
    }

    #[test]
    fn microseconds_keep_nanoseconds() {
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(5), "0.005");
        assert_eq!(us(-1_500), "-1.500");
    }
}
