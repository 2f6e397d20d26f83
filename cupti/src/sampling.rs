//! Which windows the collector traces when it traces one in N (`golow run --kernels-every N`). Between traced
//! windows tracing is off (`cuptiActivityDisable`), so that a launch then costs the launching thread nothing of
//! CUPTI's; discarding the records of the windows not sent would still pay CUPTI's cost on every launch.

/// What the collector's thread does at a window's tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duty {
    /// Turn tracing on: a traced window opens.
    Open,
    /// Turn tracing off: the traced window closes.
    Close,
    /// A tick after closing, once the launches queued when tracing stopped have run: force the closed window's
    /// records out and send it.
    Send,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Tracing { opened: u64 },
    Closed { opened: u64, closed: u64 },
    Resting { opened: u64 },
}

/// Ticks are windows since the collector started, tracing, at tick 0.
#[derive(Debug)]
pub struct Sampler {
    every: u64,
    phase: Phase,
}

impl Sampler {
    /// One window traced in `every` (at least 2; 1 is continuous tracing, which needs no sampler).
    pub fn new(every: u64) -> Sampler {
        Sampler {
            every: every.max(2),
            phase: Phase::Tracing { opened: 0 },
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The duties due at `tick`, in order. A tick that comes late (the process was stopped) does what was due
    /// then and opens the next window at once, rather than catching up on windows nobody ran.
    pub fn at(&mut self, tick: u64) -> Vec<Duty> {
        let mut duties = Vec::new();
        loop {
            self.phase = match self.phase {
                Phase::Tracing { opened } if tick > opened => {
                    duties.push(Duty::Close);
                    Phase::Closed {
                        opened,
                        closed: tick,
                    }
                }
                Phase::Closed { opened, closed } if tick > closed => {
                    duties.push(Duty::Send);
                    Phase::Resting { opened }
                }
                Phase::Resting { opened } if tick >= opened.saturating_add(self.every) => {
                    duties.push(Duty::Open);
                    Phase::Tracing { opened: tick }
                }
                _ => return duties,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(every: u64, ticks: impl IntoIterator<Item = u64>) -> Vec<(u64, Vec<Duty>)> {
        let mut sampler = Sampler::new(every);
        ticks
            .into_iter()
            .map(|t| (t, sampler.at(t)))
            .filter(|(_, d)| !d.is_empty())
            .collect()
    }

    #[test]
    fn one_window_in_four_is_traced_and_sent_a_window_after_it_closes() {
        use Duty::*;
        assert_eq!(
            schedule(4, 1..=9),
            [
                (1, vec![Close]),
                (2, vec![Send]),
                (4, vec![Open]),
                (5, vec![Close]),
                (6, vec![Send]),
                (8, vec![Open]),
                (9, vec![Close]),
            ]
        );
    }

    #[test]
    fn one_in_two_sends_the_last_window_before_opening_the_next() {
        use Duty::*;
        assert_eq!(
            schedule(2, 1..=4),
            [
                (1, vec![Close]),
                (2, vec![Send, Open]),
                (3, vec![Close]),
                (4, vec![Send, Open]),
            ]
        );
    }

    #[test]
    fn a_late_tick_sends_what_closed_and_opens_at_once() {
        use Duty::*;
        assert_eq!(
            schedule(4, [1, 30, 31]),
            [(1, vec![Close]), (30, vec![Send, Open]), (31, vec![Close])]
        );
        let mut sampler = Sampler::new(4);
        assert_eq!(sampler.at(30), [Close]);
        assert_eq!(
            sampler.phase(),
            Phase::Closed {
                opened: 0,
                closed: 30
            }
        );
    }
}
