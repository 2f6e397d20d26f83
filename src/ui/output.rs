//! The output overlay (`o`): what one worker printed, stdout and stderr interleaved as they came, scrollable; the
//! latest `OUTPUT_TAIL_LINES` of each worker are at hand (the recording keeps every line).

use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use golow_protocol::event::Stream;

use super::render::fill;
use super::view::View;

/// Lines PgUp and PgDn move.
const PAGE: usize = 10;

/// The overlay while open: whose output, and how many lines back from the latest it is scrolled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputOverlay {
    worker: usize,
    back: usize,
}

impl OutputOverlay {
    /// Takes a key while the overlay is open; false when the key closes it.
    pub fn on_key(&mut self, code: KeyCode, workers: usize) -> bool {
        match code {
            KeyCode::Esc | KeyCode::Char('o') => return false,
            KeyCode::Up => self.back = self.back.saturating_add(1),
            KeyCode::Down => self.back = self.back.saturating_sub(1),
            KeyCode::PageUp => self.back = self.back.saturating_add(PAGE),
            KeyCode::PageDown => self.back = self.back.saturating_sub(PAGE),
            KeyCode::Home => self.back = usize::MAX,
            KeyCode::End => self.back = 0,
            KeyCode::Left | KeyCode::Right if workers > 0 => {
                let step = if code == KeyCode::Left {
                    workers - 1
                } else {
                    1
                };
                self.worker = (self.worker + step) % workers;
                self.back = 0;
            }
            _ => {}
        }
        true
    }

    /// Draws the overlay over `area`, leaving a margin of the view around it.
    pub fn draw(&self, frame: &mut Frame, area: Rect, view: &View) {
        let rect = Rect {
            x: area.x + area.width.min(2),
            y: area.y + area.height.min(2),
            width: area.width.saturating_sub(4),
            height: area.height.saturating_sub(4),
        };
        fill(
            frame.buffer_mut(),
            rect,
            view.text().bg(view.theme.background),
        );
        let workers = &view.state.workers;
        let Some(worker) = workers.get(self.worker.min(workers.len().saturating_sub(1))) else {
            let inner = view.framed(frame, rect, " output ");
            frame.render_widget(Paragraph::new("no worker yet"), inner);
            return;
        };
        let lines = &worker.output_tail;
        let visible = usize::from(rect.height.saturating_sub(2));
        let back = self.back.min(lines.len().saturating_sub(visible));
        let end = lines.len() - back;
        let start = end.saturating_sub(visible);
        let scrolled = if back > 0 {
            format!(", {back} back")
        } else {
            String::new()
        };
        let title = format!(
            " {} output ({} lines{scrolled}) · ↑/↓ PgUp/PgDn scroll · ←/→ worker · o close ",
            golow_protocol::text::printable(&worker.name),
            lines.len()
        );
        let inner = view.framed(frame, rect, &title);
        let text: Vec<Line> = if lines.is_empty() {
            vec![Line::styled("nothing printed yet", view.muted())]
        } else {
            lines
                .range(start..end)
                .map(|(stream, line)| {
                    let style = match stream {
                        Stream::Stderr => Style::default().fg(view.theme.warning),
                        Stream::Stdout => view.text(),
                    };
                    Line::styled(golow_protocol::text::printable(line).into_owned(), style)
                })
                .collect()
        };
        frame.render_widget(Paragraph::new(text), inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_scroll_switch_workers_and_close() {
        let mut overlay = OutputOverlay::default();
        assert!(overlay.on_key(KeyCode::PageUp, 3));
        assert!(overlay.on_key(KeyCode::Up, 3));
        assert_eq!(overlay.back, PAGE + 1);
        assert!(overlay.on_key(KeyCode::Left, 3));
        assert_eq!(
            (overlay.worker, overlay.back),
            (2, 0),
            "a new worker starts at its latest line"
        );
        assert!(overlay.on_key(KeyCode::Right, 3));
        assert_eq!(overlay.worker, 0);
        assert!(
            overlay.on_key(KeyCode::Char('x'), 3),
            "other keys keep it open"
        );
        assert!(!overlay.on_key(KeyCode::Esc, 3));
        assert!(!overlay.on_key(KeyCode::Char('o'), 0));
    }
}
