use super::*;
use crate::analysis::report::{RankReport, Report};

#[test]
fn escapes_every_markup_character() {
    assert_eq!(
        esc("<a href=\"x\">it's & </a>"),
        "&lt;a href=&quot;x&quot;&gt;it&#39;s &amp; &lt;/a&gt;"
    );
    assert_eq!(esc("plain µs"), "plain µs");
}

#[test]
fn number_cells_carry_key_value_scale_and_decimals() {
    let c = ms_cell("ranks.0.exposed_comm_us", Some(12345.678));
    assert_eq!(
        c,
        "<td class=\"n\" data-key=\"ranks.0.exposed_comm_us\" data-value=\"12345.678\" \
         data-scale=\"0.001\" data-dp=\"2\">12.35</td>"
    );
    let none = num("headline.ranks.0.overlap_pct", Val::F(None), 1.0, 1);
    assert!(
        none.contains("data-value=\"null\"") && none.ends_with(">-</td>"),
        "{none}"
    );
    let n = num("collectives.0.bytes", Val::U(231928233984), 1.0, 0);
    assert!(n.contains("data-value=\"231928233984\"") && n.ends_with(">231928233984</td>"));
    assert_eq!(ms_dp(150.0), 1);
    assert_eq!(ms_dp(0.5), 3);
}

#[test]
fn tables_say_how_many_rows_they_left_out() {
    let rows = vec!["<td>1</td>".to_string(); 3];
    let t = table(&["a<b"], &rows, 3, 10);
    assert!(t.contains("<th>a&lt;b</th>"), "{t}");
    assert!(t.contains("3 of 10 rows shown"), "{t}");
    assert!(!table(&["a"], &rows, 3, 3).contains("rows shown"));
}

fn ranks(n: u32) -> Report {
    let mut r = Report::default();
    for k in 0..n {
        r.ranks.push(RankReport {
            rank: k,
            has_gpu_events: true,
            ..Default::default()
        });
        r.headline
            .ranks
            .push(crate::analysis::headline::RankHeadline {
                rank: k,
                has_gpu_events: true,
                median_step_ms: Some(30.0 + f64::from(k % 7)),
                idle_pct: Some(f64::from(k % 5)),
                exposed_comm_ms_per_step: f64::from(k % 3),
                ..Default::default()
            });
    }
    r
}

#[test]
fn few_ranks_are_all_detailed_many_are_picked() {
    let few = ranks(PER_RANK_MAX as u32);
    assert_eq!(picks(&few).len(), PER_RANK_MAX);
    let many = ranks(100);
    let p = picks(&many);
    assert!(p.len() <= 6 && !p.is_empty(), "{p:?}");
    // Slowest: the first rank with 36 ms (k % 7 == 6).
    let slowest = p.iter().find(|x| x.1.contains("slowest")).map(|x| x.0);
    assert_eq!(slowest.map(|k| k % 7), Some(6));
    let fastest = p.iter().find(|x| x.1.contains("fastest")).map(|x| x.0);
    assert_eq!(fastest.map(|k| k % 7), Some(0));
    let page = html(&many, "job");
    assert!(page.contains("Over all 100 ranks"), "no summary over ranks");
    assert!(page.contains("ranks at a glance"), "no overview heat map");
}
