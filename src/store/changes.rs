//! What a batch of records changed, as far as drawing goes: the live view redraws only the parts
//! that show what changed, since most frames bring a /proc reading or one step and no more.

use golow_protocol::event::Body;

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
