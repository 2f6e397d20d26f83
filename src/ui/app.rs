//! The TUI's own state and input handling: which view, which window of time, paused or not, which theme.
//! It draws the session state it is given and answers keys with actions; it never touches files or
//! processes (stopping workers is a `Control` the caller forwards to the session).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::keys::{self, Command};
use super::output::OutputOverlay;
use super::panes::{self, Pane};
use super::render::{self, fill};
use super::theme::{self, Theme};
use super::timeline::{Moved, Timeline};
use super::view::{View, Window, duration, looking};
use super::{compare_view, fit};
use crate::channels::Control;
use crate::console::words::{Describe, describe};
use crate::state::{Activity, State, WorkerState};
use crate::store::Changes;

/// Below this the dashboard cannot be drawn legibly; the TUI says how much room it needs instead.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;
const DEFAULT_SPAN: f64 = 60.0;
const MIN_SPAN: f64 = 5.0;
const STEPS_PER_SPAN: f64 = 20.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Dashboard,
    Compare,
}

/// What a key asks of the caller.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    None,
    Control(Control),
    /// Replay only: show the recording as it was at this time (ms).
    Seek(f64),
    /// Leave the TUI (the session has ended).
    Quit,
}

/// Where what is drawn comes from.
enum Origin {
    /// A session running now, and the recording it is written to, if any.
    Live {
        recording: Option<String>,
    },
    Replay(Timeline),
}

pub struct App {
    panes: Vec<Box<dyn Pane>>,
    themes: Vec<Theme>,
    theme: usize,
    mode: Mode,
    maximised: Option<usize>,
    /// The state as it was when the view was paused; collection goes on underneath.
    paused: Option<State>,
    /// While paused: the window reaches back before what memory holds, and the recording has answered with the
    /// state at its end, which the caller hands each frame from the recording's store.
    showing_history: bool,
    span: f64,
    /// Seconds the window's right edge lies behind the newest reading; 0 follows the session.
    offset: f64,
    help: bool,
    stop_prompt: bool,
    /// The output overlay, while open.
    output: Option<OutputOverlay>,
    compare: Option<(String, String)>,
    quitting: bool,
    /// Where each pane was drawn last, for mouse clicks.
    pane_areas: Vec<(usize, Rect)>,
    origin: Origin,
    /// How the last frame looked.
    drawn: Option<FrameShape>,
    /// The elapsed second the header shows.
    header_second: u64,
}

impl App {
    /// `theme` first, then the built-ins not already chosen, for `t` to cycle through.
    pub fn new(theme: Theme, compare: Option<(String, String)>) -> App {
        let mut themes = vec![theme];
        for name in theme::BUILTIN {
            if themes[0].name != name {
                themes.extend(theme::builtin(name));
            }
        }
        App {
            panes: panes::all(),
            themes,
            theme: 0,
            mode: if compare.is_some() {
                Mode::Compare
            } else {
                Mode::Dashboard
            },
            maximised: None,
            paused: None,
            showing_history: false,
            span: DEFAULT_SPAN,
            offset: 0.0,
            help: false,
            stop_prompt: false,
            output: None,
            compare,
            quitting: false,
            pane_areas: Vec::new(),
            origin: Origin::Live { recording: None },
            drawn: None,
            header_second: 0,
        }
    }

    /// A live session written to `path`: the header shows it.
    pub fn recording_to(mut self, path: String) -> App {
        self.origin = Origin::Live {
            recording: Some(path),
        };
        self
    }

    /// A replay: the timeline keeps the clock and takes the keys that move through time.
    pub fn replaying(mut self, timeline: Timeline) -> App {
        self.origin = Origin::Replay(timeline);
        self
    }

    pub fn timeline(&self) -> Option<&Timeline> {
        match &self.origin {
            Origin::Replay(timeline) => Some(timeline),
            Origin::Live { .. } => None,
        }
    }

    pub fn timeline_mut(&mut self) -> Option<&mut Timeline> {
        match &mut self.origin {
            Origin::Replay(timeline) => Some(timeline),
            Origin::Live { .. } => None,
        }
    }

