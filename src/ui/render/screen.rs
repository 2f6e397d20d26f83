//! Frames onto a terminal, redrawn in place: ratatui's `Terminal::draw` clears a buffer, has the
//! whole screen drawn into it and compares every cell with the last frame, measuring each one's
//! width, and at 200×60 on a machine whose caches the workers keep cold those sweeps cost more than
//! the panes. Here the buffer keeps the last frame, the view redraws only the areas that changed,
//! and only those are compared, with widths looked up only where a symbol may be wide.

use std::ops::Range;

use ratatui::backend::Backend;
use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use ratatui::{Frame, Terminal};

use super::plain;

pub struct Screen<B: Backend> {
    terminal: Terminal<B>,
    /// What the terminal shows. The buffer drawn into holds the same between frames.
    shown: Buffer,
}

impl<B: Backend> Screen<B> {
    pub fn new(mut terminal: Terminal<B>) -> Result<Screen<B>, B::Error> {
        terminal.hide_cursor()?;
        terminal.clear()?;
        let shown = Buffer::empty(terminal.get_frame().area());
        Ok(Screen { terminal, shown })
    }

    /// Draws a frame over the last one. `render` returns the areas it drew, every cell of them:
    /// only those are compared and sent. After a resize it must draw the whole frame.
    pub fn draw(&mut self, render: impl FnOnce(&mut Frame) -> Vec<Rect>) -> Result<(), B::Error> {
        if plain() {
            return self
                .terminal
                .draw(|frame| {
                    render(frame);
                })
                .map(|_| ());
        }
        let drawn = render(&mut self.terminal.get_frame());
        let next = std::mem::take(self.terminal.current_buffer_mut());
        let changed = changed_cells(&self.shown, &next, &segments(next.area, &drawn));
        let width = usize::from(next.area.width.max(1));
        let (x0, y0) = (next.area.x, next.area.y);
        let result = self
            .terminal
            .backend_mut()
            .draw(changed.send.iter().map(|&i| {
                let (x, y) = (x0 + (i % width) as u16, y0 + (i / width) as u16);
                (x, y, &next.content[i])
            }));
        if self.shown.area != next.area {
            self.shown = next.clone();
        }
        for &i in &changed.differ {
            self.shown.content[i].clone_from(&next.content[i]);
        }
        *self.terminal.current_buffer_mut() = next;
        result?;
        self.terminal.backend_mut().flush()
    }

    /// Shows the cursor again and lets the terminal go. Where it is gone (a hang-up closed it), ratatui's own drop
    /// would report the failure on a stderr that is gone too, which panics: it is forgotten instead.
    pub fn close(self) {
        let Screen { mut terminal, .. } = self;
        if terminal.show_cursor().is_err() {
            std::mem::forget(terminal);
        }
    }

    pub fn backend(&self) -> &B {
        self.terminal.backend()
    }

    /// A new size: the terminal is cleared, and the next frame must be drawn whole.
    pub fn resize(&mut self, area: Rect) -> Result<(), B::Error> {
        self.terminal.resize(area)?;
        self.shown = Buffer::empty(area);
        Ok(())
    }
}

/// The rows of `areas` within `screen`, as ranges of cell indices.
fn segments(screen: Rect, areas: &[Rect]) -> Vec<Range<usize>> {
    let width = usize::from(screen.width);
    areas
        .iter()
        .map(|a| a.intersection(screen))
        .filter(|a| !a.is_empty())
        .flat_map(|a| {
            (a.top()..a.bottom()).map(move |y| {
                let start = usize::from(y - screen.y) * width + usize::from(a.x - screen.x);
                start..start + usize::from(a.width)
            })
        })
        .collect()
}

/// How many columns a cell's symbol takes: box drawing, blocks, Braille and single bytes without
/// a lookup.
fn columns(cell: &Cell) -> usize {
    let symbol = cell.symbol();
    let mut chars = symbol.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None)
            if c.is_ascii()
                || ('\u{2500}'..='\u{259f}').contains(&c)
                || ('\u{2800}'..='\u{28ff}').contains(&c) =>
        {
            1
        }
        _ => usize::from(symbol.cell_width()),
    }
}

