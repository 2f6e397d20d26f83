//! The panes: each a widget with its own state that draws from the shared state only.

mod copies;
mod cpu;
mod gpu;
mod kernels;
mod memory;
mod operators;
mod phases;
mod ranks;
mod sample_time;
mod throughput;
mod training;

use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;

use super::view::View;
use crate::store::Changes;

pub trait Pane {
    fn title(&self) -> &'static str;
    /// Panes that need an NVIDIA GPU give their room to the others on a machine without one.
    fn needs_gpu(&self) -> bool {
        false
    }
    /// Panes about a distributed job's ranks are shown only while some worker has ranks.
    fn needs_ranks(&self) -> bool {
        false
    }
    /// Panes about `--cmd` workers' step phases are shown only while some worker has them.
    fn needs_phases(&self) -> bool {
        false
    }
    /// The changes that alter what it shows: it is redrawn only after those.
    fn shows(&self) -> Changes;
    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View);
    /// A key the app does not use, offered to the maximised pane; true when the pane took it.
    fn on_key(&mut self, _key: KeyCode) -> bool {
        false
    }
}

/// Every pane, in the order of the keys that maximise them (1 … 9, then 0, then p: [`PHASES`]).
pub fn all() -> Vec<Box<dyn Pane>> {
    vec![
        Box::new(sample_time::SampleTime),
        Box::new(throughput::Throughput),
        Box::new(gpu::GpuUtilisation),
        Box::new(memory::Memory),
        Box::new(copies::Copies),
        Box::new(kernels::Kernels::default()),
        Box::new(training::Training),
        Box::new(cpu::HostCpu),
        Box::new(ranks::Ranks::default()),
        Box::new(operators::Operators::default()),
        Box::new(phases::Phases::default()),
    ]
}

/// The phases pane's place among [`all`].
pub const PHASES: usize = 10;

pub use phases::any as any_phases;
pub use ranks::any as any_ranks;

/// ↑/↓ move a maximised pane's choice of a row (clamped when drawn); true when the key was one of them.
fn choose(selected: &mut usize, key: KeyCode) -> bool {
    match key {
        KeyCode::Up => *selected = selected.saturating_sub(1),
        KeyCode::Down => *selected = selected.saturating_add(1),
        _ => return false,
    }
    true
}

/// A worker's name in its colour, padded for columns.
fn name<'a>(view: &View, worker: &str, width: usize) -> Span<'a> {
    Span::styled(
        format!("{worker:<width$}"),
        Style::default()
            .fg(view.color(worker))
            .add_modifier(Modifier::BOLD),
    )
}

/// `pane` drawn alone over `state` (the last minute of it) on a terminal `width` × `height`, as text, row after row.
#[cfg(test)]
fn drawn(pane: &mut dyn Pane, state: &crate::state::State, width: u16, height: u16) -> String {
    let theme = crate::ui::theme::builtin("dark").unwrap();
    let view = View {
        state,
        theme: &theme,
        window: crate::ui::view::Window {
            from: 0.0,
            to: 60.0,
            end: 60.0,
        },
        focused: false,
    };
    let backend = ratatui::backend::TestBackend::new(width, height);
    let mut terminal = ratatui::Terminal::new(backend).unwrap();
    terminal
        .draw(|frame| pane.draw(frame, frame.area(), &view))
        .unwrap();
    let buffer = terminal.backend().buffer();
    (0..buffer.area.height)
        .map(|y| {
            let row: String = (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect();
            row + "\n"
        })
        .collect()
}
