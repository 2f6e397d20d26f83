//! The machine's conditions during a session — its load, the CPU time a hypervisor stole, its clock, and what other
//! processes used — from its `machine_load` readings. Whether two sessions' conditions differ is the comparison's
//! (`compare/conditions.rs`).

use serde::{Deserialize, Serialize};

use super::Mean;

/// Other processes' share of the CPUs (100 = every core) above which a session's machine was busy.
pub const BUSY_OTHERS_PERCENT: f64 = 10.0;

/// One reading, or the mean of the latest few as the live view shows them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadReading {
    pub load_1m: f64,
    pub busy_percent: f64,
    pub steal_percent: f64,
    pub others_percent: f64,
    pub cpu_mhz: Option<f64>,
}

impl LoadReading {
    /// Only readings a machine can give: a recording from elsewhere may say anything.
    pub fn checked(self) -> Option<LoadReading> {
        let share = |v: f64| (0.0..=100.0).contains(&v);
        let sane = self.load_1m.is_finite()
            && self.load_1m >= 0.0
            && share(self.busy_percent)
            && share(self.steal_percent)
            && share(self.others_percent);
        sane.then_some(LoadReading {
            cpu_mhz: self.cpu_mhz.filter(|m| m.is_finite() && *m > 0.0),
            ..self
        })
    }
}

/// Readings that say whether the machine is busy now: a few seconds' worth, so that one busy second says nothing.
const RECENT_READINGS: usize = 5;

/// Every reading of a session, in constant memory.
#[derive(Debug, Clone, Default)]
pub struct MachineLoad {
    /// The latest readings, which say what the machine is doing now.
    recent: std::collections::VecDeque<LoadReading>,
    readings: u64,
    load_1m: Mean,
    busy: Mean,
    steal: Mean,
    others: Mean,
    others_max: f64,
    mhz: Mean,
}

impl MachineLoad {
    pub fn apply(&mut self, reading: LoadReading) {
        let Some(r) = reading.checked() else { return };
        if self.recent.len() == RECENT_READINGS {
            self.recent.pop_front();
        }
        self.recent.push_back(r);
        self.readings += 1;
        self.load_1m.add(r.load_1m);
        self.busy.add(r.busy_percent);
        self.steal.add(r.steal_percent);
        self.others.add(r.others_percent);
        self.others_max = self.others_max.max(r.others_percent);
        if let Some(mhz) = r.cpu_mhz {
            self.mhz.add(mhz);
        }
    }

    /// Other processes' share of the CPUs over the latest readings, when it makes the machine busy now: what the live
    /// header and headless progress say while it lasts, so that times measured meanwhile are read as such.
    pub fn busy_now(&self) -> Option<f64> {
        let (n, now) = self.now()?;
        (n >= 3 && now.others_percent > BUSY_OTHERS_PERCENT).then_some(now.others_percent)
    }

    /// The machine now, as `busy_now` judges it: the mean of the latest readings (the latest load average, itself a
    /// mean over a minute), and how many readings, a second each, that is.
    pub fn now(&self) -> Option<(usize, LoadReading)> {
        let latest = self.recent.back()?;
        let n = self.recent.len();
        let mean = |of: fn(&LoadReading) -> f64| self.recent.iter().map(of).sum::<f64>() / n as f64;
        let clocks: Vec<f64> = self.recent.iter().filter_map(|r| r.cpu_mhz).collect();
        Some((
            n,
            LoadReading {
                load_1m: latest.load_1m,
                busy_percent: mean(|r| r.busy_percent),
                steal_percent: mean(|r| r.steal_percent),
                others_percent: mean(|r| r.others_percent),
                cpu_mhz: (!clocks.is_empty())
                    .then(|| clocks.iter().sum::<f64>() / clocks.len() as f64),
            },
        ))
    }

    /// The session's conditions; `None` for a session recorded without readings (by a golow that did not take them).
    pub fn conditions(&self) -> Option<Conditions> {
        Some(Conditions {
            readings: self.readings,
            load_1m: self.load_1m.get()?,
            busy_percent: self.busy.get()?,
            steal_percent: self.steal.get()?,
            others_percent: self.others.get()?,
            others_percent_max: self.others_max,
            cpu_mhz: self.mhz.get(),
        })
    }
}

