//! Frames onto a terminal with two buffers and no clearing between frames: ratatui's `Terminal::draw`
//! clears the buffer it will draw next and measures every cell's width while comparing frames; at
//! 200×60 both sweeps cost more than the panes on a machine whose caches the workers keep cold. The
//! views fill every cell anyway, so a frame is drawn over the one before last, and widths are looked
//! up only where a symbol may be wide.

use ratatui::backend::Backend;
use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use ratatui::{Frame, Terminal};

pub struct Screen<B: Backend> {
    terminal: Terminal<B>,
    /// What the terminal shows: the frame drawn last.
    shown: Buffer,
}

impl<B: Backend> Screen<B> {
    pub fn new(mut terminal: Terminal<B>) -> Result<Screen<B>, B::Error> {
        terminal.hide_cursor()?;
        terminal.clear()?;
        let shown = Buffer::empty(terminal.get_frame().area());
        Ok(Screen { terminal, shown })
    }

    /// Draws a frame. `render` must draw every cell: the buffer it gets holds an older frame.
    pub fn draw(&mut self, render: impl FnOnce(&mut Frame)) -> Result<(), B::Error> {
        render(&mut self.terminal.get_frame());
        let drawn = std::mem::take(self.terminal.current_buffer_mut());
        let changed = changed_cells(&self.shown, &drawn);
        let width = usize::from(drawn.area.width.max(1));
        let (x0, y0) = (drawn.area.x, drawn.area.y);
        let result = self.terminal.backend_mut().draw(changed.iter().map(|&i| {
            let (x, y) = (x0 + (i % width) as u16, y0 + (i / width) as u16);
            (x, y, &drawn.content[i])
        }));
        // The older frame becomes the next one to draw over.
        *self.terminal.current_buffer_mut() = std::mem::replace(&mut self.shown, drawn);
        result?;
        self.terminal.backend_mut().flush()
    }

    /// A new size: the terminal is cleared and the next frame drawn whole.
    pub fn resize(&mut self, area: Rect) -> Result<(), B::Error> {
        self.terminal.resize(area)?;
        self.shown = Buffer::empty(area);
        self.terminal.current_buffer_mut().resize(area);
        Ok(())
    }
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

/// The indices of the cells of `next` to send for the terminal to show it instead of `shown`, in
/// order: ratatui's `BufferDiff` rules (cells a wide symbol covers are not sent; the columns a wide
/// symbol no longer covers are), with equal cells passed over before any width is measured.
fn changed_cells(shown: &Buffer, next: &Buffer) -> Vec<usize> {
    if shown.area != next.area {
        return (0..next.content.len()).collect();
    }
    let (len, mut changed, mut pos) = (next.content.len(), Vec::new(), 0);
    while pos < len {
        let i = pos;
        pos += 1;
        let (now, before) = (&next.content[i], &shown.content[i]);
        let width = match now.diff_option {
            CellDiffOption::Skip => continue,
            CellDiffOption::ForcedWidth(width) => {
                pos += usize::from(width.get()) - 1;
                if now != before {
                    changed.push(i);
                }
                continue;
            }
            CellDiffOption::None if now == before => {
                pos += columns(now) - 1;
                continue;
            }
            CellDiffOption::None | CellDiffOption::AlwaysUpdate => columns(now),
        };
        changed.push(i);
        let was = columns(before);
        // Terminals may leave a wide emoji's second column stale, and a narrow symbol over a wide
        // one leaves the columns it no longer covers showing the old style.
        let trailing = if width > 1 && now.symbol().contains('\u{fe0f}') {
            Some((i + width, false))
        } else if width > 1 {
            pos += width - 1;
            None
        } else if was > width
            && (before.bg != Color::Reset || before.modifier.intersects(VISIBLE_ON_BLANK))
        {
            Some((i + was, true))
        } else {
            None
        };
        if let Some((end, force)) = trailing {
            let mut end = end.min(len);
            while pos < end {
                let j = pos;
                pos += columns(&next.content[j]).max(1);
                end = end.max(pos).min(len);
                let cell = &next.content[j];
                if cell.diff_option != CellDiffOption::Skip
                    && (force || shown.content[j].symbol() != cell.symbol())
                {
                    changed.push(j);
                }
            }
            pos = end;
        }
    }
    changed
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

    /// Draws `rows` over every cell of the frame.
    fn draw_rows(frame: &mut Frame, rows: &[(&str, Style)]) {
        let area = frame.area();
        let buf = frame.buffer_mut();
        for (y, (text, style)) in (0u16..).zip(rows) {
            for x in 0..area.width {
                buf[(x, y)] = Cell::EMPTY;
            }
            buf.set_style(Rect::new(0, y, area.width, 1), *style);
            buf.set_string(0, y, text, *style);
        }
    }

    #[test]
    fn the_terminal_shows_what_ratatui_would_show() {
        let mut screen = Screen::new(Terminal::new(TestBackend::new(10, 3)).unwrap()).unwrap();
        let mut reference = Terminal::new(TestBackend::new(10, 3)).unwrap();
        for rows in frames() {
            screen.draw(|frame| draw_rows(frame, &rows)).unwrap();
            reference.draw(|frame| draw_rows(frame, &rows)).unwrap();
            assert_eq!(
                screen.terminal.backend().buffer(),
                reference.backend().buffer(),
                "{rows:?}"
            );
        }
    }

    #[test]
    fn unchanged_cells_are_not_sent_and_a_resize_redraws_everything() {
        let mut screen = Screen::new(Terminal::new(TestBackend::new(8, 2)).unwrap()).unwrap();
        let draw = |screen: &mut Screen<TestBackend>, text: &str| {
            screen
                .draw(|frame| {
                    let area = frame.area();
                    for cell in &mut frame.buffer_mut().content {
                        *cell = Cell::EMPTY;
                    }
                    frame
                        .buffer_mut()
                        .set_string(area.x, area.y, text, Style::default());
                })
                .unwrap();
        };
        draw(&mut screen, "abc");
        let first = Buffer::with_lines(["abc     ", "        "]);
        assert_eq!(screen.terminal.backend().buffer(), &first);
        assert_eq!(changed_cells(&first, &first), Vec::<usize>::new());
        let next = Buffer::with_lines(["abd     ", "        "]);
        assert_eq!(changed_cells(&first, &next), vec![2]);

        screen.terminal.backend_mut().resize(6, 3);
        screen.resize(Rect::new(0, 0, 6, 3)).unwrap();
        draw(&mut screen, "xyz");
        assert_eq!(
            screen.terminal.backend().buffer(),
            &Buffer::with_lines(["xyz   ", "      ", "      "])
        );
    }
}
