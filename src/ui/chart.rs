//! One line chart per metric, one line per worker, over the view's time window, drawn straight into
//! the buffer as Braille dots: ratatui's `Chart` builds a canvas layer per line and was most of a
//! frame's cost.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};

use super::fit;
use super::render::cells_of_row;
use super::view::View;
use crate::state::Series;

/// At most this many points per series per character column: a Braille cell is 2 dots wide, and a
/// minimum and a maximum per dot column keep every spike while drawing far fewer segments.
const POINTS_PER_COLUMN: usize = 4;

type Point = (f64, f64);

/// A slice of time being decimated: its index, and its lowest and highest points so far.
struct Bucket {
    index: i64,
    low: Point,
    high: Point,
}

impl Bucket {
    /// Its extremes, in time order (one point when they coincide).
    fn flush(self, out: &mut Vec<Point>) {
        let (first, second) = if self.low.0 <= self.high.0 {
            (self.low, self.high)
        } else {
            (self.high, self.low)
        };
        out.push(first);
        if second != first {
            out.push(second);
        }
    }
}

/// Keeps the lowest and the highest point of each of `columns` equal slices of time, in time order.
pub fn decimate(
    points: impl Iterator<Item = (f64, f64)>,
    from: f64,
    to: f64,
    columns: usize,
) -> Vec<(f64, f64)> {
    let buckets = (columns * POINTS_PER_COLUMN / 2).max(1);
    let width = (to - from).max(f64::EPSILON) / buckets as f64;
    let mut out = Vec::with_capacity(buckets * 2);
    let mut current: Option<Bucket> = None;
    for point in points {
        // Points start at `from` (a window's), so truncation is the floor.
        let index = ((point.0 - from) / width) as i64;
        match current.as_mut() {
            Some(b) if b.index == index => {
                if point.1 < b.low.1 {
                    b.low = point;
                }
                if point.1 > b.high.1 {
                    b.high = point;
                }
            }
            _ => {
                if let Some(done) = current.take() {
                    done.flush(&mut out);
                }
                current = Some(Bucket {
                    index,
                    low: point,
                    high: point,
                });
            }
        }
    }
    if let Some(done) = current {
        done.flush(&mut out);
    }
    out
}

pub struct Line<'a> {
    pub color: Color,
    pub series: &'a Series,
}

/// The nearest whole number to a non-negative `v` (halves up): `f64::round` is a libm call on
/// x86-64's baseline, a few percent of a frame.
fn nearest(v: f64) -> i64 {
    (v + 0.5) as i64
}

/// Braille dots per character cell: 2 columns by 4 rows.
const DOTS_X: usize = 2;
const DOTS_Y: usize = 4;

/// The bit of dot (x, y) within a Braille cell (U+2800 + bits).
fn dot_bit(x: usize, y: usize) -> u8 {
    const BITS: [[u8; 4]; 2] = [[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]];
    BITS[x][y]
}

/// A grid of Braille dots, each cell coloured by the last line that touched it.
struct Dots {
    width: usize,
    height: usize,
    cells: Vec<(u8, Option<Color>)>,
}

impl Dots {
    fn new(width: usize, height: usize) -> Dots {
        Dots {
            width,
            height,
            cells: vec![(0, None); width * height],
        }
    }

    /// Dots (x, y_from..=y_to) in one dot column, a Braille cell row at a time.
    fn column(&mut self, x: i64, y_from: i64, y_to: i64, color: Color) {
        let h = (self.height * DOTS_Y) as i64;
        if !(0..(self.width * DOTS_X) as i64).contains(&x) {
            return;
        }
        let (from, to) = (y_from.max(0), y_to.min(h - 1));
        if from > to {
            return;
        }
        let (x, from, to) = (x as usize, from as usize, to as usize);
        for row in from / DOTS_Y..=to / DOTS_Y {
            let top = (row * DOTS_Y).max(from) - row * DOTS_Y;
            let bottom = ((row + 1) * DOTS_Y - 1).min(to) - row * DOTS_Y;
            let bits = (top..=bottom).fold(0, |bits, y| bits | dot_bit(x % DOTS_X, y));
            let cell = &mut self.cells[row * self.width + x / DOTS_X];
            cell.0 |= bits;
            cell.1 = Some(color);
        }
    }