    /// Seconds since the session started that the view shows as "now".
    fn now_s(&self, state: &State) -> f64 {
        match &self.origin {
            Origin::Replay(timeline) => timeline.position_ms / 1e3,
            Origin::Live { .. } => state.t_ms / 1e3,
        }
    }

    pub fn is_quitting(&self) -> bool {
        self.quitting
    }

    /// golow is ending: the view quits once the session has (as after q).
    pub fn stop_for_good(&mut self) {
        self.quitting = true;
    }

    /// Which of the key map's views this is.
    fn keys_view(&self) -> keys::View {
        match self.origin {
            Origin::Live { .. } => keys::View::Live,
            Origin::Replay(_) => keys::View::Replay,
        }
    }

    pub fn on_key(&mut self, key: KeyEvent, live: &State) -> Action {
        if self.stop_prompt {
            self.stop_prompt = false;
            return match key.code {
                KeyCode::Char(c @ '1'..='9') => {
                    let i = c as usize - '1' as usize;
                    if i < live.workers.len() {
                        Action::Control(Control::Stop(i))
                    } else {
                        Action::None
                    }
                }
                _ => Action::None,
            };
        }
        if let Origin::Replay(timeline) = &mut self.origin
            && timeline.prompting()
        {
            // The prompt keeps every key, q included, but Ctrl-C quits here as everywhere else.
            if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
                return Action::Quit;
            }
            return match timeline.on_key(key.code) {
                Moved::Jumped(ms) => Action::Seek(ms),
                Moved::Handled | Moved::Ignored => Action::None,
            };
        }
        let command = keys::command(self.keys_view(), &key);
        if let Some(overlay) = self
            .output
            .as_mut()
            .filter(|_| command != Some(Command::Quit))
        {
            if !overlay.on_key(key.code, live.workers.len()) {
                self.output = None;
            }
            return Action::None;
        }
        if command == Some(Command::Quit) {
            return match self.origin {
                Origin::Replay(_) => Action::Quit,
                Origin::Live { .. } if live.ended => Action::Quit,
                Origin::Live { .. } => {
                    self.quitting = true;
                    Action::Control(Control::StopAll)
                }
            };
        }
        if let Origin::Replay(timeline) = &mut self.origin {
            match timeline.on_key(key.code) {
                Moved::Jumped(ms) => return Action::Seek(ms),
                Moved::Handled => return Action::None,
                Moved::Ignored => {}
            }
        }
        let Some(command) = command else {
            return Action::None;
        };
        match command {
            Command::Pause => {
                self.showing_history = false;
                self.paused = match self.paused {
                    Some(_) => None,
                    None => Some(live.clone()),
                }
            }
            Command::Scroll { back: true } => {
                self.offset = (self.offset + self.span / 4.0).min(self.now_s(self.state(live)));
                return self.history_request();
            }
            Command::Scroll { back: false } => {
                self.offset = (self.offset - self.span / 4.0).max(0.0);
                return self.history_request();
            }
            Command::ZoomIn => {
                self.span = (self.span / 2.0).max(MIN_SPAN);
                return self.history_request();
            }
            Command::ZoomOut => {
                self.span = (self.span * 2.0).min(self.now_s(self.state(live)).max(DEFAULT_SPAN));
                return self.history_request();
            }
            Command::Compare => {
                self.maximised = None;
                self.mode = match self.mode {
                    Mode::Dashboard => Mode::Compare,
                    Mode::Compare => Mode::Dashboard,
                };
            }
            Command::Maximise(Some(i)) => {
                self.mode = Mode::Dashboard;
                self.maximised = (self.maximised != Some(i)).then_some(i);
            }
            Command::Maximise(None) => {
                self.maximised = None;
                self.help = false;
            }
            Command::Pane(code) => {
                if let Some(i) = self.maximised {
                    self.panes[i].on_key(code);
                }
            }
            Command::StopWorker => self.stop_prompt = true,
            Command::Output => self.output = Some(OutputOverlay::default()),
            Command::Theme => self.theme = (self.theme + 1) % self.themes.len(),
            Command::Help => self.help = !self.help,
            // The timeline took its own above; the others belong to views without sessions.
            Command::Quit | Command::Timeline(_) | Command::Axes(_) => {}
        }
        Action::None
    }

    /// A paused live view whose window reaches back before what memory holds asks for the state at
    /// the window's end from the recording.
    fn history_request(&mut self) -> Action {
        let (Some(paused), Origin::Live { recording: Some(_) }) = (&self.paused, &self.origin)
        else {
            return Action::None;
        };
        let window = self.window(paused);
        if window.from >= paused.complete_from_s() {
            self.showing_history = false;
            return Action::None;
        }
        Action::Seek(window.to * 1e3)
    }

    /// The recording has answered a `Seek` of the live view (ignored once the view is live again): from now on the
    /// frames show the history handed to `redraw`.
    pub fn show_history(&mut self) {
        self.showing_history = self.paused.is_some();
    }

    /// The window of time the charts show, ending at `clock`'s now less the scroll offset.
    fn window(&self, clock: &State) -> Window {
        // The right edge moves in steps of 1/STEPS_PER_SPAN of the span: between steps only new points
        // change on screen, so a frame sends the terminal a small diff instead of every chart cell.
        let step = self.span / STEPS_PER_SPAN;
        let end = (self.now_s(clock) - self.offset).max(0.0);
        let to = ((end / step).ceil() * step).max(step);
        Window {
            from: (to - self.span).max(0.0),
            to,
            end: end.floor(),
        }
    }

    /// A click maximises the pane under it; a click on a maximised pane restores the dashboard.
    pub fn on_mouse(&mut self, mouse: MouseEvent) {
        if mouse.kind != MouseEventKind::Down(MouseButton::Left) {
            return;
        }
        if self.maximised.is_some() {
            self.maximised = None;
            return;
        }
        let hit = self.pane_areas.iter().find(|(_, r)| {
            (r.x..r.x + r.width).contains(&mouse.column)
                && (r.y..r.y + r.height).contains(&mouse.row)
        });
        if let Some(&(i, _)) = hit {
            self.maximised = Some(i);
        }
    }

    fn state<'a>(&'a self, live: &'a State) -> &'a State {
        self.paused.as_ref().unwrap_or(live)
    }

    /// The recording's state, where the view shows it instead of what it paused on.
    fn shown_history<'a>(&self, history: Option<&'a State>) -> Option<&'a State> {
        history.filter(|_| self.showing_history)
    }

    /// Draws the whole frame.
    pub fn draw(&mut self, frame: &mut Frame, live: &State) {
        self.render(frame, live, None, None);
    }

    /// Draws what `changes` (since the last frame drawn) show, over that frame: the whole frame when
    /// its layout, the time window or anything besides readings and steps changed, and always for
    /// the compare view and under the help. `history` is the state the recording's player holds, shown
    /// in place of `live` once `show_history` said it answered. Returns the areas drawn.
    pub fn redraw(
        &mut self,
        frame: &mut Frame,
        live: &State,
        history: Option<&State>,
        changes: Changes,
    ) -> Vec<Rect> {
        let shape = self.frame_shape(frame.area(), live, history);
        let partial = render::partial_frames()
            && self.drawn.as_ref() == Some(&shape)
            && matches!(self.origin, Origin::Live { .. })
            && self.mode == Mode::Dashboard
            && !self.help
            && self.output.is_none()
            && !changes.intersects(Changes::OTHER);
        self.render(frame, live, history, partial.then_some(changes))
    }

    /// What a frame looks like besides the numbers in it.
    fn frame_shape(&self, area: Rect, live: &State, history: Option<&State>) -> FrameShape {
        let clock = self.state(live);
        let history = self.shown_history(history);
        let state = history.unwrap_or(clock);
        FrameShape {
            area,
            theme: self.theme,
            mode: self.mode,
            maximised: self.maximised,
            help: self.help,
            stop_prompt: self.stop_prompt,
            output: self.output,
            paused: self.paused.is_some(),
            history: history.is_some(),
            quitting: self.quitting,
            window: self.window(clock),
            ended: state.ended,
            gpu: gpu_present(state),
            ranks: panes::any_ranks(state),
            phases: panes::any_phases(state),
            workers: state.workers.len(),
        }
    }

    /// Everything (`only` is `None`), or the dashboard's parts that show `only`; returns the areas
    /// drawn.
    fn render(
        &mut self,
        frame: &mut Frame,
        live: &State,
        history: Option<&State>,
        only: Option<Changes>,
    ) -> Vec<Rect> {
        let area = frame.area();
        self.drawn = Some(self.frame_shape(area, live, history));
        let theme = &self.themes[self.theme];
        let base = Style::default().bg(theme.background).fg(theme.foreground);
        let too_small = area.width < MIN_WIDTH || area.height < MIN_HEIGHT;
        if only.is_none() || too_small {
            // The whole screen in the theme's colours first, in one sweep: the parts draw on it.
            fill(frame.buffer_mut(), area, base);
        }
        if too_small {
            let message = format!(
                "golow needs a terminal of at least {MIN_WIDTH}×{MIN_HEIGHT}; this one is {}×{}",
                area.width, area.height
            );
            let text = Paragraph::new(message).wrap(ratatui::widgets::Wrap { trim: true });
            frame.render_widget(text, area);
            return vec![area];
        }
        // The field itself, not `state`: the header's second is written below while this is held.
        let clock = self.paused.as_ref().unwrap_or(live);
        let window = self.window(clock);
        let history = self.shown_history(history);
        let state = history.unwrap_or(clock);
        let view = View {
            state,
            theme,
            window,
            focused: false,
        };
        let timeline_rows = u16::from(matches!(self.origin, Origin::Replay(_)));
        let [header, body, timeline_area, footer] = Layout::vertical([
            Constraint::Length(2),
            Constraint::Min(1),
            Constraint::Length(timeline_rows),
            Constraint::Length(1),
        ])
        .areas(area);
        let now_s = self.now_s(clock);
        let header_due = std::mem::replace(&mut self.header_second, now_s as u64) != now_s as u64;
        let marks = HeaderMarks {
            now_s,
            history: history.is_some(),
            paused: self.paused.is_some(),
            quitting: self.quitting,
            origin: &self.origin,
        };
        let Some(changes) = only else {
            draw_header(frame, header, &view, &marks);
            let footer_text = match &self.origin {
                Origin::Replay(timeline) => {
                    timeline.draw(frame, timeline_area, &view);
                    keys::footer_within(keys::View::Replay, usize::from(footer.width))
                }
                Origin::Live { .. } if self.stop_prompt => stop_prompt(state),
                Origin::Live { .. } => {
                    keys::footer_within(keys::View::Live, usize::from(footer.width))
                }
            };
            render::lines(frame, footer, &[Line::styled(footer_text, view.muted())]);
            self.pane_areas.clear();
            match self.mode {
                Mode::Compare => compare_view::draw(frame, body, &view, self.compare.as_ref()),
                Mode::Dashboard => {
                    let dashboard = dashboard_layout(&self.panes, state, body, self.maximised);
                    if let Some((rect, reason)) = dashboard.notice {
                        draw_notice(frame, rect, &view, reason);
                    }
                    for (i, rect) in dashboard.panes {
                        let focused = self.maximised == Some(i);
                        self.panes[i].draw(frame, rect, &View { focused, ..view });
                        self.pane_areas.push((i, rect));
                    }
                }
            }
            if let Some(overlay) = &self.output {
                overlay.draw(frame, body, &view);
            }
            if self.help {
                draw_help(frame, area, &view, self.keys_view());
            }
            return vec![area];
        };
        let mut drawn = Vec::new();
        if header_due || changes.intersects(Changes::STEPS) {
            fill(frame.buffer_mut(), header, base);
            draw_header(frame, header, &view, &marks);
            drawn.push(header);
        }
        let dashboard = dashboard_layout(&self.panes, state, body, self.maximised);
        for (i, rect) in dashboard.panes {
            if self.panes[i].shows().intersects(changes) {
                let focused = self.maximised == Some(i);
                fill(frame.buffer_mut(), rect, base);
                self.panes[i].draw(frame, rect, &View { focused, ..view });
                drawn.push(rect);
            }
        }
        drawn
    }
}

