//! The compare view: two implementations in two columns on shared scales, and between them the ratio
//! of each measure with its 95% confidence interval and a plain verdict.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::chart::{self, Line as ChartLine};
use super::fit;
use super::view::{View, ms, shape};
use crate::console::words::bytes;
use crate::state::flops::Efficiency;
use crate::state::operators::Operators;
use crate::state::phases::{Phase, PhasesState};
use crate::state::ratio::{Basis, MIN_SAMPLES, Pairing};
use crate::state::script::ProcessState;
use crate::state::{Durations, Ratio, State, WorkerState, ratio_of_medians, verdict};
use golow_protocol::config::Schedule;

/// The pair to compare: the one asked for when both are present, else the first two workers.
fn pair<'a>(
    view: &View<'a>,
    wanted: Option<&(String, String)>,
) -> Option<(&'a WorkerState, &'a WorkerState)> {
    let state = view.state;
    if let Some((a, b)) = wanted
        && let (Some(a), Some(b)) = (state.worker(a), state.worker(b))
    {
        return Some((a, b));
    }
    match state.workers.as_slice() {
        [a, b, ..] => Some((a, b)),
        _ => None,
    }
}

fn ratio_cell(r: Option<Ratio>) -> String {
    match r {
        Some(r) => format!(
            "{:.3}× [{:.3}, {:.3}]{}",
            r.ratio,
            r.low,
            r.high,
            if r.beyond_noise() { " *" } else { "" }
        ),
        None => "not enough steps".into(),
    }
}

/// The ratio of host-to-device copy times, or why there is none to take: on the CPU nothing is copied, and a worker
/// that measured its steps without a copy (a `--cmd` script) has none to time, which more steps would not change.
fn h2d_cell(state: &State, a: &WorkerState, b: &WorkerState) -> String {
    if !(a.h2d.is_empty() && b.h2d.is_empty()) {
        return ratio_cell(ratio_of_medians(&a.h2d, &b.h2d));
    }
    let measured = |w: &WorkerState| w.step_time.len().max(w.step_interval.len()) >= MIN_SAMPLES;
    if state.session.as_ref().is_some_and(|s| s.device == "cpu") {
        "n/a: no copy on the CPU".into()
    } else if measured(a) && measured(b) {
        "n/a: no copy timed".into()
    } else {
        ratio_cell(None)
    }
}

fn plain_ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.3}×", a / b),
        _ => "-".into(),
    }
}

const MAX_FAMILIES: usize = 6;

/// A family's share of a worker's kernel time below which its time is set beside no larger one: a ratio of two
/// times of which one is next to nothing says how little the family does there, not how fast.
const FAMILY_SHARE_FOR_A_RATIO: f64 = 0.01;

/// What sets a family's times apart: their ratio where the family does alike work on both sides (a real share of
/// each one's kernel time, or next to nothing on both), else on which side alone it does real work.
fn family_apart(
    (a, b): (&WorkerState, &WorkerState),
    (ta, tb): (Option<f64>, Option<f64>),
    (all_a, all_b): (f64, f64),
) -> String {
    let real = |t: f64, all: f64| all > 0.0 && t / all >= FAMILY_SHARE_FOR_A_RATIO;
    let only_in = |w: &WorkerState| format!("only in {}", w.name);
    match (ta, tb) {
        (Some(x), Some(y)) => match (real(x, all_a), real(y, all_b)) {
            (true, false) => only_in(a),
            (false, true) => only_in(b),
            _ => plain_ratio(Some(x), Some(y)),
        },
        (Some(_), None) => only_in(a),
        (None, Some(_)) => only_in(b),
        (None, None) => "-".into(),
    }
}

