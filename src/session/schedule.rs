//! Who runs when, for workers that share one machine. Pure logic: the hub feeds it what happened and
//! carries out what it answers.

use golow_protocol::config::Schedule;

/// Steps granted per turn in the alternating schedule.
pub const TURN_STEPS: u64 = 1;
/// A worker left alone (the only one, or the last one running) has no one to take turns with: it is granted the
/// rest of its run at once, rather than waiting for the monitor after every step.
pub const ALONE: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start worker i's process.
    Spawn(usize),
    /// Let worker i run its next turn, of this many steps.
    Grant(usize, u64),
}

#[derive(Debug)]
pub struct Scheduler {
    schedule: Schedule,
    ready: Vec<bool>,
    ended: Vec<bool>,
    running: Option<usize>,
    /// In the alternating schedule no turn starts before every worker has loaded, so that one worker's
    /// start-up never overlaps another's measured steps.
    all_loaded: bool,
    next: usize,
    spawned: usize,
}

impl Scheduler {
    pub fn new(schedule: Schedule, workers: usize) -> Scheduler {
        Scheduler {
            schedule,
            ready: vec![false; workers],
            ended: vec![false; workers],
            running: None,
            all_loaded: false,
            next: 0,
            spawned: 0,
        }
    }

    /// Whether worker processes get a control channel to wait on between turns.
    pub fn controls_turns(&self) -> bool {
        self.schedule == Schedule::Alternate
    }

    pub fn start(&mut self) -> Vec<Action> {
        let n = self.ready.len();
        let first = match self.schedule {
            Schedule::Sequential => n.min(1),
            Schedule::Parallel | Schedule::Alternate => n,
        };
        self.spawned = first;
        (0..first).map(Action::Spawn).collect()
    }

    /// Worker i finished its turn (or, the first time, its start-up) and waits.
    pub fn on_turn_end(&mut self, i: usize) -> Vec<Action> {
        if i >= self.ready.len() || self.ended[i] {
            return Vec::new();
        }
        self.ready[i] = true;
        if self.running == Some(i) {
            self.running = None;
        }
        self.grant_next()
    }

    /// Worker i's process ended.
    pub fn on_exit(&mut self, i: usize) -> Vec<Action> {
        if i >= self.ready.len() || self.ended[i] {
            return Vec::new();
        }
        self.ended[i] = true;
        self.ready[i] = false;
        if self.running == Some(i) {
            self.running = None;
        }
        match self.schedule {
            Schedule::Sequential if self.spawned < self.ready.len() => {
                self.spawned += 1;
                vec![Action::Spawn(self.spawned - 1)]
            }
            Schedule::Alternate => self.grant_next(),
            _ => Vec::new(),
        }
    }

    /// No more workers are started (the session is being stopped); returns those never started.
    pub fn cancel_pending(&mut self) -> Vec<usize> {
        let pending = (self.spawned..self.ready.len()).collect();
        self.spawned = self.ready.len();
        pending
    }

    fn grant_next(&mut self) -> Vec<Action> {
        if self.schedule != Schedule::Alternate || self.running.is_some() {
            return Vec::new();
        }
        let n = self.ready.len();
        if !self.all_loaded {
            if !(0..n).all(|i| self.ready[i] || self.ended[i]) {
                return Vec::new();
            }
            self.all_loaded = true;
        }
        let Some(j) = (0..n).map(|k| (self.next + k) % n).find(|&j| self.ready[j]) else {
            return Vec::new();
        };
        self.ready[j] = false;
        self.running = Some(j);
        self.next = (j + 1) % n;
        let steps = if self.ended.iter().filter(|&&e| !e).count() == 1 {
            ALONE
        } else {
            TURN_STEPS
        };
        vec![Action::Grant(j, steps)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::*;

    #[test]
    fn alternate_waits_for_everyone_then_takes_turns() {
        let mut s = Scheduler::new(Schedule::Alternate, 2);
        assert_eq!(s.start(), vec![Spawn(0), Spawn(1)]);
        assert_eq!(s.on_turn_end(1), vec![]);
        assert_eq!(s.on_turn_end(0), vec![Grant(0, TURN_STEPS)]);
        assert_eq!(s.on_turn_end(0), vec![Grant(1, TURN_STEPS)]);
        assert_eq!(s.on_turn_end(1), vec![Grant(0, TURN_STEPS)]);
        // 0 finishes its run and exits while 1 waits: 1 runs the rest of its steps at once.
        assert_eq!(s.on_turn_end(0), vec![Grant(1, TURN_STEPS)]);
        assert_eq!(s.on_exit(0), vec![]);
        assert_eq!(s.on_turn_end(1), vec![Grant(1, ALONE)]);
        assert_eq!(s.on_exit(1), vec![]);
    }

    #[test]
    fn a_lone_worker_runs_without_turns_once_loaded() {
        let mut s = Scheduler::new(Schedule::Alternate, 1);
        assert_eq!(s.start(), vec![Spawn(0)]);
        assert_eq!(s.on_turn_end(0), vec![Grant(0, ALONE)]);
        assert_eq!(s.on_exit(0), vec![]);
    }

    #[test]
    fn the_last_worker_running_gets_the_rest_when_another_exits_mid_turn() {
        let mut s = Scheduler::new(Schedule::Alternate, 2);
        s.start();
        s.on_turn_end(0);
        assert_eq!(s.on_turn_end(1), vec![Grant(0, TURN_STEPS)]);
        assert_eq!(s.on_exit(0), vec![Grant(1, ALONE)]);
    }

    #[test]
    fn alternate_survives_a_worker_dying_before_it_loaded() {
        let mut s = Scheduler::new(Schedule::Alternate, 3);
        s.start();
        assert_eq!(s.on_turn_end(0), vec![]);
        assert_eq!(s.on_exit(2), vec![]);
        assert_eq!(s.on_turn_end(1), vec![Grant(0, TURN_STEPS)]);
        assert_eq!(s.on_exit(0), vec![Grant(1, ALONE)]);
    }

    #[test]
    fn sequential_starts_the_next_when_one_ends() {
        let mut s = Scheduler::new(Schedule::Sequential, 3);
        assert_eq!(s.start(), vec![Spawn(0)]);
        assert_eq!(s.on_turn_end(0), vec![]);
        assert_eq!(s.on_exit(0), vec![Spawn(1)]);
        assert_eq!(s.on_exit(1), vec![Spawn(2)]);
        assert_eq!(s.on_exit(2), vec![]);
    }

    #[test]
    fn parallel_starts_all_and_never_grants() {
        let mut s = Scheduler::new(Schedule::Parallel, 2);
        assert_eq!(s.start(), vec![Spawn(0), Spawn(1)]);
        assert_eq!(s.on_turn_end(0), vec![]);
        assert!(!s.controls_turns());
    }

    #[test]
    fn cancel_reports_workers_never_started() {
        let mut s = Scheduler::new(Schedule::Sequential, 3);
        s.start();
        assert_eq!(s.cancel_pending(), vec![1, 2]);
        assert_eq!(s.on_exit(0), vec![]);
    }
}