/// What decides a frame's layout and look besides the numbers: while it stays the same, the live
/// view redraws only the parts whose numbers changed.
#[derive(Debug, PartialEq)]
struct FrameShape {
    area: Rect,
    theme: usize,
    mode: Mode,
    maximised: Option<usize>,
    help: bool,
    stop_prompt: bool,
    output: Option<OutputOverlay>,
    paused: bool,
    history: bool,
    quitting: bool,
    window: Window,
    ended: bool,
    gpu: bool,
    ranks: bool,
    phases: bool,
    workers: usize,
}

fn gpu_present(state: &State) -> bool {
    state.gpu.unavailable.is_none() && !state.gpu.devices.is_empty()
}

/// Where each visible pane goes. Without a GPU the GPU panes collapse into a line that says why.
struct Dashboard<'s> {
    /// The line, and the reason.
    notice: Option<(Rect, &'s str)>,
    panes: Vec<(usize, Rect)>,
}

fn dashboard_layout<'s>(
    panes: &[Box<dyn Pane>],
    state: &'s State,
    body: Rect,
    maximised: Option<usize>,
) -> Dashboard<'s> {
    let gpu = gpu_present(state);
    let ranks = panes::any_ranks(state);
    let phases = panes::any_phases(state);
    let visible: Vec<usize> = (0..panes.len())
        .filter(|&i| {
            (gpu || !panes[i].needs_gpu())
                && (ranks || !panes[i].needs_ranks())
                && (phases || !panes[i].needs_phases())
        })
        .collect();
    let mut body = body;
    let mut notice = None;
    if !gpu && let Some(reason) = &state.gpu.unavailable {
        let [line, rest] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(body);
        notice = Some((line, reason.as_str()));
        body = rest;
    }
    if let Some(i) = maximised.filter(|i| visible.contains(i)) {
        return Dashboard {
            notice,
            panes: vec![(i, body)],
        };
    }
    let (first, rest) = visible.split_at(visible.len().min(2));
    let rows: Vec<&[usize]> = std::iter::once(first)
        .chain(rest.chunks(3))
        .filter(|r| !r.is_empty())
        .collect();
    let heights =
        Layout::vertical(rows.iter().map(|_| Constraint::Ratio(1, rows.len() as u32))).split(body);
    let mut areas = Vec::new();
    for (row, rect) in rows.iter().zip(heights.iter()) {
        let widths = Layout::horizontal(row.iter().map(|_| Constraint::Ratio(1, row.len() as u32)))
            .split(*rect);
        areas.extend(row.iter().copied().zip(widths.iter().copied()));
    }
    Dashboard {
        notice,
        panes: areas,
    }
}

