//! What fsdp-ref prints: measured step time, throughput, MFU, bytes and bus
//! bandwidth per collective, and the analytic model beside the measurement.
//! Built from plain numbers so it is tested without a GPU.

use std::fmt::Write as _;

use serde::Serialize;

use crate::analytic::{self, Analytic, Regime};
use crate::config::{Mode, Plan};

/// Median of `v` (mean of the middle two for an even count); None when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    })
}

/// The timings one rank measured (see `gpu::trainer::RankResult`).
#[derive(Clone, Debug, Default)]
pub struct Measured {
    pub device_name: String,
    pub step_ms: Vec<f64>,
    pub loss: Vec<f32>,
    pub all_gather_fwd_ms: Vec<f64>,
    pub all_gather_bwd_ms: Vec<f64>,
    pub reduce_scatter_ms: Vec<f64>,
    pub forward_block_ms: Vec<f64>,
    pub backward_block_ms: Vec<f64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Collective {
    pub name: &'static str,
    /// Size of the full buffer (gathered output, or reduce-scatter input).
    pub bytes: usize,
    pub per_step: usize,
    pub median_ms: f64,
    /// nccl-tests bus bandwidth; absent for one rank.
    pub busbw_gbs: Option<f64>,
}

/// Per-layer times measured with CUDA events, classified like the model.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MeasuredLayer {
    pub t_fwd_compute_ms: f64,
    pub t_bwd_compute_ms: f64,
    pub t_all_gather_ms: f64,
    pub t_reduce_scatter_ms: f64,
    pub forward_regime: Regime,
    pub backward_regime: Regime,
    pub regime: Regime,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub tool: &'static str,
    pub mode: Mode,
    pub world: usize,
    pub device: String,
    pub layers: usize,
    pub dim: usize,
    pub tokens_local: usize,
    pub tokens_global: usize,
    pub prefetch: usize,
    pub steps: usize,
    pub warmup: usize,
    pub item_sync: bool,
    pub sync_every: usize,
    pub step_ms_median: f64,
    pub step_ms_min: f64,
    pub step_ms_max: f64,
    pub tokens_per_s: f64,
    pub tflops_per_gpu: f64,
    pub peak_tflops: f64,
    pub mfu: f64,
    pub loss_first: f32,
    pub loss_last: f32,
    pub collectives: Vec<Collective>,
    pub measured: MeasuredLayer,
    pub model: Analytic,
}

/// Combines the plan, one rank's measurements and the model's rates.
pub fn build(
    plan: &Plan,
    m: &Measured,
    model_tflops: f64,
    model_busbw_gbs: f64,
    peak_tflops: f64,
) -> Report {
    let med = |v: &[f64]| median(v).unwrap_or(0.0);
    let step = med(&m.step_ms);
    let min = m.step_ms.iter().copied().fold(f64::INFINITY, f64::min);
    let max = m.step_ms.iter().copied().fold(0.0f64, f64::max);
    let flops = analytic::step_flops(plan);
    let tflops = if step > 0.0 {
        flops / (step * 1e-3) / 1e12
    } else {
        0.0
    };
    let tokens_per_s = if step > 0.0 {
        plan.tokens_global as f64 / (step * 1e-3)
    } else {
        0.0
    };
    let (ag_bytes, rs_bytes) = (plan.shard.gather_bytes(), plan.shard.reduce_scatter_bytes());
    let coll = |name, bytes: usize, per_step, v: &[f64]| {
        let ms = med(v);
        Collective {
            name,
            bytes,
            per_step,
            median_ms: ms,
            busbw_gbs: analytic::bus_bandwidth_gbs(bytes as f64, plan.world, ms),
        }
    };
    let collectives = vec![
        coll(
            "all_gather_forward",
            ag_bytes,
            plan.layers,
            &m.all_gather_fwd_ms,
        ),
        coll(
            "all_gather_backward",
            ag_bytes,
            plan.layers,
            &m.all_gather_bwd_ms,
        ),
        coll(
            "reduce_scatter",
            rs_bytes,
            plan.layers,
            &m.reduce_scatter_ms,
        ),
    ];
    let fwd = med(&m.forward_block_ms);
    let bwd = med(&m.backward_block_ms);
    let ag = med(&[
        m.all_gather_fwd_ms.as_slice(),
        m.all_gather_bwd_ms.as_slice(),
    ]
    .concat());
    let rs = med(&m.reduce_scatter_ms);
    let measured = MeasuredLayer {
        t_fwd_compute_ms: fwd,
        t_bwd_compute_ms: bwd,
        t_all_gather_ms: ag,
        t_reduce_scatter_ms: rs,
        forward_regime: Regime::classify(ag, fwd),
        backward_regime: Regime::classify(ag + rs, bwd),
        regime: Regime::classify(2.0 * ag + rs, fwd + bwd),
    };
    Report {
        tool: "fsdp-ref",
        mode: plan.mode,
        world: plan.world,
        device: m.device_name.clone(),
        layers: plan.layers,
        dim: plan.dim,
        tokens_local: plan.tokens_local,
        tokens_global: plan.tokens_global,
        prefetch: plan.prefetch,
        steps: plan.steps,
        warmup: plan.warmup,
        item_sync: plan.item_sync,
        sync_every: plan.sync_every,
        step_ms_median: step,
        step_ms_min: if min.is_finite() { min } else { 0.0 },
        step_ms_max: max,
        tokens_per_s,
        tflops_per_gpu: tflops,
        peak_tflops,
        mfu: tflops / peak_tflops,
        loss_first: m.loss.first().copied().unwrap_or(f32::NAN),
        loss_last: m.loss.last().copied().unwrap_or(f32::NAN),
        collectives,
        measured,
        model: analytic::model(plan, model_tflops, model_busbw_gbs),
    }
}

