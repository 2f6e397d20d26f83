//! How a viewer and a recording player talk: the viewer keeps the clock and asks; the player, on its
//! own thread, reads the file and answers with records to fold or a whole state to start from.

use crate::state::State;
use golow_protocol::event::Record;

pub enum Request {
    /// The records after the last ones sent, up to this time (ms).
    Advance(f64),
    /// The state as it was at this time (ms); later `Advance`s continue from there.
    Seek(f64),
}

pub enum Reply {
    Records(Vec<Record>),
    Reset(Box<State>),
}

/// The viewer's end of a player.
pub struct Source {
    pub requests: std::sync::mpsc::Sender<Request>,
    pub replies: std::sync::mpsc::Receiver<Reply>,
}