/// The line that says why there are no GPU panes.
fn draw_notice(frame: &mut Frame, area: Rect, view: &View, reason: &str) {
    let text = format!(
        " no NVIDIA GPU — NVML: {reason} · GPU utilisation, kernels and host→device copies need one"
    );
    let style = Style::default()
        .fg(view.theme.warning)
        .bg(view.theme.background);
    let line = fit::line(&Line::styled(text, style), fit::room(area.width));
    render::styled_lines(frame, area, style, &[line]);
}

/// What the header marks besides the session itself.
struct HeaderMarks<'a> {
    now_s: f64,
    paused: bool,
    /// What is shown comes from the recording.
    history: bool,
    quitting: bool,
    origin: &'a Origin,
}

fn draw_header(frame: &mut Frame, area: Rect, view: &View, marks: &HeaderMarks) {
    let room = fit::room(area.width);
    let first = session_line(view, marks, room);
    let second = workers_line(view, room);
    fit::lines(frame, area, &[first, second]);
}

/// The header's first line: the session as far as it fits after what must show, the clock and the marks.
fn session_line<'a>(view: &View, marks: &HeaderMarks, room: usize) -> Line<'a> {
    let state = view.state;
    let bold = Style::default()
        .fg(view.theme.title)
        .add_modifier(Modifier::BOLD);
    let warning = Style::default().fg(view.theme.warning);
    let mut shown = Vec::new();
    if marks.history {
        shown.push("PAUSED — earlier data from the recording");
    } else if marks.paused {
        shown.push("PAUSED");
    }
    if state.ended && matches!(marks.origin, Origin::Live { .. }) {
        shown.push("ENDED — q quits");
    } else if marks.quitting {
        shown.push("stopping workers…");
    }
    let busy = state
        .machine
        .busy_now()
        .map(|others| format!("BUSY: other processes use {others:.0}% of the CPUs"));
    let marked: Vec<Span> = shown
        .into_iter()
        .chain(busy.as_deref())
        .map(|mark| Span::styled(format!("  [{mark}]"), warning))
        .collect();
    let golow = Span::styled(" golow ", bold);
    let clock = Span::styled(duration(marks.now_s), view.text());
    let used = golow.width() + clock.width() + marked.iter().map(Span::width).sum::<usize>();
    let origin = match marks.origin {
        Origin::Live { recording: Some(_) } if state.recording_failed.is_some() => {
            Some(Span::styled(
                "  RECORDING FAILED (the session goes on; see the summary)",
                Style::default().fg(view.theme.error),
            ))
        }
        Origin::Live {
            recording: Some(path),
        } => {
            const REC: &str = "  ● REC ";
            let path = fit::tail(path, room.saturating_sub(used + REC.chars().count()));
            Some(Span::styled(
                format!("{REC}{path}"),
                Style::default().fg(view.theme.error),
            ))
        }
        Origin::Replay(_) => Some(Span::styled(
            "  REPLAY",
            Style::default().fg(view.theme.highlight),
        )),
        Origin::Live { recording: None } => None,
    };
    let used = used + origin.as_ref().map_or(0, Span::width);
    let mut line = vec![golow];
    if let Some(c) = &state.session {
        let gpu = state.gpu.devices.first().map(|d| d.name.as_str());
        let described = describe(&c.into(), Describe::Header { gpu });
        let left = room.saturating_sub(used + fit::CLAUSE.len());
        let fitted = fit::line(&Line::raw(described), left);
        if fitted.width() > 1 {
            line.extend(fitted.spans.into_iter().map(|s| s.style(view.text())));
            line.push(Span::styled(" · ", view.text()));
        }
    }
    line.push(clock);
    line.extend(origin);
    line.extend(marked);
    Line::from(line)
}

