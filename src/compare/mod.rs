//! `golow compare`'s judgement: sessions of each side, their setups and conditions, and B against A per worker.

pub mod regression;
pub mod setup;
