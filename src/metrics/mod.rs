//! `--metrics-addr`: every golow a Prometheus target. The session's records fold into a state of the endpoint's own
//! (the same fold as every view), which a scrape renders in Prometheus's text format (`exposition`), served by a
//! listener on its own thread (`server`).

mod exposition;
mod server;

pub use exposition::{KernelNames, render};
pub use server::{Endpoint, parse_addr};
