//! Property test: random zoom / pan / range-select / click / key sequences
//! over traces placed anywhere in i64 (epoch-based Kineto µs, 0-based
//! collector time, negative after alignment, next to i64::MIN and MAX), with
//! spans from 1 µs to days, never panic and leave a finite, positive view.
//! Includes the case that crashed the viewer before its first frame: a
//! trace whose start lies about -1e9 ns from its origin-relative window
//! (the tiled 21 s Kineto trace, here generated).

use egui::{Event, Key, Modifiers, MouseWheelSource, MouseWheelUnit, PointerButton, Pos2, Vec2};
use egui_kittest::Harness;
use streamscope_core::synth::XorShift;
use streamscope_core::TraceBuilder;
use streamscope_core::{Device, NewSlice, Process, SliceClass, SliceKind, Trace, TrackKind};
use streamscope_viewer::ViewerApp;

/// One rank: a host thread with ProfilerStep ranges and launch calls, a
/// compute and a communication stream, `n` kernels spread over `span_ns`
/// from `base_ns`.
fn trace_at(base_ns: i64, span_ns: i64, n: usize) -> Trace {
    let mut t = TraceBuilder::new();
    let p = t.add_process(Process {
        pid: 1,
        name: "python".into(),
        rank: Some(0),
        world_size: Some(1),
        ..Default::default()
    });
    let d = t.add_device(Device {
        process: p,
        ordinal: 0,
        name: "NVIDIA H200".into(),
        sm_count: 132,
        ..Default::default()
    });
    let host = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "main");
    let gpu = t.add_track(p, None, TrackKind::Gpu { device: d }, "GPU");
    let comp = t.add_track(
        p,
        Some(gpu),
        TrackKind::Stream {
            device: d,
            stream: 7,
        },
        "s7",
    );
    let comm = t.add_track(
        p,
        Some(gpu),
        TrackKind::Stream {
            device: d,
            stream: 20,
        },
        "s20",
    );
    let k = t.intern("gemm");
    let ag = t.intern("ncclDevKernel_AllGather_RING_LL");
    let launch = t.intern("cudaLaunchKernel");
    let n = n.max(1);
    let each = (span_ns / n as i64).max(1);
    // Ten ProfilerSteps, so the viewer opens zoomed onto the headline steps.
    let step_ns = (span_ns / 10).max(1);
    for k in 0..10 {
        let name = t.intern(&format!("ProfilerStep#{k}"));
        let at = base_ns.saturating_add(k * step_ns);
        t.push_slice(NewSlice::new(host, SliceKind::Range, name, at, step_ns));
    }
    for i in 0..n as i64 {
        let at = base_ns.saturating_add(i * each);
        let dur = (each * 2 / 3).max(1);
        let mut call = NewSlice::new(host, SliceKind::Runtime, launch, at, (dur / 10).max(1));
        call.correlation = i as u32 + 1;
        t.push_slice(call);
        let mut s = NewSlice::new(
            if i % 3 == 0 { comm } else { comp },
            SliceKind::Kernel,
            if i % 3 == 0 { ag } else { k },
            at,
            dur,
        );
        s.class = if i % 3 == 0 {
            SliceClass::Communication
        } else {
            SliceClass::Compute
        };
        s.correlation = i as u32 + 1;
        t.push_slice(s);
    }
    t.finish()
}

fn wheel(delta: Vec2, modifiers: Modifiers) -> Event {
    Event::MouseWheel {
        unit: MouseWheelUnit::Point,
        delta,
        phase: egui::TouchPhase::Move,
        source: MouseWheelSource::Unknown,
        modifiers,
    }
}

fn assert_sane(h: &Harness<'_, ViewerApp>, what: &str) {
    let app = h.state();
    let st = &app.timeline;
    assert!(
        st.view_dur_ns.is_finite() && st.view_dur_ns > 0.0 && st.view_start_rel_ns.is_finite(),
        "{what}: view {} + {}",
        st.view_start_rel_ns,
        st.view_dur_ns
    );
    if let Some(m) = &app.model {
        let (a, b) = st.window_ns(&m.index);
        assert!(a <= b, "{what}: window {a}..{b}");
    }
}