    /// A connected line between two dots, drawn as one vertical run per dot column: a noisy series
    /// is mostly steep segments, and a run costs one update per cell instead of one per dot.
    fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), color: Color) {
        let ((x0, y0), (x1, y1)) = if x0 <= x1 {
            ((x0, y0), (x1, y1))
        } else {
            ((x1, y1), (x0, y0))
        };
        if x0 == x1 {
            self.column(x0, y0.min(y1), y0.max(y1), color);
            return;
        }
        let slope = (y1 - y0) as f64 / (x1 - x0) as f64;
        let y_at = |x: f64| nearest(y0 as f64 + slope * (x - x0 as f64));
        for x in x0..=x1 {
            if slope.abs() <= 1.0 {
                let y = y_at(x as f64);
                self.column(x, y, y, color);
                continue;
            }
            // The run from where the line enters this column to just before the next one's.
            let enter = y_at((x as f64 - 0.5).max(x0 as f64));
            let mut leave = y_at((x as f64 + 0.5).min(x1 as f64));
            if x < x1 {
                leave -= (leave - enter).signum();
            }
            self.column(x, enter.min(leave), enter.max(leave), color);
        }
    }
}

/// Whether none of `lines` has a reading in the view's window.
pub fn is_empty(lines: &[Line], view: &View) -> bool {
    let w = view.window;
    lines
        .iter()
        .all(|l| l.series.window_iter(w.from, w.to).next().is_none())
}

/// The least height a chart is drawn in beside a table of figures.
const MIN_HEIGHT: u16 = 3;

/// `area` split into a chart over a table of `rows` lines, its header first: the chart keeps its least height and
/// the table takes what is left, nothing where that would be its header alone.
pub fn over_table(area: Rect, rows: u16) -> [Rect; 2] {
    let table = rows.min(area.height.saturating_sub(MIN_HEIGHT));
    let table = if table < 2 { 0 } else { table };
    Layout::vertical([Constraint::Min(0), Constraint::Length(table)]).areas(area)
}

/// The share of a chart's points its scale is set by when a few lie far above the rest.
const MOST: f64 = 0.95;
/// Points above this many times what most points reach make a chart scaled to them unreadable.
const FAR_ABOVE: f64 = 2.0;

/// Where a chart scaled to what most of its points reach cuts off the rest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OffChart {
    /// The chart's top.
    pub top: f64,
    /// At how many times a point lies above it, and the highest point.
    pub above: usize,
    pub max: f64,
}

/// A top for `lines` in the view's window set by what most of their points reach, when a few lie so far above them
/// (an epoch's end, a checkpoint) that a chart scaled to those would flatten every other point; `None` when the
/// highest point makes a readable scale.
pub fn scaled_to_most(lines: &[Line], view: &View) -> Option<OffChart> {
    let w = view.window;
    let mut values: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.series.window_iter(w.from, w.to).map(|(_, v)| v))
        .filter(|v| v.is_finite())
        .collect();
    let max = values.iter().copied().fold(0.0, f64::max);
    if values.is_empty() {
        return None;
    }
    let at = ((values.len() - 1) as f64 * MOST).round() as usize;
    let (_, most, _) = values.select_nth_unstable_by(at, f64::total_cmp);
    let top = *most * 1.1;
    if !(top > 0.0 && max > *most * FAR_ABOVE) {
        return None;
    }
    // Stacked lines put one point per line at each time: what goes off the chart is counted by its times.
    let mut above: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.series.window_iter(w.from, w.to))
        .filter(|&(_, v)| v > top)
        .map(|(t, _)| t)
        .collect();
    above.sort_by(f64::total_cmp);
    above.dedup();
    Some(OffChart {
        top,
        above: above.len(),
        max,
    })
}

/// What a chart without readings shows, wrapped within its area.
pub fn no_readings(frame: &mut Frame, area: Rect, view: &View) {
    fit::wrapped(
        frame,
        area,
        "no readings in this window yet".into(),
        view.muted(),
    );
}