fn bw(v: Option<f64>) -> String {
    v.map(|b| format!("{b:7.1} GB/s bus"))
        .unwrap_or_else(|| "   (1 rank: local copy)".into())
}

/// The human-readable report.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let mode = match r.mode {
        Mode::Overlap => format!("overlap (prefetch {})", r.prefetch),
        Mode::Serial => "serial (one stream)".into(),
    };
    let _ = writeln!(
        s,
        "fsdp-ref  {mode}  world {} x {}  layers {}  dim {}  tokens/rank {}",
        r.world, r.device, r.layers, r.dim, r.tokens_local
    );
    if r.item_sync || r.sync_every > 0 {
        let _ = writeln!(
            s,
            "planted syncs: item-sync {}  sync-every {}",
            r.item_sync, r.sync_every
        );
    }
    let _ = writeln!(
        s,
        "step         {:9.3} ms median (min {:.3}, max {:.3}) over {} steps after {} warmup",
        r.step_ms_median, r.step_ms_min, r.step_ms_max, r.steps, r.warmup
    );
    let _ = writeln!(
        s,
        "throughput   {:9.0} tokens/s   {:.1} TFLOP/s per GPU   MFU {:.1}% of {:.0} TFLOP/s bf16 dense",
        r.tokens_per_s,
        r.tflops_per_gpu,
        100.0 * r.mfu,
        r.peak_tflops
    );
    let _ = writeln!(
        s,
        "loss         {:.6} (first step) -> {:.6} (last step)",
        r.loss_first, r.loss_last
    );
    let _ = writeln!(s, "collectives  (per step; median time; bus bandwidth)");
    for c in &r.collectives {
        let _ = writeln!(
            s,
            "  {:<20} {:3} x {:>12} B  {:8.3} ms  {}",
            c.name,
            c.per_step,
            c.bytes,
            c.median_ms,
            bw(c.busbw_gbs)
        );
    }
    let m = &r.measured;
    let a = &r.model;
    let _ = writeln!(
        s,
        "per layer    {:>22}  {:>22}",
        "measured",
        format!("model @ {:.0} TF/s, {:.0} GB/s", a.tflops, a.busbw_gbs)
    );
    let row = |s: &mut String, name: &str, x: f64, y: f64| {
        let _ = writeln!(s, "  {name:<18} {x:12.3} ms {y:20.3} ms");
    };
    row(
        &mut s,
        "forward compute",
        m.t_fwd_compute_ms,
        a.t_fwd_compute_ms,
    );
    row(
        &mut s,
        "backward compute",
        m.t_bwd_compute_ms,
        a.t_bwd_compute_ms,
    );
    row(&mut s, "all_gather", m.t_all_gather_ms, a.t_all_gather_ms);
    row(
        &mut s,
        "reduce_scatter",
        m.t_reduce_scatter_ms,
        a.t_reduce_scatter_ms,
    );
    let reg = |s: &mut String, name: &str, x: Regime, y: Regime| {
        let _ = writeln!(s, "  {name:<18} {:>22}  {:>22}", x.label(), y.label());
    };
    reg(&mut s, "forward regime", m.forward_regime, a.forward_regime);
    reg(
        &mut s,
        "backward regime",
        m.backward_regime,
        a.backward_regime,
    );
    reg(&mut s, "layer regime", m.regime, a.regime);
    let _ = writeln!(
        s,
        "model step   serial {:.3} ms, overlapped {:.3} ms; overlap can hide at most {:.3} ms",
        a.predicted_serial_ms, a.predicted_overlap_ms, a.overlap_ceiling_ms
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{plan, Args};
    use clap::Parser;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    fn two_rank_plan() -> Plan {
        let args =
            Args::try_parse_from(["fsdp-ref", "--layers", "2", "--steps", "3"]).expect("parse");
        plan(&args, 2).expect("valid")
    }

    fn measured() -> Measured {
        Measured {
            device_name: "NVIDIA H200".into(),
            step_ms: vec![10.0, 12.0, 11.0],
            loss: vec![2.0, 1.5, 1.2, 1.0],
            all_gather_fwd_ms: vec![0.4; 6],
            all_gather_bwd_ms: vec![0.4; 6],
            reduce_scatter_ms: vec![0.8; 6],
            forward_block_ms: vec![1.0; 6],
            backward_block_ms: vec![2.0; 6],
        }
    }

    #[test]
    fn throughput_mfu_and_bandwidth_follow_from_the_times() {
        let p = two_rank_plan();
        let r = build(&p, &measured(), 600.0, 350.0, 989.0);
        assert_eq!(r.step_ms_median, 11.0);
        assert_eq!((r.step_ms_min, r.step_ms_max), (10.0, 12.0));
        assert!((r.tokens_per_s - 4096.0 / 0.011).abs() < 1e-6);
        let flops = 2.0 * 48.0 * 2048.0 * 4096.0 * 4096.0;
        assert!((r.tflops_per_gpu - flops / 0.011 / 1e12).abs() < 1e-9);
        assert!((r.mfu - r.tflops_per_gpu / 989.0).abs() < 1e-12);
        let ag = &r.collectives[0];
        assert_eq!(ag.bytes, 8 * 4096 * 4096 * 2);
        // Half of the buffer crosses the link for two ranks.
        let expect = ag.bytes as f64 * 0.5 / 0.4e-3 / 1e9;
        assert!((ag.busbw_gbs.expect("2 ranks") - expect).abs() < 1e-6);
        assert_eq!(r.loss_first, 2.0);
        assert_eq!(r.loss_last, 1.0);
        assert_eq!(r.measured.forward_regime, Regime::CommunicationHidden);
        assert_eq!(r.measured.backward_regime, Regime::CommunicationHidden);
    }

    #[test]
    fn slow_collectives_are_the_network_wall() {
        let p = two_rank_plan();
        let mut m = measured();
        m.all_gather_fwd_ms = vec![3.0; 6];
        m.all_gather_bwd_ms = vec![3.0; 6];
        let r = build(&p, &m, 600.0, 350.0, 989.0);
        assert_eq!(r.measured.forward_regime, Regime::NetworkWall);
        assert_eq!(r.measured.regime, Regime::NetworkWall);
    }

    #[test]
    fn json_is_one_line_and_text_names_the_regimes() {
        let r = build(&two_rank_plan(), &measured(), 600.0, 350.0, 989.0);
        let j = serde_json::to_string(&r).expect("serialises");
        assert!(!j.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&j).expect("parses back");
        assert_eq!(v["mode"], "overlap");
        assert_eq!(v["measured"]["forward_regime"], "communication_hidden");
        assert_eq!(v["collectives"][2]["name"], "reduce_scatter");
        let t = text(&r);
        assert!(t.contains("communication hidden"));
        assert!(t.contains("MFU"));
        assert!(t.contains("reduce_scatter"));
    }
}