fn drive(trace: Trace, seed: u64, actions: usize, what: &str) {
    let mut h = Harness::builder()
        .with_size([1200.0, 700.0])
        .build_ui_state(
            |ui, app: &mut ViewerApp| app.ui_root(ui),
            ViewerApp::from_trace(trace),
        );
    h.run_steps(2);
    assert_sane(&h, what);
    let mut rng = XorShift(seed | 1);
    // The lanes lie right of the 230-px label column and below the ruler.
    let lane_pos = |rng: &mut XorShift| {
        Pos2::new(
            240.0 + rng.unit_f32() * 950.0,
            60.0 + rng.unit_f32() * 600.0,
        )
    };
    for i in 0..actions {
        let pos = lane_pos(&mut rng);
        h.event(Event::PointerMoved(pos));
        match rng.below(9) {
            0 => {
                // Wheel zoom, from a nudge to a huge spin either way.
                let mag =
                    10f32.powf(rng.unit_f32() * 5.0) * if rng.below(2) == 0 { 1.0 } else { -1.0 };
                h.event(wheel(Vec2::new(0.0, mag), Modifiers::NONE));
            }
            1 => h.event(wheel(
                Vec2::new(rng.unit_f32() * 4000.0 - 2000.0, 0.0),
                Modifiers::NONE,
            )),
            2 => h.event(Event::Zoom(10f32.powf(rng.unit_f32() * 6.0 - 3.0))),
            3 => {
                let keys = [
                    Key::W,
                    Key::S,
                    Key::A,
                    Key::D,
                    Key::F,
                    Key::ArrowUp,
                    Key::ArrowDown,
                    Key::Escape,
                ];
                for _ in 0..1 + rng.below(6) {
                    h.key_press(keys[rng.below(keys.len())]);
                }
            }
            4 | 5 => {
                // Drag: pan (primary), range (secondary or shift).
                let (button, mods) = match rng.below(3) {
                    0 => (PointerButton::Primary, Modifiers::NONE),
                    1 => (PointerButton::Secondary, Modifiers::NONE),
                    _ => (PointerButton::Primary, Modifiers::SHIFT),
                };
                h.event(Event::PointerButton {
                    pos,
                    button,
                    pressed: true,
                    modifiers: mods,
                });
                h.step();
                let to = lane_pos(&mut rng);
                h.event(Event::PointerMoved(Pos2::new((pos.x + to.x) / 2.0, to.y)));
                h.step();
                h.event(Event::PointerMoved(to));
                h.step();
                h.event(Event::PointerButton {
                    pos: to,
                    button,
                    pressed: false,
                    modifiers: mods,
                });
            }
            6 => {
                // Click: select a slice or zoom into a fold.
                h.event(Event::PointerButton {
                    pos,
                    button: PointerButton::Primary,
                    pressed: true,
                    modifiers: Modifiers::NONE,
                });
                h.step();
                h.event(Event::PointerButton {
                    pos,
                    button: PointerButton::Primary,
                    pressed: false,
                    modifiers: Modifiers::NONE,
                });
            }
            7 => {
                // Programmatic jumps, as the panels make them.
                let app = h.state_mut();
                if let Some(m) = &app.model {
                    let n = m.trace.slices().len();
                    let s = rng.below(n) as u32;
                    let (model, st) = (m, &mut app.timeline);
                    st.select_and_show(model, s);
                    let a = model
                        .index
                        .span_ns
                        .0
                        .saturating_add(rng.next_u64() as i64 >> rng.below(64));
                    let b = a.saturating_add((rng.next_u64() >> rng.below(64)) as i64);
                    st.zoom_to(&model.index, a, b);
                }
            }
            _ => {
                let app = h.state_mut();
                if let Some(m) = &app.model {
                    let st = &mut app.timeline;
                    st.zoom_by(
                        &m.index,
                        10f64.powf(rng.unit_f32() as f64 * 40.0 - 20.0),
                        rng.unit_f32() as f64,
                    );
                    st.pan_by(&m.index, (rng.unit_f32() as f64 - 0.5) * 1e6);
                }
            }
        }
        h.step();
        assert_sane(&h, &format!("{what}, action {i}"));
    }
}