/// The same kernel families side by side: per step, launches, GPU time and the most launched grid (a shape, set
/// beside the other's, never divided by it); the ratio is of GPU time per step, where both do real work in the
/// family. Empty until a collector has sent a window.
fn kernel_family_rows(a: &WorkerState, b: &WorkerState) -> Option<SideBySide> {
    if a.gpu_activity.windows == 0 && b.gpu_activity.windows == 0 {
        return None;
    }
    let (fa, fb) = (a.gpu_activity.families(), b.gpu_activity.families());
    let mut names: Vec<&str> = fa.iter().chain(&fb).map(|f| f.name).collect();
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(*n));
    let per_step = |w: &WorkerState, v: u64| (w.steps > 0).then(|| v as f64 / w.steps as f64);
    let cell = |w: &WorkerState, families: &[crate::state::kernels::Family], family: &str| {
        let Some(f) = families.iter().find(|f| f.name == family) else {
            return (vec!["-".to_string()], None);
        };
        let time = per_step(w, f.total_ns).map(|ns| ns / 1e6);
        let cells = vec![
            time.map_or("-".into(), ms),
            per_step(w, f.launches).map_or("-".into(), |n| format!("{n:.0}")),
            f.top_grid.map_or(String::new(), |(g, _)| shape(g)),
        ];
        (cells, time)
    };
    let header = ["GPU ms", "launches", "top grid"]
        .map(String::from)
        .to_vec();
    let mut table = SideBySide::new(
        "kernels per step",
        header.clone(),
        "ratio of GPU ms",
        header,
    );
    let all = |w: &WorkerState, families: &[crate::state::kernels::Family]| {
        let ns = families
            .iter()
            .fold(0u64, |sum, f| sum.saturating_add(f.total_ns));
        per_step(w, ns).map_or(0.0, |ns| ns / 1e6)
    };
    let totals = (all(a, &fa), all(b, &fb));
    for family in names.into_iter().take(MAX_FAMILIES) {
        let ((left, ta), (right, tb)) = (cell(a, &fa, family), cell(b, &fb, family));
        table.row(family, left, family_apart((a, b), (ta, tb), totals), right);
    }
    Some(table)
}

/// A table of two workers side by side: a label, A's cells, what sets them apart, B's cells, under a header of the
/// same shape. Drawn in the room there is: the gaps around the middle narrowed, then each side's last columns left
/// out, then the ratios' intervals, then the labels cut.
struct SideBySide {
    header: Row,
    rows: Vec<Row>,
}

struct Row {
    label: String,
    left: Vec<String>,
    middle: String,
    right: Vec<String>,
}

/// The widest a table's labels are set: longer ones are the rare ones, and the columns beside them matter more.
const MAX_LABEL: usize = 32;

impl SideBySide {
    fn new(label: &str, left: Vec<String>, middle: &str, right: Vec<String>) -> SideBySide {
        SideBySide {
            header: Row {
                label: label.to_string(),
                left,
                middle: middle.to_string(),
                right,
            },
            rows: Vec::new(),
        }
    }

    fn row(&mut self, label: &str, left: Vec<String>, middle: String, right: Vec<String>) {
        self.rows.push(Row {
            label: label.to_string(),
            left,
            middle,
            right,
        });
    }

    fn all(&self) -> impl Iterator<Item = &Row> {
        std::iter::once(&self.header).chain(&self.rows)
    }

