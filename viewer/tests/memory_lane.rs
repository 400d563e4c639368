//! A GPU's allocated-memory lane marks its peak, and hovering the peak
//! lists the blocks live then (issue 36), on HTA's df_index_resolver trace
//! (torch.profiler with profile_memory=True).

use streamscope_viewer::model::Model;
use streamscope_viewer::timeline::{index::is_allocated_lane, peak_blocks_text};

#[test]
fn the_allocated_lane_marks_the_report_peak_and_lists_its_blocks() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../core/tests/data/hta/df_index_resolver/df_index_resolver.json.gz");
    let t = streamscope_core::load::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let m = Model::new(t);
    let lane = m
        .trace
        .track_ids()
        .find(|&k| is_allocated_lane(m.trace.track_name(k)))
        .expect("an allocated-memory lane");
    let mem = m.report.ranks[0].memory.as_ref().expect("memory");
    assert_eq!(m.index.counter_peak[lane.index()], Some(mem.peak_at_ns));
    // Other counters carry no peak mark.
    for k in m.trace.track_ids() {
        if !is_allocated_lane(m.trace.track_name(k)) {
            assert_eq!(m.index.counter_peak.get(k.index()).copied().flatten(), None);
        }
    }
    let text = peak_blocks_text(&m, lane);
    assert!(text.contains("peak 6322.4 MiB allocated"), "{text}");
    assert_eq!(text.matches("\n  ").count(), 11, "{text}"); // 10 blocks + the rest
    assert!(text.contains("aten::mm"), "{text}");
}