const DAY_NS: i64 = 86_400_000_000_000;

#[test]
fn random_interaction_never_panics_anywhere_in_i64() {
    // (base, span, slices): epoch µs → ns, 0-based, negative, both ends of i64.
    let cases: &[(i64, i64, usize)] = &[
        (0, 1_000, 1),
        (0, 3 * DAY_NS, 5_000),
        (1_733_000_000_000_000_000, 21_000_000_000, 20_000),
        (-1_054_856_206, 21_000_000_000, 20_000),
        (-3_301_224_816, 5_000_000_000, 2_000),
        (-9_000_000_000_000_000_000, 10_000_000, 500),
        (i64::MIN + 10, 1_000_000, 50),
        (i64::MAX - 2 * DAY_NS, DAY_NS, 300),
        (i64::MAX - 1_000_000, 1_000, 3),
    ];
    for (i, &(base, span, n)) in cases.iter().enumerate() {
        drive(
            trace_at(base, span, n),
            0x9E37_79B9 + i as u64,
            40,
            &format!("case {i} base {base} span {span}"),
        );
    }
}

#[test]
fn opening_view_on_the_steps_of_a_long_trace_does_not_panic() {
    // The reported crash: opening zoomed onto the steps of a 21 s trace
    // whose window sits ~1e9 ns from its origin.
    // Spans that are not round numbers: the clamp's bounds then round
    // apart in f64 (as on the tiled trace and the 10 M-slice benchmark).
    let mut rng = XorShift(0xC0FFEE);
    for base in [-1_054_856_206i64, 1_733_000_000_000_000_000, 0] {
        for _ in 0..4 {
            let span = 5_000_000_000 + (rng.next_u64() % 30_000_000_000) as i64;
            let mut h = Harness::builder()
                .with_size([1200.0, 700.0])
                .build_ui_state(
                    |ui, app: &mut ViewerApp| app.ui_root(ui),
                    ViewerApp::from_trace(trace_at(base, span, 2_000)),
                );
            h.run_steps(2);
            assert_sane(&h, &format!("base {base} span {span}"));
        }
    }
}

#[test]
fn zoom_onto_the_whole_trace_clamps_for_any_span() {
    // The reported panic: `clamp(min > max)` when a window as wide as the
    // trace is zoomed to and the bounds round apart in f64. Many spans,
    // from 1 µs to days, at several origins.
    let mut rng = XorShift(0xDEC0DE);
    for base in [
        0i64,
        -1_054_856_206,
        1_733_000_000_000_000_000,
        i64::MIN + 1,
    ] {
        for _ in 0..150 {
            let span = (1_000 + (rng.next_u64() % (3 * DAY_NS as u64)) as i64) >> rng.below(40);
            let app = ViewerApp::from_trace(trace_at(base, span.max(1_000), 3));
            let m = app.model.as_ref().expect("trace loaded");
            let mut st = app.timeline.clone();
            let (a, b) = m.index.span_ns;
            st.fit(&m.index);
            st.zoom_to(&m.index, a, b);
            st.zoom_to(&m.index, b, a);
            st.zoom_to(&m.index, i64::MIN, i64::MAX);
            st.zoom_by(&m.index, 1e300, 0.5);
            st.pan_by(&m.index, -1e300);
            st.zoom_by(&m.index, 0.0, 0.5);
            st.zoom_by(&m.index, f64::NAN, f64::NAN);
            let (x, y) = st.window_ns(&m.index);
            assert!(st.view_dur_ns.is_finite() && st.view_dur_ns > 0.0 && x <= y);
        }
    }
}
