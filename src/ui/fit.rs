//! Text fitted to the room it is drawn in, so that no word is ever cut at an edge: a title takes the longest of its
//! forms that fits, a line drops its last " · " clauses and then its last words (marking with "…" where words went),
//! a table drops its last columns whole, and a name that is data (a kernel's, a file's) is cut with "…". What is
//! fitted keeps one column from the right edge, so text that meets a border or the screen's edge was cut, and the
//! snapshot tests say so.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::render;

/// What separates a line's clauses: the last clause is the first to go.
pub const CLAUSE: &str = " · ";

/// What marks words left out.
const MORE: char = '…';

/// The columns text may take in an area `width` wide: one is kept from its right edge.
pub fn room(width: u16) -> usize {
    usize::from(width).saturating_sub(1)
}

/// `title` on a border `width` wide, a border cell left on either side of it and one before the right corner: whole
/// if it fits, else what comes before its parenthesis, else before its colon, else its words that fit and "…".
pub fn title(title: &str, width: u16) -> String {
    let room = usize::from(width).saturating_sub(3);
    let shorter = |at: &str| title.find(at).map(|i| format!("{} ", &title[..i]));
    let forms = [Some(title.to_string()), shorter(" ("), shorter(":")];
    if let Some(form) = forms
        .into_iter()
        .flatten()
        .find(|f| f.chars().count() <= room)
    {
        return form;
    }
    let words = plain(&line(&Line::raw(title.trim_end()), room.saturating_sub(1)));
    if words.is_empty() {
        words
    } else {
        format!("{words} ")
    }
}

/// `text` in at most `width` columns: cut with "…" when longer. For names, which are data; labels are chosen to fit.
pub fn name(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    if width > 0 {
        cut.push(MORE);
    }
    cut
}

/// `text` in at most `width` columns, cut from the left with "…" when longer: for paths, whose end names them.
pub fn tail(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_string();
    }
    let kept: String = text.chars().skip(count + 1 - width.max(1)).collect();
    if width == 0 {
        String::new()
    } else {
        format!("{MORE}{kept}")
    }
}

/// The characters of `line`, unstyled.
fn plain(line: &Line) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

/// `line` in at most `width` columns: whole only if it fits; else without its last " · " clauses, down to the first;
/// and where the first alone is too wide, its words up to the last that fits, and "…".
pub fn line<'a>(line: &Line<'a>, width: usize) -> Line<'a> {
    let text = plain(line);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return line.clone();
    }
    let clause: Vec<char> = CLAUSE.chars().collect();
    let clause_ends: Vec<usize> = (1..chars.len())
        .filter(|&i| chars[i..].starts_with(&clause))
        .collect();
    if let Some(&end) = clause_ends.iter().rev().find(|&&end| end <= width) {
        return truncated(line, end, false);
    }
    // Words: cut before a space, leaving room for the mark, without a separator left hanging.
    let words_end = (1..width.min(chars.len()))
        .rev()
        .find(|&i| chars[i] == ' ' && chars[i - 1] != ' ')
        .map(|i| {
            let mut end = i;
            while end > 0 && " ·,;:—–-".contains(chars[end - 1]) {
                end -= 1;
            }
            end
        })
        .filter(|&end| end > 0);
    match words_end {
        Some(end) => truncated(line, end, true),
        None => truncated(line, width.saturating_sub(1), width > 0),
    }
}

/// The first `end` characters of `line`, in their styles, with the mark after them if `mark`.
fn truncated<'a>(line: &Line<'a>, end: usize, mark: bool) -> Line<'a> {
    let mut left = end;
    let mut spans = Vec::new();
    let mut last_style = Style::default();
    for span in &line.spans {
        if left == 0 {
            break;
        }
        let count = span.content.chars().count();
        last_style = span.style;
        if count <= left {
            spans.push(span.clone());
            left -= count;
        } else {
            let kept: String = span.content.chars().take(left).collect();
            spans.push(Span::styled(kept, span.style));
            left = 0;
        }
    }
    if mark {
        spans.push(Span::styled(MORE.to_string(), last_style));
    }
    Line {
        spans,
        style: line.style,
        alignment: line.alignment,
    }
}

/// Draws `lines` into `area`, each fitted to its room.
pub fn lines(frame: &mut Frame, area: Rect, lines: &[Line]) {
    let room = room(area.width);
    let fitted: Vec<Line> = lines.iter().map(|l| line(l, room)).collect();
    render::lines(frame, area, &fitted);
}

/// Draws `text`, words wrapped within `area` less the column kept from its right edge, in `style`.
pub fn wrapped(frame: &mut Frame, area: Rect, text: String, style: Style) {
    let room = Rect {
        width: area.width.saturating_sub(1),
        ..area
    };
    frame.render_widget(
        Paragraph::new(text).style(style).wrap(Wrap { trim: true }),
        room,
    );
}

/// `tables`, each a header and its rows, one under another in `height` lines: each as many rows as fit, and a table
/// with no room for a row under its header left out.
pub fn tables<'a>(tables: Vec<Vec<Line<'a>>>, height: usize) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    for table in tables {
        let left = height.saturating_sub(lines.len());
        if left >= 2 {
            lines.extend(table.into_iter().take(left));
        }
    }
    lines
}

