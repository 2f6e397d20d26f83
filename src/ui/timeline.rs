//! The replay's virtual clock and its bar: play/pause, speed, jumps. It only keeps time and asks for
//! positions; the caller fetches what the recording holds up to there.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::fit;
use super::keys::{self, Clock, Command};
use super::view::{View, duration};

const SPEEDS: [f64; 7] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];
const JUMP_MS: f64 = 10_000.0;
/// The recording's name gives up its start before the bar is narrower than this.
const MIN_BAR: usize = 10;

pub struct Timeline {
    /// The recording's length and what it is called on screen.
    pub duration_ms: f64,
    pub label: String,
    pub position_ms: f64,
    pub playing: bool,
    speed: usize,
    /// The time typed after `j`, while the prompt is open.
    prompt: Option<String>,
    /// The prompt was given a key it does not take: it says what it takes.
    prompt_hint: bool,
}

/// What a key did to the clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Moved {
    /// The key was not the timeline's.
    Ignored,
    /// Handled; the position only moves forward with play.
    Handled,
    /// The position jumped (either way) to this time.
    Jumped(f64),
}

impl Timeline {
    pub fn new(duration_ms: f64, label: String) -> Timeline {
        Timeline {
            duration_ms: duration_ms.max(0.0),
            label,
            position_ms: 0.0,
            playing: true,
            speed: 2,
            prompt: None,
            prompt_hint: false,
        }
    }

    pub fn speed(&self) -> f64 {
        SPEEDS[self.speed]
    }

    /// Moves the clock on by `elapsed` of wall time; true when the position changed.
    pub fn tick(&mut self, elapsed: Duration) -> bool {
        if !self.playing {
            return false;
        }
        let before = self.position_ms;
        self.position_ms =
            (self.position_ms + elapsed.as_secs_f64() * 1e3 * self.speed()).min(self.duration_ms);
        if self.position_ms >= self.duration_ms {
            self.playing = false;
        }
        self.position_ms != before
    }

    /// Whether the jump prompt is open: it takes every key.
    pub fn prompting(&self) -> bool {
        self.prompt.is_some()
    }

    /// A key: typed into the prompt while it is open (only Enter, with a time, or Esc closes it; any other key
    /// stays in the prompt, which then says what it takes), else the key map's replay bindings for the clock.
    pub fn on_key(&mut self, code: KeyCode) -> Moved {
        if let Some(typed) = self.prompt.as_mut() {
            self.prompt_hint = false;
            match code {
                KeyCode::Char(c) if c.is_ascii_digit() || c == ':' || c == '.' => typed.push(c),
                KeyCode::Backspace => {
                    typed.pop();
                }
                KeyCode::Esc => self.prompt = None,
                KeyCode::Enter => match parse_time(typed) {
                    Some(ms) => {
                        self.prompt = None;
                        return self.jump(ms);
                    }
                    None => self.prompt_hint = true,
                },
                _ => self.prompt_hint = true,
            }
            return Moved::Handled;
        }
        let key = KeyEvent::new(code, KeyModifiers::NONE);
        match keys::command(keys::View::Replay, &key) {
            Some(Command::Timeline(clock)) => self.apply(clock),
            _ => Moved::Ignored,
        }
    }

    fn apply(&mut self, clock: Clock) -> Moved {
        match clock {
            Clock::PlayPause => {
                if self.position_ms >= self.duration_ms {
                    return self.jump(0.0);
                }
                self.playing = !self.playing;
            }
            Clock::Slower => self.speed = self.speed.saturating_sub(1),
            Clock::Faster => self.speed = (self.speed + 1).min(SPEEDS.len() - 1),
            Clock::Jump { back: true } => return self.jump(self.position_ms - JUMP_MS),
            Clock::Jump { back: false } => return self.jump(self.position_ms + JUMP_MS),
            Clock::Start => return self.jump(0.0),
            Clock::End => return self.jump(self.duration_ms),
            Clock::JumpTo => self.prompt = Some(String::new()),
        }
        Moved::Handled
    }

    fn jump(&mut self, ms: f64) -> Moved {
        self.position_ms = ms.clamp(0.0, self.duration_ms);
        Moved::Jumped(self.position_ms)
    }