/// Means over a session's readings (and the busiest second of other processes).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Conditions {
    pub readings: u64,
    pub load_1m: f64,
    pub busy_percent: f64,
    pub steal_percent: f64,
    pub others_percent: f64,
    pub others_percent_max: f64,
    pub cpu_mhz: Option<f64>,
}

impl Conditions {
    /// One line: `load 1.93 · CPUs 97% busy, 12% by other processes (at most 40%) · steal 0.5% · 2600 MHz`.
    pub fn describe(&self) -> String {
        let clock = self
            .cpu_mhz
            .map_or(String::new(), |m| format!(" · {m:.0} MHz"));
        format!(
            "load {:.2} · CPUs {:.0}% busy, {:.0}% by other processes (at most {:.0}%) · steal {:.1}%{clock}",
            self.load_1m,
            self.busy_percent,
            self.others_percent,
            self.others_percent_max,
            self.steal_percent
        )
    }

    /// Why the machine was not quiet, when it was not.
    pub fn busy(&self) -> Option<String> {
        (self.others_percent > BUSY_OTHERS_PERCENT).then(|| {
            format!(
                "other processes used {:.0}% of the CPUs",
                self.others_percent
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(others: f64, steal: f64, mhz: f64) -> LoadReading {
        LoadReading {
            load_1m: 2.0,
            busy_percent: 90.0,
            steal_percent: steal,
            others_percent: others,
            cpu_mhz: Some(mhz),
        }
    }

    fn conditions(readings: &[LoadReading]) -> Conditions {
        let mut load = MachineLoad::default();
        for r in readings {
            load.apply(*r);
        }
        load.conditions().unwrap()
    }

    #[test]
    fn means_and_the_busiest_second() {
        let c = conditions(&[reading(0.0, 0.0, 2000.0), reading(40.0, 1.0, 3000.0)]);
        assert_eq!(c.readings, 2);
        assert_eq!(c.others_percent, 20.0);
        assert_eq!(c.others_percent_max, 40.0);
        assert_eq!(c.cpu_mhz, Some(2500.0));
        assert_eq!(
            c.busy().as_deref(),
            Some("other processes used 20% of the CPUs")
        );
        assert!(
            c.describe()
                .contains("20% by other processes (at most 40%)"),
            "{}",
            c.describe()
        );
    }

    #[test]
    fn impossible_readings_are_ignored() {
        let mut load = MachineLoad::default();
        for bad in [
            reading(f64::NAN, 0.0, 1.0),
            reading(101.0, 0.0, 1.0),
            reading(1.0, -1.0, 1.0),
            LoadReading {
                load_1m: f64::INFINITY,
                ..reading(1.0, 0.0, 1.0)
            },
        ] {
            load.apply(bad);
        }
        assert!(load.conditions().is_none() && load.now().is_none());
        load.apply(reading(1.0, 0.0, f64::NAN));
        assert_eq!(load.conditions().unwrap().cpu_mhz, None);
    }

    #[test]
    fn the_machine_is_busy_now_while_other_processes_keep_a_share() {
        let mut load = MachineLoad::default();
        load.apply(reading(90.0, 0.0, 2600.0));
        load.apply(reading(90.0, 0.0, 2600.0));
        assert_eq!(load.busy_now(), None, "two readings are too few to say");
        load.apply(reading(90.0, 0.0, 2600.0));
        assert_eq!(load.busy_now(), Some(90.0));
        for _ in 0..3 {
            load.apply(reading(2.0, 0.0, 2600.0));
        }
        // 90, 90, 2, 2, 2 → still above 10% on average; one more quiet second clears it.
        assert!(load.busy_now().is_some());
        // What the live view shows of the machine now is the same mean, whatever the latest second said.
        let (readings, now) = load.now().unwrap();
        assert_eq!(readings, 5);
        assert_eq!(Some(now.others_percent), load.busy_now());
        load.apply(reading(2.0, 0.0, 2600.0));
        load.apply(reading(2.0, 0.0, 2600.0));
        assert_eq!(load.busy_now(), None);
    }
}
