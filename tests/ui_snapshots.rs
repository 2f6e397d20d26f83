//! The TUI drawn into a `TestBackend` from event streams, compared with reviewed snapshots.
//! The streams are built here, step by step, so every number on screen is known.

mod common;

use common::ui_session::{distributed_session, scripted_session, session};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use golow::state::State;
use golow::ui::app::App;
use golow::ui::theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn render(app: &mut App, state: &State, width: u16, height: u16) -> String {
    draw_text(width, height, |frame| app.draw(frame, state))
}

/// What `draw` puts on a terminal of this size, as text, trailing blanks trimmed.
fn draw_text(width: u16, height: u16, draw: impl FnOnce(&mut ratatui::Frame)) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(draw).unwrap();
    let buffer = terminal.backend().buffer();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        let row: String = (0..buffer.area.width)
            .map(|x| buffer[(x, y)].symbol())
            .collect();
        text.push_str(row.trim_end());
        text.push('\n');
    }
    text
}

fn app() -> App {
    App::new(theme::builtin("dark").unwrap(), None)
}

fn press(app: &mut App, state: &State, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE), state);
}

#[test]
fn dashboard_with_a_gpu() {
    let state = session(true, 80);
    insta::assert_snapshot!(render(&mut app(), &state, 200, 60));
}

#[test]
fn dashboard_without_a_gpu_gives_the_gpu_panes_room_away() {
    let state = session(false, 80);
    let screen = render(&mut app(), &state, 200, 60);
    assert!(screen.contains("no NVIDIA GPU — NVML: libnvidia-ml.so.1 not found"));
    assert!(!screen.contains("GPU utilisation %"));
    insta::assert_snapshot!(screen);
}

#[test]
fn every_pane_maximised() {
    let state = session(true, 80);
    for (i, key) in ('1'..='8').enumerate() {
        let mut app = app();
        press(&mut app, &state, KeyCode::Char(key));
        insta::assert_snapshot!(format!("pane_{}", i + 1), render(&mut app, &state, 160, 40));
    }
}

#[test]
fn the_operators_pane_sets_each_workers_top_operators_and_charts_the_chosen_one() {
    let state = session(false, 80);
    let mut app = app();
    let dashboard = render(&mut app, &state, 200, 60);
    assert!(
        dashboard.contains("aten::convolution_backward"),
        "{dashboard}"
    );
    press(&mut app, &state, KeyCode::Char('0'));
    press(&mut app, &state, KeyCode::Down);
    let maximised = render(&mut app, &state, 160, 40);
    assert!(
        maximised.contains("aten::mkldnn_convolution: self ms per profiled step  (2 of 10"),
        "{maximised}"
    );
    insta::assert_snapshot!("operators_maximised", maximised);
    // The same key again is the way back.
    press(&mut app, &state, KeyCode::Char('0'));
    assert_eq!(render(&mut app, &state, 200, 60), dashboard);
}

#[test]
fn a_distributed_job_gets_the_ranks_pane_collapsed_to_a_band_and_expandable() {
    let state = distributed_session(60);
    let mut app = app();
    let dashboard = render(&mut app, &state, 200, 60);
    assert!(
        dashboard.contains("ranks: step time across ranks"),
        "{dashboard}"
    );
    insta::assert_snapshot!("ranks_dashboard", dashboard);
    press(&mut app, &state, KeyCode::Char('9'));
    let band = render(&mut app, &state, 160, 40);
    assert!(band.contains("straggler: rank 3, 30.0 ms late"), "{band}");
    assert!(band.contains("last most often: rank 3"), "{band}");
    assert!(!band.contains("pid"), "collapsed: no line per rank\n{band}");
    insta::assert_snapshot!("ranks_band", band);
    press(&mut app, &state, KeyCode::Enter);
    let expanded = render(&mut app, &state, 160, 40);
    assert!(expanded.contains("pid"), "{expanded}");
    for pid in (201..=204).chain(211..=214) {
        assert!(
            expanded.contains(&format!(" {pid} ")),
            "rank process {pid}\n{expanded}"
        );
    }
    insta::assert_snapshot!("ranks_expanded", expanded);
    // The compare view sets the two jobs' ranks side by side.
    press(&mut app, &state, KeyCode::Tab);
    let compared = render(&mut app, &state, 160, 40);
    assert!(compared.contains("straggler"), "{compared}");
    assert!(compared.contains("rank 3 +30.0 ms"), "{compared}");
    insta::assert_snapshot!("ranks_compared", compared);
    // Without ranks the pane takes no room, and 9 maximises nothing.
    let plain = session(false, 80);
    let mut app = self::app();
    assert!(!render(&mut app, &plain, 200, 60).contains("ranks: step time"));
    press(&mut app, &plain, KeyCode::Char('9'));
    assert!(render(&mut app, &plain, 160, 40).contains("sample time"));
}