    /// The table's lines in `room` columns, A's cells in A's colour and B's in B's.
    fn lines<'a>(
        &self,
        view: &View,
        (a, b): (&WorkerState, &WorkerState),
        room: usize,
    ) -> Vec<Line<'a>> {
        let setting = self.setting(room);
        let mut lines = vec![setting.line(view, (a, b), &self.header, view.muted())];
        lines.extend(
            self.rows
                .iter()
                .map(|r| setting.line(view, (a, b), r, view.text())),
        );
        lines
    }

    /// How the table is set in `room` columns: the widest of its settings that fits (the gaps around the middle
    /// narrowed, then each side's last columns left out, then the ratios' intervals), else the narrowest, its labels
    /// cut to what is left.
    fn setting(&self, room: usize) -> Setting {
        let widths = self.column_widths();
        let columns = widths.len();
        let longest =
            |of: fn(&Row) -> String| self.all().map(|r| of(r).chars().count()).max().unwrap_or(0);
        let label = longest(|r| r.label.clone()).min(MAX_LABEL);
        let (full, short) = (
            longest(|r| r.middle.clone()),
            longest(|r| without_interval(&r.middle)),
        );
        let mut settings: Vec<Setting> = [(3, columns, false), (1, columns, false)]
            .into_iter()
            .chain((1..columns).rev().map(|shown| (1, shown, false)))
            .chain([(1, columns.min(1), true)])
            .map(|(gap, shown, short_middle)| Setting {
                label,
                widths: widths[..shown].to_vec(),
                gap,
                middle: if short_middle { short } else { full },
                short: short_middle,
            })
            .collect();
        let fits = settings.iter().position(|s| s.width() <= room);
        let mut setting = settings.swap_remove(fits.unwrap_or(settings.len() - 1));
        setting.label = room
            .saturating_sub(setting.width() - setting.label)
            .min(label);
        setting
    }

    /// The widest cell of each column, on either side.
    fn column_widths(&self) -> Vec<usize> {
        let columns = self
            .all()
            .map(|r| r.left.len().max(r.right.len()))
            .max()
            .unwrap_or(0);
        (0..columns)
            .map(|c| {
                self.all()
                    .flat_map(|r| [r.left.get(c), r.right.get(c)])
                    .flatten()
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }
}

/// How a side-by-side table is set: its label's width, each side's columns, the gaps around the middle, and the
/// middle's width and form.
struct Setting {
    label: usize,
    widths: Vec<usize>,
    gap: usize,
    middle: usize,
    short: bool,
}

impl Setting {
    /// The columns a row takes.
    fn width(&self) -> usize {
        let side: usize = self.widths.iter().map(|w| w + 1).sum();
        self.label + 2 * side + 2 * self.gap + self.middle
    }

    fn line<'a>(
        &self,
        view: &View,
        (a, b): (&WorkerState, &WorkerState),
        row: &Row,
        style: Style,
    ) -> Line<'a> {
        let cells = |cells: &[String]| -> String {
            self.widths
                .iter()
                .enumerate()
                .map(|(i, &w)| format!("{:>w$} ", cells.get(i).map_or("", String::as_str)))
                .collect()
        };
        let middle = if self.short {
            without_interval(&row.middle)
        } else {
            row.middle.clone()
        };
        let (label, width) = (fit::name(&row.label, self.label), self.label);
        let (middle, middle_width) = (fit::name(&middle, self.middle), self.middle);
        let gap = " ".repeat(self.gap);
        Line::from(vec![
            Span::styled(format!("{label:<width$} "), view.muted()),
            Span::styled(cells(&row.left), Style::default().fg(view.color(&a.name))),
            Span::styled(format!("{gap}{middle:^middle_width$}{gap}"), style),
            Span::styled(cells(&row.right), Style::default().fg(view.color(&b.name))),
        ])
    }
}

/// A ratio's cell without its interval: `0.838× [0.823, 0.845] *` as `0.838× *`, where the interval has no room.
fn without_interval(middle: &str) -> String {
    match (middle.find(" ["), middle.find(']')) {
        (Some(open), Some(close)) if open < close => {
            format!("{}{}", &middle[..open], &middle[close + 1..])
        }
        _ => middle.to_string(),
    }
}

const MAX_OPERATORS: usize = 8;