/// Modifiers that show on a blank cell.
const VISIBLE_ON_BLANK: Modifier = Modifier::REVERSED
    .union(Modifier::UNDERLINED)
    .union(Modifier::SLOW_BLINK)
    .union(Modifier::RAPID_BLINK)
    .union(Modifier::CROSSED_OUT);

/// The cells of `next` that the terminal must be sent to show it instead of `shown` (`send`, in
/// order), and those that differ from `shown` (`differ`), within `segments`. What is sent follows
/// ratatui's `BufferDiff`: cells a wide symbol covers are not sent, the columns a wide symbol no
/// longer covers are; equal cells are passed over before any width is measured.
fn changed_cells(shown: &Buffer, next: &Buffer, segments: &[Range<usize>]) -> Changed {
    let mut changed = Changed::default();
    if shown.area != next.area {
        changed.send = (0..next.content.len()).collect();
        return changed;
    }
    for segment in segments {
        let len = segment.end.min(next.content.len());
        let mut pos = segment.start;
        while pos < len {
            let i = pos;
            pos += 1;
            let (now, before) = (&next.content[i], &shown.content[i]);
            let width = match now.diff_option {
                CellDiffOption::Skip => continue,
                CellDiffOption::ForcedWidth(width) => {
                    pos = changed.cover(shown, next, pos, pos + usize::from(width.get()) - 1, len);
                    if now != before {
                        changed.send.push(i);
                        changed.differ.push(i);
                    }
                    continue;
                }
                CellDiffOption::None if now == before => {
                    pos = changed.cover(shown, next, pos, pos + columns(now) - 1, len);
                    continue;
                }
                CellDiffOption::None | CellDiffOption::AlwaysUpdate => columns(now),
            };
            changed.send.push(i);
            if now != before {
                changed.differ.push(i);
            }
            let was = columns(before);
            // Terminals may leave a wide emoji's second column stale, and a narrow symbol over a
            // wide one leaves the columns it no longer covers showing the old style.
            if width > 1 && now.symbol().contains('\u{fe0f}') {
                pos = changed.trailing(shown, next, pos, i + width, len, false);
            } else if width > 1 {
                pos = changed.cover(shown, next, pos, pos + width - 1, len);
            } else if was > width
                && (before.bg != Color::Reset || before.modifier.intersects(VISIBLE_ON_BLANK))
            {
                pos = changed.trailing(shown, next, pos, i + was, len, true);
            }
        }
    }
    changed
}

#[derive(Default)]
struct Changed {
    send: Vec<usize>,
    differ: Vec<usize>,
}

impl Changed {
    /// Cells `from..to` that a wide symbol covers: not sent, kept in step when they differ.
    /// Returns where to go on.
    fn cover(
        &mut self,
        shown: &Buffer,
        next: &Buffer,
        from: usize,
        to: usize,
        len: usize,
    ) -> usize {
        let to = to.min(len);
        self.differ
            .extend((from..to).filter(|&j| next.content[j] != shown.content[j]));
        to
    }

