//! Terminal output that is not a screen: the tables and Markdown printed on stdout, and a headless run's progress on
//! stderr; and the words they and the screens say numbers and sessions in.

pub mod headless_progress;
pub mod markdown;
pub mod tables;
pub mod words;