/// Where the step time goes apart: the operators with the most self time per profiled step in either, side by
/// side with the ratio of self times and A's milliseconds over B's, then the time between operators. Empty until
/// both have profiled a step.
fn operator_rows(a: &WorkerState, b: &WorkerState) -> Option<SideBySide> {
    let (oa, ob) = (&a.operators, &b.operators);
    if oa.steps == 0 || ob.steps == 0 {
        return None;
    }
    let self_ms = |o: &Operators, name: &str| {
        o.by_name
            .get(name)
            .and_then(|t| o.per_step(t.self_ns))
            .map(|ns| ns / 1e6)
    };
    let mut names: Vec<(&str, f64)> = oa
        .by_name
        .keys()
        .chain(ob.by_name.keys())
        .map(|n| {
            let most = self_ms(oa, n)
                .unwrap_or(0.0)
                .max(self_ms(ob, n).unwrap_or(0.0));
            (n.as_str(), most)
        })
        .collect();
    names.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(y.0)));
    names.dedup_by_key(|n| n.0);
    let cell = |ms_per_step: Option<f64>, calls: Option<f64>| {
        vec![
            ms_per_step.map_or("-".into(), ms),
            calls.map_or("-".into(), |c| format!("{c:.0}")),
        ]
    };
    let apart = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => format!("{} ({:+.2} ms)", plain_ratio(Some(x), Some(y)), x - y),
        _ => "-".into(),
    };
    let header = ["self ms", "calls"].map(String::from).to_vec();
    let mut table = SideBySide::new(
        "operators per profiled step",
        header.clone(),
        "ratio (A − B)",
        header,
    );
    let calls = |o: &Operators, name: &str| o.by_name.get(name).and_then(|t| o.per_step(t.calls));
    for (name, _) in names.into_iter().take(MAX_OPERATORS) {
        let (ta, tb) = (self_ms(oa, name), self_ms(ob, name));
        table.row(
            name,
            cell(ta, calls(oa, name)),
            apart(ta, tb),
            cell(tb, calls(ob, name)),
        );
    }
    let between = |o: &Operators| {
        let explained = o.explained()?;
        Some(o.compute_ms_per_step()? * (1.0 - explained))
    };
    let (ba, bb) = (between(oa), between(ob));
    table.row(
        "between operators",
        cell(ba, None),
        apart(ba, bb),
        cell(bb, None),
    );
    Some(table)
}

/// What the headline compares, and what the reader must know about how the two ran.
struct Judged {
    /// By what the pair is compared (`Basis::StepInterval` where a `--cmd` worker is one of the two), and the ratio.
    pairing: Pairing,
    /// They ran at once, competing for the same cores.
    parallel: bool,
    /// Both have ended: the verdict is final.
    ended: bool,
}

impl Judged {
    fn of(state: &State, a: &WorkerState, b: &WorkerState) -> Judged {
        let ended = |w: &WorkerState| w.activity().is_over();
        Judged {
            pairing: Pairing::of(state, a, b),
            parallel: state
                .session
                .as_ref()
                .is_some_and(|s| s.schedule == Schedule::Parallel),
            ended: ended(a) && ended(b),
        }
    }

    fn commands(&self) -> bool {
        self.pairing.basis == Basis::StepInterval
    }

    fn headline(&self, a: &WorkerState, b: &WorkerState) -> String {
        let when = if self.ended { "final" } else { "so far" };
        match self.pairing.times {
            Some(r) => format!("{when}: {}", verdict(&a.name, &b.name, &r)),
            None if self.ended => {
                format!("final: no verdict — {}", self.pairing.too_few_steps(a, b))
            }
            None => "waiting for enough measured steps to compare".to_string(),
        }
    }

    fn notes(&self) -> String {
        let mut notes = Vec::new();
        if self.commands() {
            notes.push(
                "like with like: step intervals (a --cmd worker from one optimiser step to the next, a built-in one's data + copy + compute)",
            );
        } else {
            notes.push("the headline compares time per sample");
        }
        if self.parallel {
            notes.push("they ran in parallel, competing for the same cores (--schedule alternate takes turns)");
        }
        notes.join(" · ")
    }
}

fn ranks_of(w: &WorkerState) -> Vec<&ProcessState> {
    w.script.as_ref().map(|s| s.ranks()).unwrap_or_default()
}

/// The slowest rank's median step over the fastest's.
fn rank_spread(w: &WorkerState) -> Option<f64> {
    let medians = w.script.as_ref()?.rank_step_medians();
    let (fastest, slowest) = (*medians.first()?, *medians.last()?);
    (fastest > 0.0).then(|| slowest / fastest)
}