/// Draws `lines` in `area`: a y axis with its top value, an x axis with the window's ends, and one
/// Braille line per series. `y_label` formats the top; `y_max` fixes it (else the data's max).
pub fn draw(
    frame: &mut Frame,
    area: Rect,
    view: &View,
    lines: &[Line],
    y_label: fn(f64) -> String,
    y_max: Option<f64>,
) {
    let w = view.window;
    let columns = area.width as usize;
    let points: Vec<(Color, Vec<(f64, f64)>)> = lines
        .iter()
        .map(|l| {
            (
                l.color,
                decimate(l.series.window_iter(w.from, w.to), w.from, w.to, columns),
            )
        })
        .collect();
    if points.iter().all(|(_, p)| p.is_empty()) {
        no_readings(frame, area, view);
        return;
    }
    let top = y_max.unwrap_or_else(|| {
        let max = points
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(_, v)| v))
            .fold(0.0, f64::max);
        if max > 0.0 { max * 1.1 } else { 1.0 }
    });
    let top_label = y_label(top);
    let gutter = top_label.chars().count().max(1) as u16 + 1;
    if area.width <= gutter + 2 || area.height < 3 {
        return;
    }
    let axis = Style::default().fg(view.theme.muted);
    let buf = frame.buffer_mut();
    let plot = Rect {
        x: area.x + gutter,
        y: area.y,
        width: area.width - gutter,
        height: area.height - 2,
    };
    buf.set_string(area.x, area.y, &top_label, axis);
    // On a plot one row high the zero would be written over the top's label (`000%` for 100%).
    if plot.height > 1 {
        buf.set_string(area.x, plot.y + plot.height - 1, "0", axis);
    }
    for y in plot.y..plot.y + plot.height {
        buf[(plot.x - 1, y)].set_char('│').set_style(axis);
    }
    let x_axis = plot.y + plot.height;
    for (i, cell) in cells_of_row(buf, plot.x - 1, x_axis, plot.width + 1)
        .iter_mut()
        .enumerate()
    {
        cell.set_char(if i == 0 { '└' } else { '─' })
            .set_style(axis);
    }
    let mut dots = Dots::new(plot.width as usize, plot.height as usize);
    let (dot_w, dot_h) = (
        (plot.width as usize * DOTS_X) as f64,
        (plot.height as usize * DOTS_Y) as f64,
    );
    let span = (w.to - w.from).max(f64::EPSILON);
    let dot_x = |t: f64| nearest((t - w.from).max(0.0) / span * (dot_w - 1.0));
    let to_dot = |(t, v): (f64, f64)| {
        let y = nearest((1.0 - (v / top).clamp(0.0, 1.0)) * (dot_h - 1.0));
        (dot_x(t), y)
    };
    // The axis's ends are the window's start and the clock's time within it, in the clock's whole seconds: the
    // range runs on to a round end, blank, past the time the header shows.
    let (left, right) = (format!("{:.0}s", w.from.floor()), format!("{:.0}s", w.end));
    buf.set_string(plot.x - 1, x_axis + 1, &left, axis);
    let end_x = plot.x + (dot_x(w.end) as u16 / DOTS_X as u16).min(plot.width - 1);
    let right_x = (end_x + 1).saturating_sub(right.chars().count() as u16);
    if right_x >= plot.x + left.chars().count() as u16 {
        buf.set_string(right_x, x_axis + 1, &right, axis);
    }

    for (color, series) in &points {
        let mut previous = None;
        for &point in series {
            let dot = to_dot(point);
            match previous {
                Some(p) => dots.line(p, dot, *color),
                None => dots.column(dot.0, dot.1, dot.1, *color),
            }
            previous = Some(dot);
        }
    }
    for (y, dot_row) in (plot.y..).zip(dots.cells.chunks(dots.width)) {
        for (cell, &(bits, color)) in cells_of_row(buf, plot.x, y, plot.width)
            .iter_mut()
            .zip(dot_row)
        {
            let (Some(color), true) = (color, bits != 0) else {
                continue;
            };
            if let Some(glyph) = char::from_u32(0x2800 + u32::from(bits)) {
                cell.set_char(glyph).set_fg(color);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braille_dots_and_lines() {
        let mut dots = Dots::new(2, 1);
        dots.line((0, 0), (3, 3), Color::Red);
        // A diagonal through the first cell's (0,0), (1,1) and the second's (0,2), (1,3).
        assert_eq!(dots.cells[0], (0x01 | 0x10, Some(Color::Red)));
        assert_eq!(dots.cells[1], (0x04 | 0x80, Some(Color::Red)));
        dots.column(99, 99, 99, Color::Blue);
        assert_eq!(dots.cells[1].1, Some(Color::Red));
    }

    #[test]
    fn steep_lines_are_connected_runs() {
        let mut dots = Dots::new(1, 2);
        dots.line((1, 7), (0, 0), Color::Red);
        // Column 0 takes the upper half of the rise, column 1 the lower, each dot once.
        assert_eq!(dots.cells[0].0, 0x01 | 0x02 | 0x04 | 0x40);
        assert_eq!(dots.cells[1].0, 0x08 | 0x10 | 0x20 | 0x80);
    }

    #[test]
    fn decimation_keeps_extremes_and_order() {
        let points: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (f64::from(i) / 100.0, f64::from(i % 97)))
            .collect();
        let kept = decimate(points.iter().copied(), 0.0, 100.0, 50);
        assert!(kept.len() <= 50 * POINTS_PER_COLUMN, "{}", kept.len());
        assert!(kept.windows(2).all(|w| w[0].0 <= w[1].0));
        let max = |p: &[(f64, f64)]| p.iter().map(|&(_, v)| v).fold(f64::MIN, f64::max);
        let min = |p: &[(f64, f64)]| p.iter().map(|&(_, v)| v).fold(f64::MAX, f64::min);
        assert_eq!((max(&kept), min(&kept)), (max(&points), min(&points)));
        let few = vec![(0.0, 1.0), (1.0, 2.0)];
        assert_eq!(decimate(few.iter().copied(), 0.0, 1.0, 50), few);
    }
}
