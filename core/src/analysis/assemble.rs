//! Ranks analyzed on their own, gathered in rank order and finished once
//! their collectives are matched across ranks: the one path from per-rank
//! results to a [`Report`], for [`analyze`](super::analyze) and for many
//! rank files ([`streamed`](super::streamed)).

use std::ops::Range;

use super::rank::NONE;
use super::xrank::summary::StepWait;
use super::xrank::{self, Matching, RankComms};
use super::{AnalysisOptions, RankLocal, RankPart, Report};
use crate::diagnostic::{Diagnostic, Kind};

/// Where one rank's rows sit in the gathered report.
struct Pending {
    analyzed: bool,
    /// Index of its entry in `report.ranks`.
    row: usize,
    /// Its rows in `report.steps`.
    steps: Range<usize>,
    local: RankLocal,
}

/// Rows of every rank so far, in rank-context order.
#[derive(Default)]
pub(crate) struct Assembly {
    /// The gathered rows (`diagnostics` of the ranks are apart, below).
    report: Report,
    rank_diagnostics: Vec<Diagnostic>,
    pending: Vec<Pending>,
    /// The ranks' collective records, in the same order.
    pub comms: Vec<RankComms>,
}

impl Assembly {
    /// Adds the next rank context's part (in a merge, its indices already
    /// moved by its file's offsets: [`super::relocate`]).
    pub fn push(&mut self, part: RankPart) {
        let r = &mut self.report;
        let p = part.report;
        self.pending.push(Pending {
            analyzed: part.analyzed,
            row: r.ranks.len(),
            steps: r.steps.len()..r.steps.len() + p.steps.len(),
            local: part.local,
        });
        r.ranks.extend(p.ranks);
        r.steps.extend(p.steps);
        r.collectives.extend(p.collectives);
        r.collectives_per_step.extend(p.collectives_per_step);
        r.occupancy.extend(p.occupancy);
        r.sync_warnings.extend(p.sync_warnings);
        self.rank_diagnostics.extend(p.diagnostics);
        self.comms.push(part.comms);
    }

    /// Finishes the ranks with `matching` (made from [`Self::comms`]) into
    /// the report. `head` holds the trace-wide fields: diagnostics of the
    /// load (then the ranks' own follow), other processes, dropped records.
    pub fn finish(self, mut head: Report, matching: &Matching, opts: &AnalysisOptions) -> Report {
        let Assembly {
            report: mut rows,
            rank_diagnostics,
            pending,
            comms,
        } = self;
        let us = |ns: i64| ns as f64 / 1000.0;
        // An instance is in the window when every rank's kernel of it is in its rank's window.
        let mut marks = vec![0usize; matching.instances.len()];
        let mut waits = Vec::new();
        // Each rank's figures from the matching, on all cores.
        type Finished = (
            Option<(i64, i64)>,
            Vec<u32>,
            Vec<Option<i64>>,
            Vec<StepWait>,
        );
        let finished: Vec<Option<Finished>> =
            super::par_map((0..pending.len()).collect(), &|c: usize| {
                let p = &pending[c];
                if !p.analyzed {
                    return None;
                }
                let rank = rows.ranks.get(p.row)?.rank;
                let recs = comms.get(c).map_or(&[][..], |r| &r.recs[..]);
                let split = xrank::summary::exposed_split(
                    matching,
                    c,
                    recs,
                    &p.local.extra,
                    &p.local.exposed,
                );
                let of = matching.of_rec.get(c);
                let in_window: Vec<u32> = recs
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.head)
                    .filter_map(|(k, _)| of.and_then(|v| v.get(k)).copied())
                    .filter(|&i| i != NONE)
                    .collect();
                let (own, w) = xrank::summary::step_waits(matching, c, rank, recs, &p.local.steps);
                Some((split, in_window, own, w))
            });
        for (p, f) in pending.iter().zip(finished) {
            let Some((split, in_window, own, mut w)) = f else {
                continue;
            };
            if let Some(row) = rows.ranks.get_mut(p.row) {
                row.exposed_wait_us = split.map(|s| us(s.0));
                row.exposed_transfer_us = split.map(|s| us(s.1));
            }
            for i in in_window {
                if let Some(m) = marks.get_mut(i as usize) {
                    *m += 1;
                }
            }
            for (row, own) in rows.steps[p.steps.clone()].iter_mut().zip(own) {
                row.comm_wait_us = own.map(us);
            }
            waits.append(&mut w);
        }
        drop(comms);
        head.diagnostics.extend(rank_diagnostics);
        head.ranks = rows.ranks;
        head.steps = rows.steps;
        head.collectives = rows.collectives;
        head.collectives_per_step = rows.collectives_per_step;
        head.occupancy = rows.occupancy;
        head.sync_warnings = rows.sync_warnings;
        let mut report = head;
        let in_window: Vec<bool> = matching
            .instances
            .iter()
            .zip(&marks)
            .map(|(inst, &m)| m == inst.parts.len() || (opts.rank.is_some() && m > 0))
            .collect();
        let label = if report
            .ranks
            .windows(2)
            .all(|w| w[0].window.label == w[1].window.label)
        {
            report
                .ranks
                .first()
                .map_or(String::new(), |r| r.window.label.clone())
        } else {
            "each rank's headline window".to_string()
        };
        report.cross_rank = xrank::summary::cross_rank(matching, &in_window, &label);
        let stragglers = xrank::summary::stragglers(&waits);
        for row in &mut report.steps {
            if let Some(&(rank, ns)) = stragglers.get(&row.step) {
                row.straggler_rank = Some(rank);
                row.straggler_wait_us = Some(ns as f64 / 1000.0);
            }
        }
        report.diagnostics.extend(
            matching.notes.iter().map(|n| {
                Diagnostic::new(Kind::UnmatchedCollectives, 1, format!("cross-rank: {n}"))
            }),
        );
        report.sync_warnings.sort_by(|a, b| {
            b.gpu_idle_us
                .total_cmp(&a.gpu_idle_us)
                .then(a.rank.cmp(&b.rank))
        });
        super::headline::fill(&mut report);
        report
    }
}