/// Rows for distributed jobs, when either side has ranks: how many, the slowest rank's median step over the
/// fastest's, the skew between the ranks' arrivals, and the straggler named.
fn rank_rows(a: &WorkerState, b: &WorkerState) -> Vec<(&'static str, String, String, String)> {
    let (ra, rb) = (ranks_of(a), ranks_of(b));
    if ra.is_empty() && rb.is_empty() {
        return Vec::new();
    }
    let none = Durations::default();
    let skew_a = a.script.as_ref().map_or(&none, |s| &s.arrivals.skew);
    let skew_b = b.script.as_ref().map_or(&none, |s| &s.arrivals.skew);
    let straggler = |w: &WorkerState| {
        w.script
            .as_ref()
            .and_then(|s| s.arrivals.verdict)
            .map_or("none".into(), |v| {
                format!("rank {} +{} ms", v.rank, ms(v.late_ms))
            })
    };
    let count = |r: &[&ProcessState]| {
        if r.is_empty() {
            "-".into()
        } else {
            r.len().to_string()
        }
    };
    let times = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}×"));
    vec![
        ("ranks", count(&ra), String::new(), count(&rb)),
        (
            "slowest / fastest rank",
            times(rank_spread(a)),
            String::new(),
            times(rank_spread(b)),
        ),
        (
            "arrival skew p50 (ms)",
            skew_a.median_ms().map_or("-".into(), ms),
            ratio_cell(ratio_of_medians(skew_a, skew_b)),
            skew_b.median_ms().map_or("-".into(), ms),
        ),
        ("straggler", straggler(a), String::new(), straggler(b)),
    ]
}

/// Rows for `--cmd` workers' step phases, when either side has them: each phase's median per step, A over B with its
/// interval and A less B, then each one's share of data and whether it is input-bound.
fn phase_rows<'a>(
    a: &'a WorkerState,
    b: &'a WorkerState,
) -> Vec<(&'static str, String, String, String)> {
    let phases = |w: &'a WorkerState| w.script.as_ref()?.measured_phases();
    let (pa, pb) = (phases(a), phases(b));
    if pa.is_none() && pb.is_none() {
        return Vec::new();
    }
    let none = PhasesState::default();
    let (da, db) = (pa.unwrap_or(&none), pb.unwrap_or(&none));
    let labels = [
        "data p50 (ms)",
        "forward p50 (ms)",
        "backward p50 (ms)",
        "optimizer p50 (ms)",
        "other p50 (ms)",
    ];
    let mut rows: Vec<_> = Phase::ALL
        .iter()
        .zip(labels)
        .map(|(&phase, label)| {
            let (a, b) = (&da.durations[phase as usize], &db.durations[phase as usize]);
            let middle = match (a.median_ms(), b.median_ms()) {
                (Some(x), Some(y)) => {
                    format!("{} {:+.1} ms", ratio_cell(ratio_of_medians(a, b)), x - y)
                }
                _ => String::new(),
            };
            let p50 = |d: &Durations| d.median_ms().map_or("-".into(), ms);
            (label, p50(a), middle, p50(b))
        })
        .collect();
    let verdict =
        |p: Option<&PhasesState>| match p.map(|p| (p.recent_shares(), p.input_bound_now())) {
            Some((Some(shares), bound)) => format!(
                "{:.0}%{}",
                shares[Phase::Data as usize] * 100.0,
                if bound.is_some() { " INPUT-BOUND" } else { "" }
            ),
            _ => "-".into(),
        };
    rows.push(("data share now", verdict(pa), String::new(), verdict(pb)));
    rows
}

/// How far each ran from the hardware, where golow knows the model (a built-in level): achieved TFLOP/s and, on a
/// GPU in golow's table, the share of its peak for the session's math; the ratio is of the rates.
fn flops_row(
    state: &State,
    a: &WorkerState,
    b: &WorkerState,
) -> Option<(&'static str, String, String, String)> {
    let (ea, eb) = (
        Efficiency::of_worker(state, a),
        Efficiency::of_worker(state, b),
    );
    if ea.is_none() && eb.is_none() {
        return None;
    }
    let rate = |e: Option<Efficiency>| e.and_then(|e| e.achieved_tflops);
    let cell = |e: Option<Efficiency>| match (rate(e), e.and_then(|e| e.share_of_peak())) {
        (Some(tflops), Some(share)) => format!("{tflops:.1} ({:.1}%)", share * 100.0),
        (Some(tflops), None) => format!("{tflops:.1}"),
        _ => "-".into(),
    };
    Some((
        "TFLOP/s (% of peak)",
        cell(ea),
        plain_ratio(rate(ea), rate(eb)),
        cell(eb),
    ))
}

