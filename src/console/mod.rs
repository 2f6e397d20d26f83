//! Terminal output that is not a screen: the tables and Markdown printed on stdout, and a headless run's progress on
//! stderr.

pub mod figures;
pub mod progress;
pub mod tables;