/// A script's steps split into phases: the pane appears only then, stacks the chosen worker's phases over time and
/// sets each worker's shares now side by side, with the input-bound one marked.
#[test]
fn scripts_with_step_phases_get_the_phases_pane_stacked_with_their_shares_now() {
    let state = scripted_session(60);
    let mut app = app();
    let dashboard = render(&mut app, &state, 200, 60);
    assert!(
        dashboard.contains("step phases (stacked ms per step"),
        "{dashboard}"
    );
    press(&mut app, &state, KeyCode::Char('p'));
    let maximised = render(&mut app, &state, 160, 40);
    let row = |name: &str| {
        let line = maximised
            .lines()
            .find(|l| l.contains(&format!("{name:<12}")) && l.contains('%'))
            .unwrap_or_else(|| panic!("no {name} row: {maximised}"));
        line.split(|c: char| c.is_whitespace() || c == '│')
            .filter(|cell| cell.ends_with('%'))
            .map(|c| c.trim_end_matches('%').parse::<u32>().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(row("loader"), [60, 15, 15, 5, 5], "{maximised}");
    assert_eq!(row("compute"), [4, 36, 40, 10, 10], "{maximised}");
    assert_eq!(
        maximised
            .matches("INPUT-BOUND: data 60% of a typical step")
            .count(),
        1,
        "{maximised}"
    );
    assert!(
        maximised.contains("charted: loader (↑/↓ another)"),
        "{maximised}"
    );
    assert!(
        maximised.contains("GPU busy 50% of its steps, copying 6% (CUPTI)"),
        "{maximised}"
    );
    insta::assert_snapshot!("phases_maximised", maximised);
    // The same key again is the way back; ↓ charts the next worker.
    press(&mut app, &state, KeyCode::Char('p'));
    assert_eq!(render(&mut app, &state, 200, 60), dashboard);
    press(&mut app, &state, KeyCode::Char('p'));
    press(&mut app, &state, KeyCode::Down);
    assert!(render(&mut app, &state, 160, 40).contains("charted: compute"));
    // The compare view sets the two scripts' phases side by side: A's median over B's, and A less B.
    press(&mut app, &state, KeyCode::Tab);
    let compared = render(&mut app, &state, 160, 40);
    let row = |label: &str| {
        compared
            .lines()
            .find(|l| l.contains(label))
            .unwrap_or_else(|| panic!("no {label} row: {compared}"))
            .to_string()
    };
    assert!(
        row("data p50 (ms)").contains("30.00") && row("data p50 (ms)").contains("+58.0 ms"),
        "{compared}"
    );
    assert!(row("backward p50 (ms)").contains("-5.0 ms"), "{compared}");
    assert!(
        row("data share now").contains("60% INPUT-BOUND") && row("data share now").contains("4%"),
        "{compared}"
    );
    insta::assert_snapshot!("phases_compared", compared);
    // Without phases the pane takes no room, and p maximises nothing.
    let plain = session(false, 80);
    let mut app = self::app();
    assert!(!render(&mut app, &plain, 200, 60).contains("step phases"));
    press(&mut app, &plain, KeyCode::Char('p'));
    assert!(render(&mut app, &plain, 160, 40).contains("sample time"));
}

#[test]
fn compare_view() {
    let state = session(true, 80);
    let mut app = App::new(
        theme::builtin("dark").unwrap(),
        Some(("libtorch".into(), "pytorch".into())),
    );
    let screen = render(&mut app, &state, 200, 60);
    assert!(
        screen.contains("libtorch 1.19× faster than pytorch, beyond noise"),
        "{screen}"
    );
    insta::assert_snapshot!(screen);
}

#[test]
fn the_maximised_kernels_pane_shows_the_grids_of_the_chosen_kernel() {
    let state = session(true, 80);
    let mut app = app();
    press(&mut app, &state, KeyCode::Char('6'));
    let first = render(&mut app, &state, 160, 40);
    assert!(
        first.contains("grid sizes of sm90_xmma_fprop_implicit_gemm  (1 of 4"),
        "{first}"
    );
    press(&mut app, &state, KeyCode::Down);
    press(&mut app, &state, KeyCode::Down);
    let screen = render(&mut app, &state, 160, 40);
    assert!(
        screen.contains("grid sizes of at::native::vectorized_elementwise_kernel  (3 of 4"),
        "{screen}"
    );
    insta::assert_snapshot!(screen);
}

#[test]
fn without_kernel_records_the_kernels_pane_says_what_each_collector_said() {
    use golow_protocol::event::{Body, CollectorStatus, Record};
    let mut state = session(true, 3);
    for (worker, active, detail) in [
        (
            "pytorch",
            false,
            "cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
        ),
        (
            "libtorch",
            true,
            "CUPTI 130001 (libcupti.so.13), 1000 ms windows",
        ),
    ] {
        let status = CollectorStatus {
            active,
            detail: detail.into(),
            kernels_every: 1,
        };
        state.apply(&Record::new(
            1500.0,
            Some(worker.into()),
            Body::Collector(status),
        ));
    }
    let mut app = app();
    press(&mut app, &state, KeyCode::Char('6'));
    let screen = render(&mut app, &state, 160, 20);
    assert!(screen.contains("pytorch: CUPTI collector off: cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), "{screen}");
    assert!(
        screen.contains("libtorch: collecting (CUPTI 130001"),
        "{screen}"
    );
    insta::assert_snapshot!(screen);
}

#[test]
fn help_overlay() {
    let state = session(false, 80);
    let mut app = app();
    press(&mut app, &state, KeyCode::Char('?'));
    insta::assert_snapshot!(render(&mut app, &state, 120, 40));
}

#[test]
fn the_output_overlay_shows_a_workers_lines_escaped_and_scrolls() {
    use golow_protocol::event::{Body, Record, Stream};
    let mut state = session(false, 80);
    for i in 0..60 {
        let (stream, line) = match i % 10 {
            9 => (Stream::Stderr, format!("warning {i}: \x1b[31mred\x1b[0m")),
            _ => (
                Stream::Stdout,
                format!("epoch {i} loss {:.3}", 2.0 / f64::from(i + 1)),
            ),
        };
        state.apply(&Record::new(
            9000.0,
            Some("pytorch".into()),
            Body::Output { stream, line },
        ));
    }
    let mut app = app();
    press(&mut app, &state, KeyCode::Char('o'));
    press(&mut app, &state, KeyCode::Right);
    let latest = render(&mut app, &state, 120, 30);
    assert!(latest.contains("pytorch output (60 lines)"), "{latest}");
    assert!(
        latest.contains("epoch 58") && !latest.contains("epoch 30 "),
        "{latest}"
    );
    assert!(
        !latest.contains('\x1b') && latest.contains("\\u{1b}[31m"),
        "{latest}"
    );
    insta::assert_snapshot!(latest);
    press(&mut app, &state, KeyCode::PageUp);
    press(&mut app, &state, KeyCode::PageUp);
    let back = render(&mut app, &state, 120, 30);
    assert!(
        back.contains("20 back") && back.contains("epoch 30 ") && !back.contains("epoch 58"),
        "{back}"
    );
    press(&mut app, &state, KeyCode::Esc);
    assert!(!render(&mut app, &state, 120, 30).contains("output ("));
}

#[test]
fn the_header_tells_a_stalled_worker_and_a_script_golow_measured_nothing_of() {
    use golow_protocol::config::SessionConfig;
    use golow_protocol::event::{Body, Record};
    let Some(Body::SessionStart(config)) = golow_protocol::samples::every_body().into_iter().next()
    else {
        unreachable!()
    };
    let config = SessionConfig {
        workers: vec!["train".into()],
        commands: [("train".to_string(), "python idle.py".to_string())].into(),
        stall_after_s: 30,
        ..*config
    };
    let mut state = State::default();
    let mut at = |t_ms: f64, body: Body| {
        let worker = (!matches!(body, Body::SessionStart(_))).then(|| "train".into());
        state.apply(&Record::new(t_ms, worker, body));
        render(&mut app(), &state, 120, 30)
    };
    let reading = Body::Process {
        pid: 7,
        rss_bytes: 1 << 20,
        peak_rss_bytes: 1 << 20,
        cpu_percent: Some(1.0),
        rank: None,
        threads: None,
    };
    at(0.0, Body::SessionStart(Box::new(config)));
    at(
        10.0,
        Body::WorkerStarted {
            pid: 7,
            command: vec!["sh".into()],
        },
    );
    let early = at(20_000.0, reading.clone());
    assert!(early.contains("train 0 steps"), "{early}");
    let stalled = at(45_010.0, reading);
    assert!(stalled.contains("train no step for 45 s"), "{stalled}");
    let ended = at(
        46_000.0,
        Body::WorkerExited {
            exit_code: Some(0),
            signal: None,
            stop_requested: false,
        },
    );
    assert!(
        ended.contains("train done, no optimiser step or forward pass seen"),
        "{ended}"
    );
}

/// Below 60×16 (docs/live-view.md: "Any terminal size works; below 60×16 the view says how much room it needs"), one column or
/// one row short is enough for the notice; at 60×16 and beyond, the dashboard.
#[test]
fn any_size_draws_and_tiny_terminals_are_told_what_is_needed() {
    let state = session(true, 80);
    let mut app = app();
    // The notice as words, however it wraps.
    let words = |screen: &str| screen.split_whitespace().collect::<Vec<_>>().join(" ");
    for (w, h) in [(1, 1), (10, 3), (300, 100)] {
        let screen = render(&mut app, &state, w, h);
        assert_eq!(screen.lines().count(), h as usize);
    }
    for (w, h) in [(59, 40), (200, 15), (59, 16), (60, 15), (80, 10)] {
        let screen = render(&mut app, &state, w, h);
        assert_eq!(screen.lines().count(), h as usize);
        assert_eq!(
            words(&screen),
            format!("golow needs a terminal of at least 60×16; this one is {w}×{h}"),
            "{w}×{h}:\n{screen}"
        );
    }
    for (w, h) in [(60, 16), (61, 17)] {
        let screen = render(&mut app, &state, w, h);
        assert_eq!(screen.lines().count(), h as usize);
        assert!(
            !screen.contains("needs a terminal of at least"),
            "{w}×{h}:\n{screen}"
        );
        // The dashboard itself: its header and the panes' titles.
        assert!(
            screen.contains("golow") && screen.contains("sample time"),
            "{w}×{h}:\n{screen}"
        );
    }
}

#[test]
fn themes_change_colours_not_content() {
    let state = session(true, 80);
    let mut app = app();
    let draw = |app: &mut App| {
        let mut terminal = Terminal::new(TestBackend::new(160, 40)).unwrap();
        terminal.draw(|frame| app.draw(frame, &state)).unwrap();
        terminal.backend().buffer().clone()
    };
    let dark = draw(&mut app);
    press(&mut app, &state, KeyCode::Char('t'));
    let next = draw(&mut app);
    let symbols = |b: &ratatui::buffer::Buffer| {
        b.content()
            .iter()
            .map(|c| c.symbol().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(symbols(&next), symbols(&dark));
    assert_ne!(
        next[(0, 0)].bg,
        dark[(0, 0)].bg,
        "the background colour follows the theme"
    );
}

#[test]
fn keys_ask_the_session_to_stop_workers_and_quit_only_after_it_ended() {
    use golow::channels::Control;
    use golow::ui::app::Action;
    let mut state = session(false, 10);
    let mut app = app();
    let key = |c: char| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
    assert_eq!(app.on_key(key('s'), &state), Action::None);
    assert_eq!(
        app.on_key(key('2'), &state),
        Action::Control(Control::Stop(1))
    );
    assert_eq!(app.on_key(key('s'), &state), Action::None);
    assert_eq!(
        app.on_key(key('9'), &state),
        Action::None,
        "no ninth worker"
    );
    assert_eq!(
        app.on_key(key('q'), &state),
        Action::Control(Control::StopAll)
    );
    assert!(app.is_quitting());
    state.ended = true;
    assert_eq!(app.on_key(key('q'), &state), Action::Quit);
}

#[test]
fn a_click_maximises_the_pane_under_it_and_another_restores() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let state = session(true, 80);
    let mut app = app();
    let dashboard = render(&mut app, &state, 160, 40);
    assert!(dashboard.contains("host CPU %") && dashboard.contains("sample time"));
    let click = |column, row| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    // The bottom row is the operators pane, across the screen.
    app.on_mouse(click(150, 35));
    let maximised = render(&mut app, &state, 160, 40);
    assert!(
        maximised.contains("(1 of 10, ↑/↓ to choose)") && !maximised.contains("sample time"),
        "{maximised}"
    );
    app.on_mouse(click(10, 10));
    assert_eq!(render(&mut app, &state, 160, 40), dashboard);
}

#[test]
fn a_recorded_live_session_shows_where_it_is_recorded() {
    let state = session(false, 40);
    let mut app = app().recording_to("recordings/20261121T090000Z-libtorch.golow".into());
    let screen = render(&mut app, &state, 160, 40);
    assert!(
        screen
            .lines()
            .next()
            .unwrap()
            .contains("● REC recordings/20261121T090000Z-libtorch.golow")
    );
}

#[test]
fn replay_view_with_its_timeline() {
    use golow::ui::app::Action;
    use golow::ui::timeline::Timeline;
    let state = session(true, 80);
    let mut timeline = Timeline::new(state.t_ms, "recordings/session.golow".into());
    timeline.position_ms = state.t_ms / 2.0;
    timeline.playing = false;
    let mut app = app().replaying(timeline);
    let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
    // Arrows move through time in a replay; they no longer scroll the window.
    assert_eq!(
        app.on_key(key(KeyCode::Right), &state),
        Action::Seek(state.t_ms / 2.0 + 10_000.0)
    );
    assert_eq!(
        app.on_key(key(KeyCode::Char('g')), &state),
        Action::Seek(0.0)
    );
    assert_eq!(app.on_key(key(KeyCode::Char(']')), &state), Action::None);
    let timeline = app.timeline_mut().unwrap();
    timeline.position_ms = state.t_ms / 2.0;
    insta::assert_snapshot!(render(&mut app, &state, 160, 40));
    // In the jump prompt no key is a command: q is kept from quitting, and only Enter or Esc closes it.
    app.on_key(key(KeyCode::Char('j')), &state);
    for code in [KeyCode::Char('1'), KeyCode::Char('q'), KeyCode::Char('0')] {
        assert_eq!(app.on_key(key(code), &state), Action::None, "{code:?}");
    }
    let prompt = render(&mut app, &state, 160, 40);
    assert!(prompt.contains("jump to (s or h:mm:ss): 10▏"), "{prompt}");
    // A key the prompt does not take is not typed: the prompt line says what it takes.
    assert_eq!(app.on_key(key(KeyCode::Char('x')), &state), Action::None);
    let hinted = render(&mut app, &state, 160, 40);
    let timeline_row = hinted.lines().rev().nth(1).unwrap();
    insta::assert_snapshot!("replay_jump_prompt_says_what_it_takes", timeline_row);
    assert_eq!(
        app.on_key(key(KeyCode::Enter), &state),
        Action::Seek(10_000.0)
    );
    // Esc closes it without a jump; then q is a command again.
    for code in [KeyCode::Char('j'), KeyCode::Char('5'), KeyCode::Esc] {
        assert_eq!(app.on_key(key(code), &state), Action::None, "{code:?}");
    }
    assert!(!render(&mut app, &state, 160, 40).contains("jump to"));
    assert_eq!(app.on_key(key(KeyCode::Char('q')), &state), Action::Quit);
    // Ctrl-C quits even from the prompt.
    app.on_key(key(KeyCode::Char('j')), &state);
    assert_eq!(
        app.on_key(
            KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
            &state
        ),
        Action::Quit
    );
}

#[test]
fn a_paused_live_view_asks_the_recording_for_what_memory_no_longer_holds() {
    use golow::ui::app::Action;
    // 5000 steps at 4 a second: the oldest ~225 s of step series have fallen out of memory.
    let state = session(false, 5000);
    let complete_from = state.complete_from_s();
    assert!(complete_from > 200.0, "{complete_from}");
    let mut app = app().recording_to("recordings/x.golow".into());
    let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
    // Live, scrolling never asks: the newest data is in memory.
    assert_eq!(app.on_key(key(KeyCode::Left), &state), Action::None);
    app.on_key(key(KeyCode::Right), &state);
    app.on_key(key(KeyCode::Char(' ')), &state);
    let mut asked = None;
    for _ in 0..200 {
        if let Action::Seek(t_ms) = app.on_key(key(KeyCode::Left), &state) {
            asked = Some(t_ms);
            break;
        }
    }
    let t_ms = asked.expect("scrolling back far enough asks for the recording");
    assert!(t_ms / 1e3 - 60.0 < complete_from && t_ms > 0.0, "{t_ms}");
    // The recording's player answered: its store is drawn, not a copy of it.
    app.show_history();
    let history = session(false, 800);
    let screen = draw_text(160, 40, |frame| {
        app.redraw(frame, &state, Some(&history), golow::store::Changes::OTHER);
    });
    assert!(
        screen.contains("PAUSED — earlier data from the recording"),
        "{screen}"
    );
    // Back to live: the recording's state is dropped.
    app.on_key(key(KeyCode::Char(' ')), &state);
    let screen = render(&mut app, &state, 160, 40);
    assert!(!screen.contains("PAUSED"), "{screen}");
}

/// A sweep's results as the runner leaves them: libtorch and pytorch over batch sizes 8 … 64 at 32 px, pytorch
/// out of memory at 64.
fn sweep_results() -> golow::sweep::Results {
    use golow::sweep::{Results, Row, RowStatus, SweepConfig};
    let config = SweepConfig {
        impls: vec!["libtorch".into(), "pytorch".into()],
        model: golow_protocol::config::Model::Resnet50,
        dataset: "synthetic".into(),
        mode: golow_protocol::config::Mode::Eval,
        steps: 30,
        warmup: 2,
        device: "cpu".into(),
        pinned: false,
        seed: 0,
        batch_sizes: vec![8, 16, 32, 64],
        resolutions: vec![32],
        repeat: 1,
    };
    let mut results = Results::new(config);
    for (i, batch) in [8u32, 16, 32, 64].into_iter().enumerate() {
        let cell = golow::sweep::Cell {
            batch_size: batch,
            resolution: 32,
        };
        let rows = ["libtorch", "pytorch"]
            .into_iter()
            .map(|name| {
                let slower = if name == "pytorch" { 1.3 } else { 1.0 };
                let oom = name == "pytorch" && batch == 64;
                Row {
                    implementation: name.into(),
                    batch_size: batch,
                    resolution: 32,
                    status: if oom { RowStatus::Oom } else { RowStatus::Ok },
                    repeats: 1,
                    sample_time_p50_ms: (!oom).then_some((4.0 - i as f64 * 0.5) * slower),
                    sample_time_p50_min_ms: None,
                    sample_time_p50_max_ms: None,
                    sample_time_p90_ms: (!oom).then_some((4.5 - i as f64 * 0.5) * slower),
                    throughput_samples_per_s: (!oom).then(|| 250.0 * (1.0 + i as f64) / slower),
                    throughput_min: None,
                    throughput_max: None,
                    peak_host_rss_bytes: Some((400 + 100 * i as u64) << 20),
                    peak_gpu_mem_bytes: None,
                    gpu_util_mean_percent: None,
                    h2d_bytes_per_step: None,
                    h2d_ms_p50: None,
                    compile_ms: None,
                    top_operator: None,
                    top_operator_share: None,
                    recording: Some(format!("cells/b{batch}-r32.golow")),
                    recordings: Vec::new(),
                    error: oom.then(|| "DefaultCPUAllocator: can't allocate memory".to_string()),
                }
            })
            .collect();
        results.record(cell, rows);
    }
    results
}

#[test]
fn the_sweep_view_draws_the_curves_of_the_finished_cells() {
    use golow::ui::sweep_charts::SweepView;
    let mut view = SweepView::new(theme::builtin("dark").unwrap(), sweep_results());
    view.cell_ended(
        "cell 4/4 batch 64 at 32 px: pytorch oom".into(),
        sweep_results(),
    );
    view.finish("the sweep has ended");
    let screen = draw_text(160, 44, |frame| view.draw(frame));
    assert!(screen.contains("ms per sample (median)"), "{screen}");
    assert!(
        screen.contains("no finished cell measured this"),
        "GPU memory, on a CPU: {screen}"
    );
    assert!(
        screen.contains("1 row(s) out of memory or failed"),
        "{screen}"
    );
    insta::assert_snapshot!(screen);
}

/// Feeds `records` to two views a few at a time, after `keys`: one redrawing only what the records
/// changed (the live view's way), one drawing every frame whole. The terminals must show the same
/// after each frame; `partial` says whether most frames may be partial.
fn redrawn_parts_match_whole_frames(
    records: &[golow_protocol::event::Record],
    (width, height): (u16, u16),
    keys: &[KeyCode],
    partial: bool,
) {
    use golow::store::Changes;
    use golow::ui::render::Screen;
    let mut screen = Screen::new(Terminal::new(TestBackend::new(width, height)).unwrap()).unwrap();
    let mut reference = Terminal::new(TestBackend::new(width, height)).unwrap();
    let (mut parts, mut whole) = (app(), app());
    let mut state = State::default();
    for &key in keys {
        press(&mut parts, &state, key);
        press(&mut whole, &state, key);
    }
    let mut partial_frames = 0;
    for (frame, batch) in records.chunks(3).enumerate() {
        let mut changes = Changes::NONE;
        for record in batch {
            state.apply(record);
            changes |= Changes::of(&record.body);
        }
        let mut drawn = Vec::new();
        screen
            .draw(|f| {
                drawn = parts.redraw(f, &state, None, changes);
                drawn.clone()
            })
            .unwrap();
        partial_frames += usize::from(drawn != [ratatui::layout::Rect::new(0, 0, width, height)]);
        reference.draw(|f| whole.draw(f, &state)).unwrap();
        assert_eq!(
            screen.backend().buffer(),
            reference.backend().buffer(),
            "frame {frame}, after {batch:?}"
        );
    }
    // Ratatui's own drawing (the GOLOW_PLAIN_RENDER switch) draws whole frames only.
    assert_eq!(
        partial_frames * 2 > records.len() / 3,
        partial && golow::ui::render::partial_frames(),
        "frames that redrew parts only: {partial_frames}"
    );
}

#[test]
fn the_live_view_redraws_only_what_changed_and_shows_the_same_as_whole_frames() {
    for gpu in [false, true] {
        let records = common::ui_session::records(gpu, 240);
        redrawn_parts_match_whole_frames(&records, (200, 60), &[], true);
        // The help over the dashboard, and the compare view, are drawn whole.
        redrawn_parts_match_whole_frames(&records, (200, 60), &[KeyCode::Char('?')], false);
        redrawn_parts_match_whole_frames(&records, (200, 60), &[KeyCode::Char('c')], false);
    }
    let distributed = common::ui_session::distributed_records(60);
    redrawn_parts_match_whole_frames(&distributed, (200, 60), &[], true);
    let recordings = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("recordings");
    let recording = std::fs::read_dir(recordings)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "golow"))
        .expect("a sample recording");
    let records: Vec<golow_protocol::event::Record> = golow::recording::Player::open(&recording)
        .unwrap()
        .records()
        .collect();
    redrawn_parts_match_whole_frames(&records, (160, 48), &[], true);
}

/// While other processes keep a share of the CPUs, the header says so, as the CPU pane does; once they stop, it no
/// longer does.
#[test]
fn the_header_says_while_the_machine_is_busy() {
    use golow_protocol::event::{Body, Record};
    let mut state = session(false, 80);
    let load = |others: f64| Body::MachineLoad {
        load_1m: 3.5,
        busy_percent: 97.0,
        steal_percent: 0.5,
        others_percent: others,
        cpu_mhz: Some(2600.0),
    };
    let quiet = render(&mut app(), &state, 200, 60);
    assert!(!quiet.contains("BUSY"), "{quiet}");
    let t = state.t_ms;
    for (i, others) in [60.0, 60.0, 60.0, 60.0, 20.0].into_iter().enumerate() {
        state.apply(&Record::new(t + i as f64 * 1e3, None, load(others)));
    }
    let busy = render(&mut app(), &state, 200, 60);
    let header = busy.lines().next().unwrap();
    assert!(
        header.contains("[BUSY: other processes use 52% of the CPUs]"),
        "{header}"
    );
    // The CPU pane's share of other processes is the header's measure: the same seconds, the same figure.
    assert!(busy.contains("others 52%"), "{busy}");
    for i in 5..10 {
        state.apply(&Record::new(t + f64::from(i) * 1e3, None, load(2.0)));
    }
    assert!(!render(&mut app(), &state, 200, 60).contains("BUSY"));
}

/// Words that look like a number cut from the left (`089.2`, `029%`), clock times aside: a label overwritten.
fn cut_numbers(screen: &str) -> Vec<String> {
    screen
        .split(|c: char| c.is_whitespace() || "│┤├─└┌┐┘".contains(c))
        .filter(|w| {
            let mut chars = w.chars();
            !w.contains(':')
                && chars.next() == Some('0')
                && chars.next().is_some_and(|c| c.is_ascii_digit())
        })
        .map(String::from)
        .collect()
}

/// At 80×24, as a new user's terminal opens, the live view and the replay keep every label whole, and each one's
/// help and footer list only the keys its source has: a replay has no workers to stop, a session no timeline.
#[test]
fn at_80x24_a_session_and_a_recording_keep_labels_whole_and_list_only_their_keys() {
    use golow::ui::timeline::Timeline;
    let state = session(true, 80);
    let mut live = app().recording_to("recordings/session.golow".into());
    let mut timeline = Timeline::new(state.t_ms, "recordings/session.golow".into());
    timeline.position_ms = state.t_ms;
    timeline.playing = false;
    let mut replay = app().replaying(timeline);
    for (name, app) in [("live", &mut live), ("replay", &mut replay)] {
        let screen = render(app, &state, 80, 24);
        assert_eq!(
            cut_numbers(&screen),
            Vec::<String>::new(),
            "{name}:\n{screen}"
        );
        insta::assert_snapshot!(format!("{name}_80x24"), screen);
    }
    let help = |app: &mut App| {
        press(app, &state, KeyCode::Char('?'));
        let screen = render(app, &state, 80, 24);
        press(app, &state, KeyCode::Char('?'));
        screen
    };
    let (live_help, replay_help) = (help(&mut live), help(&mut replay));
    for only_live in [
        "stop worker N",
        "stop the workers gracefully",
        "collection continues",
    ] {
        assert!(live_help.contains(only_live), "{only_live}:\n{live_help}");
        assert!(
            !replay_help.contains(only_live),
            "{only_live}:\n{replay_help}"
        );
    }
    for only_replay in ["play/pause", "jump to a time"] {
        assert!(
            replay_help.contains(only_replay),
            "{only_replay}:\n{replay_help}"
        );
        assert!(
            !live_help.contains(only_replay),
            "{only_replay}:\n{live_help}"
        );
    }
    insta::assert_snapshot!("live_help_80x24", live_help);
    insta::assert_snapshot!("replay_help_80x24", replay_help);
}

/// The sizes people's terminals open at, smallest first.
const SIZES: [(u16, u16); 4] = [(80, 24), (120, 40), (160, 45), (200, 60)];

/// Whether a cell holds text, rather than a border, a chart's dots, a bar or a blank.
fn is_text(c: char) -> bool {
    !(c.is_whitespace()
        || ('\u{2500}'..='\u{259f}').contains(&c)
        || ('\u{2800}'..='\u{28ff}').contains(&c)
        || c == '…')
}

/// The word that ends at column `end` of `row`.
fn word_ending_at(row: &[char], end: usize) -> String {
    let start = (0..=end)
        .rev()
        .find(|&x| !is_text(row[x]))
        .map_or(0, |x| x + 1);
    row[start..=end].iter().collect()
}

/// Text that runs into an edge, and so was cut there: a pane's title that meets its corner, a row of a pane's text
/// that meets its right border (the time at the end of a chart's axis aside: it is set flush against it), and a line
/// outside the panes that meets the screen's edge. Whatever fits is drawn with room to spare, so none of these
/// happens unless something was cut.
fn cut_at_edges(screen: &str, width: usize) -> Vec<String> {
    let grid: Vec<Vec<char>> = screen
        .lines()
        .map(|l| {
            let mut row: Vec<char> = l.chars().collect();
            row.resize(width, ' ');
            row
        })
        .collect();
    let mut cuts = Vec::new();
    for (y, row) in grid.iter().enumerate() {
        if is_text(row[width - 1]) {
            cuts.push(format!(
                "row {y} at the screen's edge: {}",
                word_ending_at(row, width - 1)
            ));
        }
        for x in (0..width).filter(|&x| row[x] == '╭') {
            let Some(right) = (x + 1..width).find(|&r| row[r] == '╮') else {
                continue;
            };
            if row[right - 1] != '─' {
                cuts.push(format!(
                    "title at row {y}: {}",
                    word_ending_at(row, right - 1)
                ));
            }
            for (inner_y, inner) in grid.iter().enumerate().skip(y + 1) {
                if inner[right] != '│' {
                    break;
                }
                let axis_below = grid[inner_y - 1][x..right].contains(&'└');
                let word = word_ending_at(inner, right - 1);
                if is_text(inner[right - 1]) && !(axis_below && word.ends_with('s')) {
                    cuts.push(format!("row {inner_y} at a border: {word}"));
                }
            }
        }
    }
    cuts
}

/// Each key that opens a view: none (the dashboard), each pane maximised, and compare.
const VIEWS: [char; 13] = [
    '_', '1', '2', '3', '4', '5', '6', '7', '8', '9', '0', 'p', 'c',
];

/// The recording `name` under `recordings/`, folded to its end.
fn recorded(name: &str) -> State {
    let path = std::path::Path::new("recordings").join(format!("{name}.golow"));
    let mut player = golow::recording::Player::open(&path).unwrap();
    player.run_to_end();
    player.into_state()
}

/// A view replaying `state`, stopped at `position_ms`.
fn replay_at(state: &State, position_ms: f64) -> App {
    use golow::ui::timeline::Timeline;
    let mut timeline = Timeline::new(state.t_ms, "recordings/session.golow".into());
    timeline.position_ms = position_ms;
    timeline.playing = false;
    app().replaying(timeline)
}

/// What `view` (a key of `VIEWS`) shows of `state` at each of the sizes, one after another under their sizes.
fn at_every_size(mut new_app: impl FnMut() -> App, state: &State, view: char) -> String {
    SIZES
        .iter()
        .map(|&(w, h)| {
            let mut app = new_app();
            if view != '_' {
                press(&mut app, state, KeyCode::Char(view));
            }
            format!("{w}×{h}\n{}", render(&mut app, state, w, h))
        })
        .collect()
}

/// At each size people's terminals open at, no view cuts a word at an edge, live or replayed: the constructed
/// sessions (with and without a GPU, distributed, with step phases) and every real recording under `recordings/`.
#[test]
fn at_every_size_no_view_cuts_a_word_at_an_edge() {
    let mut sessions: Vec<(String, State)> = vec![
        ("gpu".into(), session(true, 80)),
        ("cpu".into(), session(false, 80)),
        ("ranks".into(), distributed_session(60)),
        ("phases".into(), scripted_session(60)),
    ];
    for entry in std::fs::read_dir("recordings").unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let state = recorded(&name);
        sessions.push((name, state));
    }
    let mut cuts = Vec::new();
    for (name, state) in &sessions {
        for view in VIEWS {
            for (source, new_app) in [
                ("live", &(|| app()) as &dyn Fn() -> App),
                ("replay", &|| replay_at(state, state.t_ms)),
            ] {
                for (w, h) in SIZES {
                    let mut app = new_app();
                    if view != '_' {
                        press(&mut app, state, KeyCode::Char(view));
                    }
                    let screen = render(&mut app, state, w, h);
                    for cut in cut_at_edges(&screen, usize::from(w)) {
                        cuts.push(format!("{name}, {source}, key {view}, {w}×{h}: {cut}"));
                    }
                }
            }
        }
    }
    assert!(cuts.is_empty(), "{} cut:\n{}", cuts.len(), cuts.join("\n"));
}

/// The main views at each size, reviewed: the dashboard, each pane maximised, compare, and a replay of a real
/// recording with a GPU (its GPU, copy and kernel panes), the ranks and phases panes from the sessions that have them.
#[test]
fn the_main_views_at_the_sizes_people_use() {
    let state = session(true, 80);
    for view in VIEWS.iter().filter(|&&v| v != '9' && v != 'p') {
        let name = match view {
            '_' => "dashboard".to_string(),
            'c' => "compare".to_string(),
            key => format!("pane_{key}"),
        };
        insta::assert_snapshot!(
            format!("{name}_at_every_size"),
            at_every_size(app, &state, *view)
        );
    }
    let ranks = distributed_session(60);
    insta::assert_snapshot!("ranks_at_every_size", at_every_size(app, &ranks, '9'));
    let phases = scripted_session(60);
    insta::assert_snapshot!("phases_at_every_size", at_every_size(app, &phases, 'p'));
    let recording = recorded("20261126-h200-copies-pageable-eval-b128");
    let replay = || replay_at(&recording, recording.t_ms);
    insta::assert_snapshot!(
        "replay_at_every_size",
        at_every_size(replay, &recording, '_')
    );
}

/// The time at the right end of each chart's x axis on `screen`: the numbers of seconds on the rows under an axis.
fn axis_ends(screen: &str) -> Vec<u64> {
    let rows: Vec<&str> = screen.lines().collect();
    let mut ends = Vec::new();
    for pair in rows.windows(2) {
        let [axis, labels] = pair else { continue };
        let axis: Vec<char> = axis.chars().collect();
        let labels: Vec<char> = labels.chars().collect();
        // Each axis's labels: the seconds under its run of ─, from its └ on.
        for start in (0..axis.len()).filter(|&x| axis[x] == '└') {
            let end = (start + 1..axis.len())
                .find(|&x| axis[x] != '─')
                .unwrap_or(axis.len());
            let under: String = labels
                .get(start.saturating_sub(1)..end.min(labels.len()))
                .unwrap_or(&[])
                .iter()
                .collect();
            let seconds = under
                .split_whitespace()
                .filter_map(|w| w.strip_suffix('s')?.parse::<u64>().ok());
            ends.extend(seconds.max());
        }
    }
    ends
}

/// A replay's clock and its charts' axes say the same time: each axis ends at the second the timeline shows, not at
/// the round figure its range runs on to.
#[test]
fn a_replays_clock_and_its_charts_axes_agree() {
    let state = session(true, 80);
    for position_ms in [24_400.0, 24_900.0, 31_000.0] {
        let screen = render(&mut replay_at(&state, position_ms), &state, 160, 45);
        let timeline = screen.lines().rev().nth(1).unwrap();
        let clock = (position_ms / 1e3).floor() as u64;
        assert!(
            timeline.contains(&format!("00:00:{clock:02} /")),
            "{timeline}"
        );
        let ends = axis_ends(&screen);
        assert!(ends.len() >= 6, "{screen}");
        assert!(
            ends.iter().all(|&end| end == clock),
            "{ends:?} at {clock}s:\n{screen}"
        );
    }
}

/// Steps that take many times what most do (an epoch's end) go off the phases chart, which says so, rather than
/// flattening every other step against its floor.
#[test]
fn the_phases_chart_is_scaled_to_most_steps_and_says_what_goes_off_it() {
    use golow_protocol::event::{Body, Name, Record};
    let mut state = scripted_session(60);
    // `loader`'s 60th step waits 3 s for its data: its interval is 30 times the others'.
    let mut spike = golow_protocol::samples::optimizer_step(60, None);
    spike.interval_ms = Some(3_100.0);
    spike.phases = Some(golow_protocol::samples::step_phases(
        3_000.0, 15.0, 15.0, 5.0,
    ));
    state.apply(&Record::new(
        1000.0 + 60.0 * 100.0 + 3_100.0,
        Some(Name::from("loader")),
        Body::OptimizerStep(spike),
    ));
    let mut app = app();
    press(&mut app, &state, KeyCode::Char('p'));
    let screen = render(&mut app, &state, 160, 45);
    let top_row = screen.lines().find(|l| l.contains("share now")).unwrap();
    let top: f64 = top_row
        .split('│')
        .nth(1)
        .and_then(|label| label.trim().parse().ok())
        .unwrap_or_else(|| panic!("no axis label on: {top_row}"));
    assert!(top < 200.0, "the chart's top is {top} ms:\n{screen}");
    assert!(screen.contains("off the chart: 1 step above"), "{screen}");
    assert!(screen.contains("up to 3100 ms"), "{screen}");
}

/// When every worker has ended, the memory pane keeps what each was last seen holding, and says so, rather than the
/// zero the sampler read of each exited process.
#[test]
fn a_replay_at_its_end_keeps_each_workers_last_memory() {
    let state = recorded("20261126-h200-copies-pageable-eval-b128");
    let mut app = replay_at(&state, state.t_ms);
    press(&mut app, &state, KeyCode::Char('4'));
    let screen = render(&mut app, &state, 160, 45);
    let table: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.contains("peak RSS"))
        .take(3)
        .collect();
    for row in &table[1..] {
        assert!(
            row.contains("GiB") && !row.contains(" 0 B"),
            "{row}\n{screen}"
        );
    }
    assert!(
        table[0].contains("last RSS") && table[0].contains("last GPU"),
        "{screen}"
    );
}

/// No table sets its header over no rows, at any size: where none fit, the table is left out or a line says why.
#[test]
fn every_table_has_a_row_under_its_header_at_every_size() {
    const HEADERS: [&str; 7] = [
        " kernel ",
        "samples/s",
        "ms p50",
        "peak RSS",
        "epoch",
        "kernels per step",
        "operators per profiled step",
    ];
    let recording = recorded("20261126-h200-copies-pageable-eval-b128");
    let constructed = session(true, 80);
    for state in [&recording, &constructed] {
        for view in ['_', 'c'] {
            for (w, h) in SIZES {
                let mut app = app();
                if view != '_' {
                    press(&mut app, state, KeyCode::Char(view));
                }
                let screen = render(&mut app, state, w, h);
                let rows: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
                for (y, row) in rows.iter().enumerate() {
                    let text: String = row.iter().collect();
                    for header in HEADERS.iter().filter_map(|h| text.find(h)) {
                        // The pane's left border, and the first columns inside it on the row below: a row's
                        // name, not a chart's axis.
                        let x = text[..header].chars().count();
                        let Some(left) = row[..x].iter().rposition(|&c| c == '│') else {
                            continue;
                        };
                        let below: String = rows[y + 1][left + 1..].iter().take(12).collect();
                        assert!(
                            below.chars().any(char::is_alphanumeric) && !below.contains(['│', '└']),
                            "row {y}:\n{screen}"
                        );
                    }
                }
            }
        }
    }
}
