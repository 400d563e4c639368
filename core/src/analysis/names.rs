//! Tests on slice names, decided once per distinct name.
//!
//! Names are interned: a trace of a million slices has a few thousand
//! distinct names, so a test on the text (a substring search) is run once
//! for each name and remembered, not once for each slice.

use crate::model::{StrId, Trace};

/// `test` of a slice name's text, remembered by name id.
pub(crate) struct NameTest<'t, F> {
    t: &'t Trace,
    test: F,
    /// The answer for each name id asked about so far.
    seen: Vec<Option<bool>>,
}

/// The names HTA takes for steps: those containing "ProfilerStep".
pub(crate) fn profiler_step(t: &Trace) -> NameTest<'_, impl Fn(&str) -> bool> {
    NameTest::new(t, |n: &str| n.contains("ProfilerStep"))
}

impl<'t, F: Fn(&str) -> bool> NameTest<'t, F> {
    pub(crate) fn new(t: &'t Trace, test: F) -> Self {
        NameTest {
            t,
            test,
            seen: vec![None; t.strings().len()],
        }
    }

    /// Whether the name `id` passes the test.
    #[inline]
    pub(crate) fn of(&mut self, id: StrId) -> bool {
        let (t, test) = (self.t, &self.test);
        match self.seen.get_mut(id.index()) {
            Some(seen) => *seen.get_or_insert_with(|| test(t.str(id))),
            None => test(t.str(id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TraceBuilder;

    #[test]
    fn answers_as_the_test_does_and_asks_once_per_name() {
        let mut b = TraceBuilder::new();
        let ids: Vec<StrId> = ["ProfilerStep#3", "aten::mm", "ProfilerStep#4", "aten::mm"]
            .iter()
            .map(|s| b.intern(s))
            .collect();
        let t = b.finish();
        let asked = std::cell::Cell::new(0);
        let mut step = NameTest::new(&t, |n: &str| {
            asked.set(asked.get() + 1);
            n.contains("ProfilerStep")
        });
        let got: Vec<bool> = ids.iter().chain(&ids).map(|&id| step.of(id)).collect();
        assert_eq!(got, [true, false, true, false, true, false, true, false]);
        assert_eq!(asked.get(), 3, "three distinct names");
    }
}
