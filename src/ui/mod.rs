//! What people see: the live TUI (ratatui), or headless progress bars on stderr and the summary table
//! on stdout. Everything here draws from the state only and never touches files or processes.

pub mod app;
pub mod changes;
mod chart;
mod compare;
pub mod live;
mod panes;
pub mod progress;
pub mod replay;
pub mod report;
pub mod screen;
pub mod sweep_live;
pub mod sweep_view;
mod terminal;
mod text;
pub mod theme;
pub mod timeline;
mod view;
