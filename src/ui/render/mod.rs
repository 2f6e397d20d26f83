//! Everything golow draws below ratatui's widgets, fenced here so that a ratatui upgrade touches one place: the
//! terminal itself ([`terminal`]), the screen that sends only what changed ([`Screen`]), rows of text written a
//! cell slice at a time ([`lines`]), fills and borders ([`fill`], [`border`]), and the row slices charts draw into
//! ([`cells_of_row`]). Each was measured to matter at 200×60 on a machine whose workers keep the caches cold
//! (ARCHITECTURE.md, "Drawing"), and each is tested cell for cell against what ratatui draws.
//!
//! One switch goes back to ratatui's own way: `GOLOW_PLAIN_RENDER=1` in golow's environment, and frames are drawn
//! whole through `Terminal::draw`, text through `Paragraph`, fills through `Clear` and styles, borders through
//! `Block`. It is read at run time, so one build is tested both ways.

mod cells;
mod screen;
pub mod terminal;
mod text;

pub use cells::{border, cells_of_row, fill};
pub use screen::Screen;
pub use text::{lines, styled_lines};

/// The variable that, set to 1, has frames drawn ratatui's way.
pub const PLAIN_ENV: &str = "GOLOW_PLAIN_RENDER";

/// Whether frames are drawn ratatui's way (`GOLOW_PLAIN_RENDER=1`), read once.
pub fn plain() -> bool {
    static PLAIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PLAIN.get_or_init(|| std::env::var_os(PLAIN_ENV).is_some_and(|value| value == "1"))
}

/// Whether a view may redraw only parts of a frame: the screen keeps the last frame to draw over, which ratatui's
/// `Terminal::draw` does not.
pub fn partial_frames() -> bool {
    !plain()
}
