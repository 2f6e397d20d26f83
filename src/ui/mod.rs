//! What people see: the full-screen views (live, replay, sweep), or headless progress on stderr and tables on
//! stdout. Everything here draws from what it is handed (states, records and updates through channels, a theme) and
//! never reads files or starts processes; stopping workers is a control sent back.

pub mod app;
mod chart;
mod compare;
mod event_loop;
pub use event_loop::Wakes;
mod input;
pub mod keys;
pub mod live;
mod output;
mod panes;
pub mod playback;
pub mod progress;
pub mod render;
pub mod report;
pub mod sweep_screen;
pub mod sweep_view;
pub mod theme;
pub mod timeline;
mod view;
