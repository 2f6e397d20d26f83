//! Rows of text drawn the way `Paragraph` draws unwrapped, left-aligned lines, a cell per character
//! where every character is a narrow symbol of its own: the panes' tables redraw every frame, and
//! `Paragraph` segments each of them into graphemes and measures each one, a seventh of a frame.

use ratatui::Frame;
use ratatui::buffer::{Buffer, CellWidth};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::cells::{cells_of_row, fill};
use super::plain;

/// A character that is a grapheme and one cell on its own, whatever surrounds it: printable ASCII,
/// Latin, punctuation, arrows, maths, box drawing, blocks and shapes. Combining marks, joiners,
/// variation selectors, regional indicators and wide characters are not, and take ratatui's path.
fn stands_alone(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    matches!(c, '\u{a0}'..='\u{2ff}' | '\u{2010}'..='\u{2027}' | '\u{2030}'..='\u{205e}' | '\u{2190}'..='\u{2bff}')
        && c.encode_utf8(&mut [0; 4]).cell_width() == 1
}

/// Draws `lines` into `area`, one per row from the top, each cut at the area's width.
pub fn lines(frame: &mut Frame, area: Rect, lines: &[Line]) {
    let area = area.intersection(frame.area());
    for (line, y) in lines.iter().zip(area.top()..area.bottom()) {
        let row = Rect {
            y,
            height: 1,
            ..area
        };
        let simple = !plain()
            && line.alignment.is_none()
            && line
                .spans
                .iter()
                .all(|span| span.content.chars().all(stands_alone));
        if simple {
            line_of_cells(frame.buffer_mut(), row, line);
        } else {
            frame.render_widget(Paragraph::new(line.clone()), row);
        }
    }
}

/// `lines` on `area` blanked in `style` (a `Paragraph` with that style, drawn on a cleared area).
pub fn styled_lines(frame: &mut Frame, area: Rect, style: Style, text: &[Line]) {
    fill(frame.buffer_mut(), area, style);
    lines(frame, area, text);
}

fn line_of_cells(buf: &mut Buffer, row: Rect, line: &Line) {
    let mut cells = cells_of_row(buf, row.x, row.y, row.width).iter_mut();
    for span in &line.spans {
        let style = line.style.patch(span.style);
        for (c, cell) in span.content.chars().zip(cells.by_ref()) {
            cell.set_char(c).set_style(style);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::style::{Color, Modifier};
    use ratatui::text::Span;

    fn drawn(width: u16, draw: impl FnOnce(&mut Frame)) -> Buffer {
        let mut terminal = Terminal::new(TestBackend::new(width, 4)).unwrap();
        let mut draw = Some(draw);
        terminal
            .draw(|frame| {
                let all = frame.area();
                frame
                    .buffer_mut()
                    .set_style(all, Style::default().bg(Color::Blue));
                (draw.take().unwrap())(frame);
            })
            .unwrap();
        terminal.backend().buffer().clone()
    }

    #[test]
    fn the_same_cells_as_a_paragraph() {
        let red = Style::default().fg(Color::Red).add_modifier(Modifier::BOLD);
        let cases: Vec<Vec<Line>> = vec![
            vec![Line::from("plain ascii")],
            vec![
                Line::from(vec![
                    Span::styled("libtorch    ", red),
                    Span::raw(" 1.23 ms"),
                ]),
                Line::styled(
                    "a whole line in one style",
                    Style::default().fg(Color::Green),
                ),
            ],
            vec![Line::from(
                "cut at the edge of the area, far beyond its width",
            )],
            vec![Line::from("─ · ● — … × ↑↓ ≥ ╭╮ ▏ é ß")],
            vec![Line::from("wide 日本語 and emoji ⚡ 🇺🇸 e\u{301} tab\there")],
            vec![
                Line::from("right").right_aligned(),
                Line::from("centre").centered(),
            ],
            vec![
                Line::from("more lines"),
                Line::from("than"),
                Line::from("rows"),
                Line::from("in"),
                Line::from("the area"),
            ],
        ];
        for case in cases {
            for width in [3, 12, 40] {
                let area = Rect::new(1, 1, width, 3);
                let ours = drawn(48, |frame| lines(frame, area, &case));
                let theirs = drawn(48, |frame| {
                    frame.render_widget(Paragraph::new(case.clone()), area);
                });
                assert_eq!(ours, theirs, "{case:?} in {width} columns");
            }
        }
    }
}
