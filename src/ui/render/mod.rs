//! Everything golow draws below ratatui's widgets, fenced here so that a ratatui upgrade touches one place: the
//! terminal itself ([`terminal`]), the screen that sends only what changed ([`Screen`]), rows of text written a
//! cell slice at a time ([`lines`]), fills and borders ([`fill`], [`border`]), and the row slices charts draw into
//! ([`cells_of_row`]). Each was measured to matter at 200×60 on a machine whose workers keep the caches cold
//! (ARCHITECTURE.md, "Drawing"), and each is tested cell for cell against what ratatui draws.
//!
//! One switch goes back to ratatui's own way: build with the `plain-render` feature, and frames are drawn whole
//! through `Terminal::draw`, text through `Paragraph`, fills through `Clear` and styles, borders through `Block`.

mod cells;
mod screen;
pub mod terminal;
mod text;

pub use cells::{border, cells_of_row, fill};
pub use screen::Screen;
pub use text::{lines, styled_lines};

/// Whether frames are drawn ratatui's way (the `plain-render` feature).
pub const PLAIN: bool = cfg!(feature = "plain-render");

/// Whether a view may redraw only parts of a frame: the screen keeps the last frame to draw over, which ratatui's
/// `Terminal::draw` does not.
pub const PARTIAL_FRAMES: bool = !PLAIN;
