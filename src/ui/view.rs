//! What every pane draws with: the state, the theme, the time window, and one colour per worker.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::Block;

use super::theme::Theme;
use super::{fit, render};
use crate::state::State;

/// The built-in implementations keep their colour slots whatever the session runs.
const SLOTS: [&str; 4] = ["pytorch", "torchscript", "libtorch", "cudnn"];

/// Seconds since the session started: the charts' x range, and where in it the clock the view shows stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub from: f64,
    pub to: f64,
    /// The whole second the header's clock (and a replay's timeline) shows at the window's end, which the charts'
    /// axes mark: the range runs on past it to a round `to`, so that the charts move in steps.
    pub end: f64,
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

    /// Frames `area`, already in the theme's colours, with a rounded border and a title (shortened to fit); returns
    /// the room inside.
    pub fn framed(&self, frame: &mut Frame, area: Rect, title: &str) -> Rect {
        let border = Style::default().fg(if self.focused {
            self.theme.highlight
        } else {
            self.theme.border
        });
        let title_style = Style::default()
            .fg(self.theme.title)
            .add_modifier(Modifier::BOLD);
        let title = fit::title(title, area.width);
        render::border(frame.buffer_mut(), area, border, &title, title_style);
        Block::bordered().inner(area)
    }
}

/// What recording the operators cost the run (`Operators::overhead`), `of` after a cost: one that rounds to nothing
/// or below is the steps' own spread (profiled steps cannot run faster for being watched), so it is said as noise.
pub fn looking(run: f64, of: &str) -> String {
    if run < 0.0005 {
        "looking: within noise".to_string()
    } else {
        format!("looking {:+.1}%{of}", run * 100.0)
    }
}

/// A count averaged over steps: whole, as a step's calls always are unless the steps differ, then with a decimal.
pub fn per_step_count(value: f64) -> String {
    if (value - value.round()).abs() < 0.05 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
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
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::widgets::{BorderType, Borders};

    #[test]
    fn a_cost_below_what_rounds_to_a_tenth_of_a_percent_is_noise() {
        assert_eq!(looking(0.002, " of the run"), "looking +0.2% of the run");
        assert_eq!(looking(-0.002, " of the run"), "looking: within noise");
        assert_eq!(looking(0.0004, ""), "looking: within noise");
        assert_eq!(looking(0.0006, ""), "looking +0.1%");
    }

    #[test]
    fn calls_per_step_are_whole_unless_the_steps_differ() {
        assert_eq!(per_step_count(53.0), "53");
        assert_eq!(per_step_count(52.99), "53");
        assert_eq!(per_step_count(26.5), "26.5");
        assert_eq!(per_step_count(0.0), "0");
    }

    #[test]
    fn framed_draws_the_cells_of_a_rounded_block() {
        let theme = crate::ui::theme::builtin("dark").unwrap();
        let state = State::default();
        let draw = |area: Rect, focused: bool, ours: bool| {
            let view = View {
                state: &state,
                theme: &theme,
                window: Window {
                    from: 0.0,
                    to: 1.0,
                    end: 1.0,
                },
                focused,
            };
            let title = " a title longer than narrow panes ";
            let mut terminal = Terminal::new(TestBackend::new(40, 8)).unwrap();
            let mut inner = Rect::default();
            terminal
                .draw(|frame| {
                    inner = if ours {
                        let base = Style::default().bg(theme.background).fg(theme.foreground);
                        render::fill(frame.buffer_mut(), area, base);
                        view.framed(frame, area, title)
                    } else {
                        let border = if focused {
                            theme.highlight
                        } else {
                            theme.border
                        };
                        let block = Block::default()
                            .borders(Borders::ALL)
                            .border_type(BorderType::Rounded)
                            .border_style(Style::default().fg(border))
                            .title(fit::title(title, area.width))
                            .title_style(
                                Style::default()
                                    .fg(theme.title)
                                    .add_modifier(Modifier::BOLD),
                            )
                            .style(Style::default().bg(theme.background).fg(theme.foreground));
                        let inner = block.inner(area);
                        frame.render_widget(block, area);
                        inner
                    };
                })
                .unwrap();
            (terminal.backend().buffer().clone(), inner)
        };
        for area in [
            Rect::new(1, 1, 30, 6),
            Rect::new(0, 0, 40, 8),
            Rect::new(2, 3, 8, 2),
            Rect::new(5, 5, 2, 3),
            Rect::new(3, 3, 1, 4),
            Rect::new(3, 3, 6, 1),
            Rect::new(30, 4, 20, 9),
        ] {
            for focused in [false, true] {
                assert_eq!(
                    draw(area, focused, true),
                    draw(area, focused, false),
                    "{area:?}"
                );
            }
        }
    }

    #[test]
    fn units() {
        assert_eq!(ms(123.4), "123");
        assert_eq!(ms(12.34), "12.3");
        assert_eq!(ms(1.234), "1.23");
        assert_eq!(duration(3725.0), "01:02:05");
    }
}