    pub fn draw(&self, frame: &mut Frame, area: Rect, view: &View) {
        let state = if self.playing { "▶" } else { "⏸" };
        let text = format!(
            " {state} {:>5}× {} / {} ",
            format!("{}", self.speed()),
            duration(self.position_ms / 1e3),
            duration(self.duration_ms / 1e3),
        );
        let room = fit::room(area.width).saturating_sub(text.chars().count());
        let tail = match &self.prompt {
            Some(typed) if self.prompt_hint => format!(
                " jump to (s or h:mm:ss): {typed}▏ digits, : and . · Enter jumps · Esc cancels"
            ),
            Some(typed) => format!(" jump to (s or h:mm:ss): {typed}▏"),
            None => format!(
                " {}",
                fit::tail(&self.label, room.saturating_sub(MIN_BAR + 1))
            ),
        };
        let width = room.saturating_sub(tail.chars().count());
        let bar_width = width.clamp(0, 80);
        let filled = if self.duration_ms > 0.0 {
            ((self.position_ms / self.duration_ms) * bar_width as f64).round() as usize
        } else {
            bar_width
        };
        let bar = format!(
            "{}{}",
            "━".repeat(filled.min(bar_width)),
            "─".repeat(bar_width - filled.min(bar_width))
        );
        let line = Line::from(vec![
            Span::styled(text, Style::default().fg(view.theme.highlight)),
            Span::styled(bar, Style::default().fg(view.theme.title)),
            Span::styled(tail, view.muted()),
        ]);
        let base = Style::default().bg(view.theme.background);
        let fitted = fit::line(&line, fit::room(area.width));
        frame.render_widget(Paragraph::new(fitted).style(base), area);
    }
}

/// `90`, `1:30`, `0:01:30` or `90.5` → milliseconds.
fn parse_time(text: &str) -> Option<f64> {
    let mut seconds = 0.0;
    for part in text.split(':') {
        let value: f64 = part.parse().ok()?;
        if !value.is_finite() || value < 0.0 {
            return None;
        }
        seconds = seconds * 60.0 + value;
    }
    Some(seconds * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plays_jumps_and_stops_at_the_end() {
        let mut t = Timeline::new(60_000.0, "x".into());
        assert!(t.tick(Duration::from_secs(2)));
        assert_eq!(t.position_ms, 2_000.0);
        assert_eq!(t.on_key(KeyCode::Char(']')), Moved::Handled);
        t.tick(Duration::from_secs(1));
        assert_eq!(t.position_ms, 4_000.0);
        assert_eq!(t.on_key(KeyCode::Left), Moved::Jumped(0.0));
        assert_eq!(t.on_key(KeyCode::Char('G')), Moved::Jumped(60_000.0));
        assert!(!t.tick(Duration::from_secs(1)));
        assert!(!t.playing);
        for key in ['j', '1', ':', '3', '0'] {
            assert_eq!(t.on_key(KeyCode::Char(key)), Moved::Handled);
        }
        assert_eq!(t.on_key(KeyCode::Enter), Moved::Jumped(60_000.0));
        t.on_key(KeyCode::Char('g'));
        for key in ['j', '4', '5'] {
            t.on_key(KeyCode::Char(key));
        }
        assert_eq!(t.on_key(KeyCode::Enter), Moved::Jumped(45_000.0));
        for _ in 0..10 {
            t.on_key(KeyCode::Char('['));
        }
        assert_eq!(t.speed(), 0.25);
        assert_eq!(t.on_key(KeyCode::Char('x')), Moved::Ignored);
    }

    #[test]
    fn the_jump_prompt_keeps_keys_it_does_not_take_and_closes_only_on_enter_or_esc() {
        let mut t = Timeline::new(600_000.0, "x".into());
        assert_eq!(t.on_key(KeyCode::Char('j')), Moved::Handled);
        for key in [
            KeyCode::Char('1'),
            KeyCode::Char('q'),
            KeyCode::Char('G'),
            KeyCode::Char('2'),
        ] {
            assert_eq!(t.on_key(key), Moved::Handled, "{key:?} stays in the prompt");
        }
        assert_eq!(t.prompt.as_deref(), Some("12"));
        assert!(!t.prompt_hint, "the last key was taken");
        t.on_key(KeyCode::Char('x'));
        assert!(t.prompt_hint);
        assert_eq!(t.on_key(KeyCode::Enter), Moved::Jumped(12_000.0));
        assert_eq!(t.prompt, None);
        t.on_key(KeyCode::Char('j'));
        t.on_key(KeyCode::Char(':'));
        assert_eq!(
            t.on_key(KeyCode::Enter),
            Moved::Handled,
            "no time: the prompt stays"
        );
        assert!(t.prompt.is_some() && t.prompt_hint);
        assert_eq!(t.on_key(KeyCode::Esc), Moved::Handled);
        assert_eq!(t.prompt, None);
        assert_eq!(t.position_ms, 12_000.0);
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("90"), Some(90_000.0));
        assert_eq!(parse_time("1:30"), Some(90_000.0));
        assert_eq!(parse_time("0:01:30.5"), Some(90_500.0));
        assert_eq!(parse_time(""), None);
        assert_eq!(parse_time("1::2"), None);
    }
}