/// What the header says of a worker: its state, what else is worth knowing, and the warnings, kept longest.
struct Status {
    state: String,
    notes: Vec<String>,
    warnings: Vec<String>,
    style: Style,
}

impl Status {
    fn of(view: &View, w: &WorkerState) -> Status {
        let state = view.state;
        let total = state.session.as_ref().map_or(0, |s| s.steps);
        let passes = w.script.as_ref().map_or(0, |s| s.forward.passes);
        let stalled = state.stalled_for_s(w);
        let said = match w.activity() {
            Activity::Stopped => "stopped".to_string(),
            Activity::Done => "done".to_string(),
            Activity::Failed => "FAILED".to_string(),
            Activity::Waiting => "waiting".to_string(),
            Activity::Ended => "ended".to_string(),
            Activity::Detached => "detached".to_string(),
            Activity::Running if state.is_attached(w) && w.steps == 0 => "attached".to_string(),
            Activity::Running if stalled.is_some() => {
                format!("no step for {:.0} s", stalled.unwrap_or_default())
            }
            Activity::Running if let Some(s) = state.compiling_for_s(w) => {
                format!("compiling {s:.0} s, step {}", w.steps)
            }
            Activity::Running if w.hello.is_some() && total > 0 => format!("{}/{total}", w.steps),
            Activity::Running if w.steps == 0 && passes > 0 => format!("{passes} forward passes"),
            Activity::Running => format!("{} steps", w.steps),
        };
        let mut notes = Vec::new();
        if let Some(c) = w
            .compile
            .as_ref()
            .filter(|_| state.compiling_for_s(w).is_none())
        {
            notes.push(format!("compiled {:.1} s", c.total_ms() / 1e3));
        }
        // What recording its operators costs the run, as the run itself measured it (see the operators pane).
        if let Some((_, run)) = w.operators.overhead() {
            notes.push(looking(run, ""));
        }
        let mut warnings = Vec::new();
        // A script golow measured nothing of says so once it ended; while it runs, its stall does.
        let unmeasured = w.process_end.is_some() && state.unmeasured(w).is_some();
        if unmeasured {
            warnings.push("no optimiser step or forward pass seen".to_string());
        }
        // The verdict alone: headless progress and the summary's notice name what would help.
        let input_bound = w.script.as_ref().and_then(|s| s.phases.input_bound_now());
        if let Some(bound) = input_bound {
            warnings.push(format!(
                "INPUT-BOUND (data {:.0}% of a typical step)",
                bound.share * 100.0
            ));
        }
        let style = if said == "FAILED" {
            Style::default().fg(view.theme.error)
        } else if stalled.is_some() || unmeasured || input_bound.is_some() {
            Style::default().fg(view.theme.warning)
        } else {
            view.text()
        };
        Status {
            state: said,
            notes,
            warnings,
            style,
        }
    }