    /// The columns after a wide symbol, up to `end`: sent when forced or when their symbol
    /// changed. Returns where to go on.
    fn trailing(
        &mut self,
        shown: &Buffer,
        next: &Buffer,
        from: usize,
        end: usize,
        len: usize,
        force: bool,
    ) -> usize {
        let (mut pos, mut end) = (from, end.min(len));
        while pos < end {
            let j = pos;
            pos += columns(&next.content[j]).max(1);
            end = end.max(pos).min(len);
            let (now, before) = (&next.content[j], &shown.content[j]);
            if now != before {
                self.differ.push(j);
            }
            if now.diff_option != CellDiffOption::Skip && (force || before.symbol() != now.symbol())
            {
                self.send.push(j);
            }
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::style::Style;

    /// The frames a view might draw in turn, every cell drawn each time.
    fn frames() -> Vec<Vec<(&'static str, Style)>> {
        let plain = Style::default().fg(Color::White).bg(Color::Black);
        let red = Style::default().fg(Color::Red).bg(Color::Black);
        vec![
            vec![
                ("╭─ golow ─╮", plain),
                ("│⠁⠃⠇ 1.2 │", red),
                ("╰────────╯", plain),
            ],
            vec![
                ("╭─ golow ─╮", plain),
                ("│⠁⠃⠇ 1.3 │", red),
                ("╰────────╯", plain),
            ],
            vec![
                ("日本 wide ", plain),
                ("│⠁⠃⠇ 1.3 │", plain),
                ("emoji ⚡ x", red),
            ],
            vec![
                ("x日本 wide", plain),
                ("         ", plain),
                ("narrow now", red),
            ],
            vec![
                ("╭─ golow ─╮", plain),
                ("│⠁⠃⠇ 1.2 │", red),
                ("╰────────╯", plain),
            ],
        ]
    }

    /// Draws `rows` over every cell of the rows they cover.
    fn draw_rows(frame: &mut Frame, rows: &[(&str, Style)]) -> Vec<Rect> {
        let area = frame.area();
        let buf = frame.buffer_mut();
        for (y, (text, style)) in (0u16..).zip(rows) {
            for x in 0..area.width {
                buf[(x, y)] = Cell::EMPTY;
            }
            buf.set_style(Rect::new(0, y, area.width, 1), *style);
            buf.set_string(0, y, text, *style);
        }
        vec![area]
    }

    #[test]
    fn the_terminal_shows_what_ratatui_would_show() {
        let mut screen = Screen::new(Terminal::new(TestBackend::new(10, 3)).unwrap()).unwrap();
        let mut reference = Terminal::new(TestBackend::new(10, 3)).unwrap();
        for rows in frames() {
            screen.draw(|frame| draw_rows(frame, &rows)).unwrap();
            reference
                .draw(|frame| {
                    draw_rows(frame, &rows);
                })
                .unwrap();
            assert_eq!(
                screen.terminal.backend().buffer(),
                reference.backend().buffer(),
                "{rows:?}"
            );
        }
    }

    #[test]
    fn only_the_areas_drawn_are_compared_and_sent() {
        // Ratatui's own drawing sends whole frames: nothing here to hold it to.
        if super::super::plain() {
            return;
        }
        let mut screen = Screen::new(Terminal::new(TestBackend::new(8, 2)).unwrap()).unwrap();
        let write = |screen: &mut Screen<TestBackend>, y: u16, text: &str| {
            screen
                .draw(|frame| {
                    let row = Rect::new(0, y, 8, 1);
                    for x in 0..8 {
                        frame.buffer_mut()[(x, y)] = Cell::EMPTY;
                    }
                    frame.buffer_mut().set_string(0, y, text, Style::default());
                    vec![row]
                })
                .unwrap();
        };
        write(&mut screen, 0, "abc");
        write(&mut screen, 1, "xyz");
        write(&mut screen, 0, "abd");
        let shown = Buffer::with_lines(["abd     ", "xyz     "]);
        assert_eq!(screen.terminal.backend().buffer(), &shown);
        assert_eq!(screen.shown, shown);

        let everything = segments(shown.area, &[shown.area]);
        assert!(changed_cells(&shown, &shown, &everything).send.is_empty());
        let next = Buffer::with_lines(["abe     ", "xyz!    "]);
        let changed = changed_cells(&shown, &next, &everything);
        assert_eq!((changed.send, changed.differ), (vec![2, 11], vec![2, 11]));
        let first_row = segments(shown.area, &[Rect::new(0, 0, 8, 1)]);
        assert_eq!(changed_cells(&shown, &next, &first_row).send, vec![2]);

        screen.terminal.backend_mut().resize(6, 3);
        screen.resize(Rect::new(0, 0, 6, 3)).unwrap();
        screen
            .draw(|frame| {
                let area = frame.area();
                for cell in &mut frame.buffer_mut().content {
                    *cell = Cell::EMPTY;
                }
                frame.buffer_mut().set_string(0, 0, "new", Style::default());
                vec![area]
            })
            .unwrap();
        assert_eq!(
            screen.terminal.backend().buffer(),
            &Buffer::with_lines(["new   ", "      ", "      "])
        );
    }
}