/// How many of a table's columns, `widths` wide each and set one after another from the left, fit in `room`
/// columns: the others are left out whole, in the header and every row alike.
pub fn columns(widths: &[usize], room: usize) -> usize {
    let mut used = 0;
    widths
        .iter()
        .take_while(|&&w| {
            used += w;
            used <= room
        })
        .count()
}

/// A table of names, `before` columns in, then columns `widths` wide each after a space, in `room` columns: how wide
/// its names are set and how many of its columns fit. The columns fit from the left while the names keep
/// `least_name`; the names take what the columns leave, up to `longest`.
pub fn named_columns(
    room: usize,
    before: usize,
    widths: &[usize],
    (least_name, longest): (usize, usize),
) -> (usize, usize) {
    let spaced: Vec<usize> = widths.iter().map(|w| w + 1).collect();
    let shown = columns(&spaced, room.saturating_sub(before + least_name));
    let cells: usize = spaced[..shown].iter().sum();
    let name_width = room.saturating_sub(before + cells).min(longest);
    (name_width, shown)
}

/// `cells` right-aligned each in its width after a space, as many as fit in `room` columns.
pub fn cells<S: AsRef<str>>(widths: &[usize], cells: &[S], room: usize) -> String {
    let shown = columns(&widths.iter().map(|w| w + 1).collect::<Vec<_>>(), room);
    cells
        .iter()
        .zip(widths)
        .take(shown)
        .map(|(cell, &width)| format!(" {:>width$}", cell.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fitted(text: &str, width: usize) -> String {
        plain(&line(&Line::raw(text.to_string()), width))
    }

    #[test]
    fn a_line_drops_whole_clauses_from_its_end() {
        let text = "3 profiled steps · operators explain 38% of 18.1 ms compute · looking +0.1%";
        assert_eq!(fitted(text, 200), text);
        assert_eq!(
            fitted(text, 70),
            "3 profiled steps · operators explain 38% of 18.1 ms compute"
        );
        assert_eq!(fitted(text, 30), "3 profiled steps");
    }

    #[test]
    fn a_clause_too_long_alone_keeps_its_whole_words_and_says_more_was_there() {
        assert_eq!(
            fitted("operators explain 38% of 18.1 ms compute", 24),
            "operators explain 38%…"
        );
        // No separator is left hanging before the mark.
        assert_eq!(fitted("load 1.10, busy 42%", 12), "load 1.10…");
        // One word longer than the room is cut, and marked.
        assert_eq!(fitted("recordings/session.golow", 8), "recordi…");
    }

    #[test]
    fn a_cut_keeps_each_parts_style() {
        let bold = Style::default().add_modifier(ratatui::style::Modifier::BOLD);
        let line = Line::from(vec![
            Span::styled("libtorch ", bold),
            Span::raw("busy 66.4% · copy 32.3%"),
        ]);
        let cut = super::line(&line, 22);
        assert_eq!(plain(&cut), "libtorch busy 66.4%");
        assert_eq!(cut.spans[0].style, bold);
    }

    #[test]
    fn a_title_too_long_gives_up_its_parenthesis_then_what_follows_its_colon() {
        let title = " memory: host RSS and GPU (NVML) ";
        assert_eq!(super::title(title, 40), title);
        assert_eq!(super::title(title, 30), " memory: host RSS and GPU ");
        assert_eq!(super::title(title, 28), " memory ");
        assert_eq!(
            super::title(" host→device copy per step ", 20),
            " host→device… "
        );
        assert_eq!(super::title(title, 5), "… ");
    }

    #[test]
    fn a_table_leaves_out_whole_columns() {
        let widths = [7, 7, 7];
        assert_eq!(
            cells(&widths, &["1", "2", "3"], 24),
            "       1       2       3"
        );
        assert_eq!(cells(&widths, &["1", "2", "3"], 23), "       1       2");
        assert_eq!(cells(&widths, &["1", "2", "3"], 7), "");
    }

    #[test]
    fn tables_keep_a_row_under_each_header_or_are_left_out() {
        let table = |rows: &[&str]| rows.iter().map(|r| Line::raw(r.to_string())).collect();
        let shown = |height| -> Vec<String> {
            tables(vec![table(&["A", "a1", "a2"]), table(&["B", "b1"])], height)
                .iter()
                .map(plain)
                .collect()
        };
        assert_eq!(shown(5), ["A", "a1", "a2", "B", "b1"]);
        assert_eq!(shown(4), ["A", "a1", "a2"]);
        assert_eq!(shown(2), ["A", "a1"]);
        assert!(shown(1).is_empty());
    }

    #[test]
    fn a_named_table_keeps_its_names_least_width_before_a_column() {
        let widths = [8, 8];
        // Room for both columns and the longest name.
        assert_eq!(named_columns(40, 2, &widths, (10, 20)), (20, 2));
        // Both columns, and the names what they leave.
        assert_eq!(named_columns(30, 2, &widths, (10, 20)), (10, 2));
        // One column less rather than names under their least width.
        assert_eq!(named_columns(29, 2, &widths, (10, 20)), (18, 1));
    }

    #[test]
    fn names_and_paths_are_cut_with_a_mark() {
        assert_eq!(
            name("cudnn::bn_fw_inf_1C11_kernel_NCHW", 12),
            "cudnn::bn_f…"
        );
        assert_eq!(name("short", 12), "short");
        assert_eq!(
            tail("recordings/20261126-h200-copies.golow", 16),
            "…00-copies.golow"
        );
    }
}
