//! What a batch of records changed, as far as drawing goes: the live view redraws only the parts
//! that show what changed, since most frames bring a /proc reading or one step and no more.

use std::time::Duration;

use golow_protocol::event::Body;

/// Steps and readings are shown at most this often: twice a second is as often as a number can be read, as most
/// monitors refresh (htop every 1.5 s, btop every 2 s), and a frame costs the monitor about 0.75 ms at 200×60.
/// Steps shown four times a second cost a session of fast steps 0.87% of a core against 0.72% (docs/methodology.md, "The observer effect").
pub const SHOW_EVERY: Duration = Duration::from_millis(500);

/// Kinds of change, as bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes(u8);

impl Changes {
    pub const NONE: Changes = Changes(0);
    /// A step, optimiser step, forward pass, reported number, epoch or operators window: the timing, throughput,
    /// training, copy and operators panes.
    pub const STEPS: Changes = Changes(1);
    /// A /proc reading: host memory and CPU, a worker's or the whole machine's.
    pub const PROCESS: Changes = Changes(2);
    /// An NVML reading or a CUPTI window.
    pub const GPU: Changes = Changes(4);
    /// Anything else (a worker starting or ending, its output, a GPU's name, the session's start or
    /// end): the whole screen.
    pub const OTHER: Changes = Changes(8);

    pub fn of(body: &Body) -> Changes {
        match body {
            Body::Step(_)
            | Body::OptimizerStep(_)
            | Body::ForwardPass(_)
            | Body::Scalar(_)
            | Body::Epoch(_)
            | Body::Operators(_) => Changes::STEPS,
            // The schedule's business: nothing on screen shows it.
            Body::TurnEnd(_) => Changes::NONE,
            Body::Process { .. } | Body::MachineLoad { .. } => Changes::PROCESS,
            Body::GpuDevice { .. }
            | Body::GpuPcie { .. }
            | Body::GpuProcess { .. }
            | Body::Kernels(_)
            | Body::Collector(_) => Changes::GPU,
            _ => Changes::OTHER,
        }
    }

    pub fn intersects(self, other: Changes) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether these changes, `since` they were last shown, are to be shown now: the rest at once, steps and
    /// readings once they are due.
    pub fn due(self, since: Duration) -> bool {
        self.intersects(Changes::OTHER) || (self != Changes::NONE && since >= SHOW_EVERY)
    }
}

impl std::ops::BitOr for Changes {
    type Output = Changes;
    fn bitor(self, other: Changes) -> Changes {
        Changes(self.0 | other.0)
    }
}

impl std::ops::BitOrAssign for Changes {
    fn bitor_assign(&mut self, other: Changes) {
        self.0 |= other.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_is_due_at_once_steps_and_readings_twice_a_second() {
        let ms = Duration::from_millis;
        assert!(Changes::OTHER.due(ms(0)));
        assert!((Changes::OTHER | Changes::PROCESS).due(ms(0)));
        assert!(!Changes::STEPS.due(ms(490)));
        assert!(Changes::STEPS.due(ms(500)));
        assert!(!(Changes::STEPS | Changes::GPU).due(ms(100)));
        assert!(!(Changes::PROCESS | Changes::GPU).due(ms(490)));
        assert!(Changes::PROCESS.due(ms(500)));
        assert!(!Changes::NONE.due(ms(10_000)));
    }
}
