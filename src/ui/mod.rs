//! The screens: the full-screen views (one viewer for a live session and a replay, and the sweep's). What is printed
//! instead (headless progress on stderr, tables on stdout) is `console/`'s. Everything here draws from what it is
//! handed (a store to read, a sweep's updates through a channel, a theme) and never reads files or starts processes;
//! stopping workers is a control sent back.

pub mod app;
mod chart;
mod compare_view;
mod event_loop;
mod fit;
pub use event_loop::{FRAME, Wakes};
mod input;
pub mod keys;
mod output;
mod panes;
pub mod render;
pub mod session_screen;
pub mod sweep_charts;
pub mod sweep_screen;
pub mod theme;
pub mod timeline;
mod view;