pub fn draw(frame: &mut Frame, area: Rect, view: &View, wanted: Option<&(String, String)>) {
    let inner = view.framed(frame, area, " compare ");
    let Some((a, b)) = pair(view, wanted) else {
        frame.render_widget(
            Paragraph::new(Span::styled("compare needs two workers", view.muted())),
            inner,
        );
        return;
    };
    let room = fit::room(inner.width);
    let breakdown: Vec<Vec<Line>> = [kernel_family_rows(a, b), operator_rows(a, b)]
        .into_iter()
        .flatten()
        .map(|table| table.lines(view, (a, b), room))
        .collect();
    let mut ranked = rank_rows(a, b);
    ranked.extend(phase_rows(a, b));
    let flops = flops_row(view.state, a, b);
    let [title, table, kernels, charts] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(10 + ranked.len() as u16 + u16::from(flops.is_some())),
        Constraint::Length(breakdown.iter().map(Vec::len).sum::<usize>() as u16),
        Constraint::Min(3),
    ])
    .areas(inner);
    fit::lines(
        frame,
        kernels,
        &fit::tables(breakdown, usize::from(kernels.height)),
    );
    let sample = ratio_of_medians(&a.sample_time, &b.sample_time);
    let intervals = ratio_of_medians(&a.step_interval, &b.step_interval);
    let judged = Judged::of(view.state, a, b);
    let headline = judged.headline(a, b);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    fit::lines(
        frame,
        title,
        &[
            Line::from(vec![
                Span::styled(a.name.clone(), bold.fg(view.color(&a.name))),
                Span::styled("  vs  ", view.muted()),
                Span::styled(b.name.clone(), bold.fg(view.color(&b.name))),
                Span::styled(
                    format!(
                        " · ratios are {} / {} · with 95% confidence intervals · * beyond noise",
                        a.name, b.name
                    ),
                    view.muted(),
                ),
            ]),
            Line::styled(headline, bold.fg(view.theme.highlight)),
            Line::styled(judged.notes(), Style::default().fg(view.theme.warning)),
        ],
    );
    let opt_ms = |v: Option<f64>| v.map_or("-".into(), ms);
    let peak_gpu = |w: &WorkerState| w.peak_gpu_memory_bytes.map(|v| v as f64);
    let mut rows: Vec<(&str, String, String, String)> = vec![
        (
            "sample time p50 (ms)",
            opt_ms(a.sample_time.median_ms()),
            ratio_cell(sample),
            opt_ms(b.sample_time.median_ms()),
        ),
        (
            "step time p50 (ms)",
            opt_ms(a.step_time.median_ms()),
            ratio_cell(ratio_of_medians(&a.step_time, &b.step_time)),
            opt_ms(b.step_time.median_ms()),
        ),
        (
            "step interval p50 (ms)",
            opt_ms(a.step_interval.median_ms()),
            ratio_cell(intervals),
            opt_ms(b.step_interval.median_ms()),
        ),
        (
            "throughput (samples/s)",
            a.throughput().map_or("-".into(), |t| format!("{t:.1}")),
            plain_ratio(a.throughput(), b.throughput()),
            b.throughput().map_or("-".into(), |t| format!("{t:.1}")),
        ),
    ];
    rows.extend(flops);
    rows.extend([
        (
            "peak host RSS",
            bytes(a.peak_rss_bytes as f64),
            plain_ratio(Some(a.peak_rss_bytes as f64), Some(b.peak_rss_bytes as f64)),
            bytes(b.peak_rss_bytes as f64),
        ),
        (
            "peak GPU memory",
            peak_gpu(a).map_or("-".into(), bytes),
            plain_ratio(peak_gpu(a), peak_gpu(b)),
            peak_gpu(b).map_or("-".into(), bytes),
        ),
        (
            "h2d p50 (ms)",
            opt_ms(a.h2d.median_ms()),
            h2d_cell(view.state, a, b),
            opt_ms(b.h2d.median_ms()),
        ),
    ]);
    if a.compile.is_some() || b.compile.is_some() {
        let seconds = |w: &WorkerState| {
            w.compile
                .as_ref()
                .map_or("-".into(), |c| format!("{:.1}", c.total_ms() / 1e3))
        };
        let paid = [a, b]
            .into_iter()
            .find_map(|w| {
                view.state
                    .break_even_steps(w)
                    .map(|n| format!("{} pays back after {n} steps", w.name))
            })
            .unwrap_or_default();
        rows.push(("compile time (s)", seconds(a), paid, seconds(b)));
    }
    rows.extend(ranked);
    let mut sides = SideBySide::new("", vec![a.name.clone()], "ratio", vec![b.name.clone()]);
    for (label, left, middle, right) in rows {
        sides.row(label, vec![left], middle, vec![right]);
    }
    fit::lines(frame, table, &sides.lines(view, (a, b), room));
    // Shared scale: both columns use the larger of the two maxima.
    let w = view.window;
    let top = [a, b]
        .iter()
        .filter_map(|x| x.series.sample_ms.max_in(w.from, w.to))
        .fold(0.0, f64::max)
        * 1.1;
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts);
    for (worker, rect) in [(a, left), (b, right)] {
        let line = [ChartLine {
            color: view.color(&worker.name),
            series: &worker.series.sample_ms,
        }];
        chart::draw(frame, rect, view, &line, ms, (top > 0.0).then_some(top));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::config::Mode;
    use golow_protocol::event::{Body, Name, OptimizerStep, Record, Step};
    use golow_protocol::samples::every_body;

    /// A built-in worker and a `--cmd` one, run in parallel: each step of `libtorch` takes 10 ms of data and 40 of
    /// compute, `train` steps every 60 ms.
    fn session(steps: u64, ended: bool) -> State {
        let Some(Body::SessionStart(config)) = every_body().into_iter().next() else {
            unreachable!()
        };
        let config = golow_protocol::config::SessionConfig {
            workers: vec!["libtorch".into(), "train".into()],
            schedule: Schedule::Parallel,
            warmup: 0,
            ..*config
        };
        let mut state = State::default();
        let mut apply = |worker: Option<&str>, body: Body| {
            state.apply(&Record::new(0.0, worker.map(Name::from), body));
        };
        apply(None, Body::SessionStart(Box::new(config)));
        for (i, name) in ["libtorch", "train"].into_iter().enumerate() {
            apply(
                Some(name),
                Body::WorkerStarted {
                    pid: 10 + i as u32,
                    command: vec![],
                },
            );
        }
        for step in 0..steps {
            apply(
                Some("libtorch"),
                Body::Step(Step {
                    step,
                    epoch: 0,
                    phase: Mode::Train,
                    batch_size: 8,
                    data_ms: 10.0,
                    h2d_ms: None,
                    h2d_bytes: None,
                    compute_ms: 40.0 + (step % 3) as f64,
                    loss: 1.0,
                    correct: 0,
                    warmup: false,
                    profiled: false,
                    start_ns: None,
                    end_ns: None,
                }),
            );
            apply(
                Some("train"),
                Body::OptimizerStep(OptimizerStep {
                    process: 0,
                    optimizer: 0,
                    step,
                    interval_ms: Some(60.0 + (step % 3) as f64),
                    first_step_ms: None,
                    arrived_ns: None,
                    profiled: false,
                    phases: None,
                    skipped: false,
                    loss: None,
                    t_ns: None,
                }),
            );
        }
        if ended {
            for name in ["libtorch", "train"] {
                apply(
                    Some(name),
                    Body::WorkerExited {
                        exit_code: Some(0),
                        signal: None,
                        stop_requested: false,
                    },
                );
            }
        }
        state
    }

    fn judged(state: &State) -> (Judged, String) {
        let (a, b) = (&state.workers[0], &state.workers[1]);
        let judged = Judged::of(state, a, b);
        let headline = judged.headline(a, b);
        (judged, headline)
    }

    #[test]
    fn a_cmd_worker_is_compared_by_step_intervals_with_a_final_verdict() {
        let (running, headline) = judged(&session(30, false));
        assert!(running.commands() && running.parallel && !running.ended);
        assert!(
            headline.starts_with("so far: libtorch 1.20× faster than train"),
            "{headline}"
        );
        assert!(running.notes().contains("like with like: step intervals"));
        assert!(
            running
                .notes()
                .contains("ran in parallel, competing for the same cores")
        );
        let (ended, headline) = judged(&session(30, true));
        assert!(ended.ended);
        assert!(
            headline.starts_with("final: libtorch 1.20× faster than train"),
            "{headline}"
        );
    }

    #[test]
    fn without_a_copy_to_time_the_h2d_row_says_so_rather_than_wait_for_steps() {
        let h2d = |state: &State| h2d_cell(state, &state.workers[0], &state.workers[1]);
        assert_eq!(h2d(&session(3, false)), "not enough steps");
        assert_eq!(h2d(&session(30, false)), "n/a: no copy timed");
        let mut on_cpu = session(3, false);
        on_cpu.session.as_mut().unwrap().device = "cpu".into();
        assert_eq!(h2d(&on_cpu), "n/a: no copy on the CPU");
    }

    /// Two workers with these kernels (name, launches, ns, grid) in one collector window, over 10 steps each.
    fn kernels_of(name: &str, kernels: &[(&str, u64, u64, [u32; 3])]) -> WorkerState {
        let mut worker = WorkerState {
            name: name.into(),
            steps: 10,
            ..Default::default()
        };
        let window = crate::state::kernels::tests::window(0, kernels, 0.5);
        worker.gpu_activity.apply(&window, None);
        worker
    }

    /// The cudnn level's ReLU is cuDNN's generic tensor op: it sits in the elementwise row beside ATen's, grids as
    /// shapes and a ratio of times; a family one side hardly uses gets no ratio, and Inductor's kernels a row of
    /// their own.
    #[test]
    fn kernel_families_set_like_beside_like_with_a_ratio_only_where_both_work() {
        let pytorch = kernels_of(
            "pytorch",
            &[
                (
                    "at::native::vectorized_elementwise_kernel (clamp_scalar)",
                    490,
                    40_000_000,
                    [25088, 1, 1],
                ),
                (
                    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32",
                    530,
                    70_000_000,
                    [132, 1, 1],
                ),
            ],
        );
        let cudnn = kernels_of(
            "cudnn",
            &[
                ("op_generic_tensor_kernel", 650, 80_000_000, [25088, 1, 1]),
                (
                    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32",
                    300,
                    70_000_000,
                    [132, 1, 1],
                ),
                (
                    "at::native::vectorized_elementwise_kernel (FillFunctor)",
                    40,
                    10_000,
                    [1, 1, 1],
                ),
                (
                    "triton_poi_fused__native_batch_norm_legit_no_training_relu_2",
                    10,
                    5_000_000,
                    [64, 1, 1],
                ),
            ],
        );
        let table = kernel_family_rows(&pytorch, &cudnn).unwrap();
        let row = |family: &str| table.rows.iter().find(|r| r.label == family).unwrap();
        let elementwise = row("elementwise");
        assert_eq!(elementwise.left, ["4.00", "49", "(25088,1,1)"]);
        assert_eq!(elementwise.right, ["8.00", "69", "(25088,1,1)"]);
        assert_eq!(elementwise.middle, "0.500×");
        assert_eq!(row("Triton pointwise").middle, "only in cudnn");
        assert!(table.rows.iter().all(|r| r.label != "other"));
        let tiny = kernels_of(
            "tiny",
            &[
                (
                    "at::native::vectorized_elementwise_kernel (FillFunctor)",
                    4,
                    10_000,
                    [1, 1, 1],
                ),
                (
                    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32",
                    300,
                    70_000_000,
                    [132, 1, 1],
                ),
            ],
        );
        let table = kernel_family_rows(&pytorch, &tiny).unwrap();
        let elementwise = table
            .rows
            .iter()
            .find(|r| r.label == "elementwise")
            .unwrap();
        assert_eq!(elementwise.middle, "only in pytorch");
    }

    #[test]
    fn too_few_steps_at_the_end_say_why_there_is_no_verdict() {
        let (_, headline) = judged(&session(3, true));
        assert_eq!(
            headline,
            "final: no verdict — libtorch has 3 measured steps, 5 are needed"
        );
        let (_, headline) = judged(&session(3, false));
        assert_eq!(headline, "waiting for enough measured steps to compare");
    }
}
