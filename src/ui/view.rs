//! What every pane draws with: the state, the theme, the time window, and one colour per worker.

use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, BorderType, Borders};

use super::theme::Theme;
use crate::state::State;

/// The built-in implementations keep their colour slots whatever the session runs.
const SLOTS: [&str; 4] = ["pytorch", "torchscript", "libtorch", "cudnn"];

/// Seconds since the session started: the charts' x range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub from: f64,
    pub to: f64,
}

pub struct View<'a> {
    pub state: &'a State,
    pub theme: &'a Theme,
    pub window: Window,
    pub focused: bool,
}

/// A worker's colour among `workers`: fixed slots for the built-ins, then the others in order.
pub fn worker_color<'a>(
    theme: &Theme,
    worker: &str,
    workers: impl Iterator<Item = &'a str>,
) -> Color {
    let slot = SLOTS.iter().position(|s| *s == worker).unwrap_or_else(|| {
        let mut others = workers.filter(|w| !SLOTS.contains(w));
        SLOTS.len() + others.by_ref().take_while(|w| *w != worker).count()
    });
    theme.implementation_color(slot)
}

impl View<'_> {
    /// The worker's colour: fixed slots for the built-ins, then `--cmd` workers in order.
    pub fn color(&self, worker: &str) -> Color {
        worker_color(
            self.theme,
            worker,
            self.state.workers.iter().map(|w| w.name.as_str()),
        )
    }

    pub fn text(&self) -> Style {
        Style::default().fg(self.theme.foreground)
    }

    pub fn muted(&self) -> Style {
        Style::default().fg(self.theme.muted)
    }

    pub fn block<'b>(&self, title: &'b str) -> Block<'b> {
        let border = if self.focused {
            self.theme.highlight
        } else {
            self.theme.border
        };
        Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Rounded)
            .border_style(Style::default().fg(border))
            .title(title)
            .title_style(
                Style::default()
                    .fg(self.theme.title)
                    .add_modifier(Modifier::BOLD),
            )
            .style(
                Style::default()
                    .bg(self.theme.background)
                    .fg(self.theme.foreground),
            )
    }
}

/// Human units for the numbers panes print.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = b;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

pub fn ms(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

pub fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// A CUDA grid or block size as CUPTI reports it: (x,y,z).
pub fn shape(d: [u32; 3]) -> String {
    format!("({},{},{})", d[0], d[1], d[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(3.5 * 1024.0 * 1024.0), "3.5 MiB");
        assert_eq!(ms(123.4), "123");
        assert_eq!(ms(12.34), "12.3");
        assert_eq!(ms(1.234), "1.23");
        assert_eq!(duration(3725.0), "01:02:05");
    }
}
