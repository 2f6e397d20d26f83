//! CUDA kernels: top kernels by total time with grid and block sizes. Their records come from CUPTI
//! activity tracing, which this build does not collect yet; the pane says so rather than guess.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use super::Pane;
use crate::ui::view::View;

pub struct Kernels;

impl Pane for Kernels {
    fn title(&self) -> &'static str {
        " CUDA kernels "
    }

    fn needs_gpu(&self) -> bool {
        true
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, view: &View) {
        let block = view.block(self.title());
        let text = vec![
            Line::styled(
                "No kernel records: they come from CUPTI activity tracing,",
                view.muted(),
            ),
            Line::styled(
                "which this build of golow does not collect yet.",
                view.muted(),
            ),
        ];
        frame.render_widget(
            Paragraph::new(text).wrap(Wrap { trim: true }).block(block),
            area,
        );
    }
}