    /// Its words, with its notes or without them.
    fn text(&self, notes: bool) -> String {
        let notes = self.notes.iter().filter(|_| notes);
        std::iter::once(&self.state)
            .chain(notes)
            .chain(&self.warnings)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The header's second line: each worker in its colour with its status; where they do not all fit, without their
/// notes, and then as many workers as fit, and how many more there are.
fn workers_line<'a>(view: &View, room: usize) -> Line<'a> {
    let workers = &view.state.workers;
    let statuses: Vec<Status> = workers.iter().map(|w| Status::of(view, w)).collect();
    let spans = |notes: bool, shown: usize| {
        let mut spans = vec![Span::raw(" ")];
        for (i, (w, status)) in workers.iter().zip(&statuses).take(shown).enumerate() {
            let color = Style::default().fg(view.color(&w.name));
            if i > 0 {
                spans.push(Span::raw("   "));
            }
            spans.push(Span::styled("● ", color));
            spans.push(Span::styled(format!("{} ", w.name), color));
            spans.push(Span::styled(status.text(notes), status.style));
        }
        if shown < workers.len() {
            spans.push(Span::styled(
                format!("   +{} more", workers.len() - shown),
                view.muted(),
            ));
        }
        Line::from(spans)
    };
    let fits = |line: &Line| line.width() <= room;
    for notes in [true, false] {
        let line = spans(notes, workers.len());
        if fits(&line) {
            return line;
        }
    }
    (0..workers.len())
        .rev()
        .map(|shown| spans(false, shown))
        .find(|line| fits(line))
        .unwrap_or_default()
}

fn stop_prompt(state: &State) -> String {
    let names: Vec<String> = state
        .workers
        .iter()
        .enumerate()
        .map(|(i, w)| format!("{} {}", i + 1, w.name))
        .collect();
    format!(
        " stop which worker? {} · any other key cancels",
        names.join(" · ")
    )
}

/// The help overlay's width; its lines are made to fit inside its border.
const HELP_WIDTH: u16 = 74;
/// The key column of the help's lines.
const HELP_KEYS: usize = 12;

/// The help: the keys of `view` (a replay has no workers to stop), then what the timed regions are.
fn help_lines(view: keys::View) -> Vec<String> {
    let room = usize::from(HELP_WIDTH - 2) - HELP_KEYS;
    let mut lines = Vec::new();
    for binding in keys::of(view) {
        for (i, part) in wrapped(binding.does, room).into_iter().enumerate() {
            let keys = if i == 0 { binding.keys } else { "" };
            lines.push(format!("{keys:<HELP_KEYS$}{part}"));
        }
    }
    lines.push(String::new());
    lines.extend(
        [
            "Timed regions: h2d = host→device copy of inputs and targets;",
            "compute = forward+loss+backward+step (train) or forward+loss (eval).",
            "Warm-up steps are shown in loss but excluded from statistics.",
        ]
        .map(String::from),
    );
    lines
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrapped(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

fn draw_help(frame: &mut Frame, area: Rect, view: &View, keys: keys::View) {
    let lines = help_lines(keys);
    let width = HELP_WIDTH.min(area.width);
    let height = (lines.len() as u16 + 2).min(area.height);
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    fill(
        frame.buffer_mut(),
        rect,
        view.text().bg(view.theme.background),
    );
    let text: Vec<Line> = lines
        .into_iter()
        .map(|l| Line::styled(l, view.text()))
        .collect();
    let inner = view.framed(frame, rect, " keys ");
    frame.render_widget(Paragraph::new(text), inner);
}
