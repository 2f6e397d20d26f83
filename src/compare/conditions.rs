//! The machine's conditions across sessions: each side's mean, said in one line with the sessions that ran beside a
//! busy machine, and whether A's and B's differ enough to doubt a comparison of their times.

use super::sessions::Session;
use crate::state::conditions::Conditions;

/// Differences between two sessions beyond which their conditions differ.
const OTHERS_DIFFER_POINTS: f64 = 10.0;
const STEAL_DIFFER_POINTS: f64 = 2.0;
const CLOCK_DIFFER_FRACTION: f64 = 0.05;

/// The means of several sessions' conditions (the busiest second of all of them).
fn mean(all: &[Conditions]) -> Option<Conditions> {
    let n = all.len() as f64;
    let mean = |f: fn(&Conditions) -> f64| all.iter().map(f).sum::<f64>() / n;
    let clocks: Vec<f64> = all.iter().filter_map(|c| c.cpu_mhz).collect();
    (!all.is_empty()).then(|| Conditions {
        readings: all.iter().map(|c| c.readings).sum(),
        load_1m: mean(|c| c.load_1m),
        busy_percent: mean(|c| c.busy_percent),
        steal_percent: mean(|c| c.steal_percent),
        others_percent: mean(|c| c.others_percent),
        others_percent_max: all.iter().map(|c| c.others_percent_max).fold(0.0, f64::max),
        cpu_mhz: (!clocks.is_empty()).then(|| clocks.iter().sum::<f64>() / clocks.len() as f64),
    })
}

/// How A's and B's conditions differ, each a phrase; empty when they are alike.
pub fn differences(a: &Conditions, b: &Conditions) -> Vec<String> {
    let mut out = Vec::new();
    if (a.others_percent - b.others_percent).abs() > OTHERS_DIFFER_POINTS {
        out.push(format!(
            "other processes used {:.0}% of the CPUs during A, {:.0}% during B",
            a.others_percent, b.others_percent
        ));
    }
    if (a.steal_percent - b.steal_percent).abs() > STEAL_DIFFER_POINTS {
        out.push(format!(
            "the hypervisor stole {:.1}% of the CPUs' time during A, {:.1}% during B",
            a.steal_percent, b.steal_percent
        ));
    }
    if let (Some(ma), Some(mb)) = (a.cpu_mhz, b.cpu_mhz)
        && (mb / ma - 1.0).abs() > CLOCK_DIFFER_FRACTION
    {
        out.push(format!(
            "the CPUs ran at {ma:.0} MHz during A, {mb:.0} MHz during B"
        ));
    }
    out
}

/// One line for a side's machine: its sessions' mean conditions, and how many of them ran beside a busy machine.
pub fn of_side(side: &[Session], name: &str, notes: &mut Vec<String>) -> Option<Conditions> {
    let sessions = match side.len() {
        1 => "1 session".to_string(),
        n => format!("{n} sessions"),
    };
    let all: Vec<Conditions> = side.iter().filter_map(|s| s.conditions).collect();
    let mean = mean(&all).filter(|_| all.len() == side.len());
    let Some(mean) = mean else {
        notes.push(format!(
            "{name}: {sessions} · the machine's load is not recorded (a recording made before golow read it)"
        ));
        return None;
    };
    let busy: Vec<(&Session, Conditions)> = side
        .iter()
        .filter_map(|s| s.conditions.filter(|c| c.busy().is_some()).map(|c| (s, c)))
        .collect();
    let busiest = busy
        .iter()
        .max_by(|x, y| x.1.others_percent.total_cmp(&y.1.others_percent))
        .and_then(|(s, c)| Some((s.path.display(), c.busy()?)));
    let beside = match (busiest, side.len()) {
        (None, _) => String::new(),
        (Some((_, why)), 1) => format!(" · busy: {why}"),
        (Some((path, why)), _) => format!(
            " · {} of them beside a busy machine, the busiest {path} ({why})",
            busy.len()
        ),
    };
    notes.push(format!("{name}: {sessions} · {}{beside}", mean.describe()));
    Some(mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session of one reading: a 2.0 load, 90% of the CPUs busy.
    fn one_reading(others: f64, steal: f64, mhz: f64) -> Conditions {
        Conditions {
            readings: 1,
            load_1m: 2.0,
            busy_percent: 90.0,
            steal_percent: steal,
            others_percent: others,
            others_percent_max: others,
            cpu_mhz: Some(mhz),
        }
    }

    #[test]
    fn alike_sessions_have_no_differences_unlike_ones_say_which() {
        let quiet = one_reading(1.0, 0.0, 2600.0);
        let also_quiet = one_reading(6.0, 1.5, 2650.0);
        assert!(differences(&quiet, &also_quiet).is_empty());
        assert!(quiet.busy().is_none());
        let busy = one_reading(35.0, 4.0, 2000.0);
        let said = differences(&quiet, &busy);
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(
            said[0].contains("1% of the CPUs during A, 35% during B"),
            "{said:?}"
        );
        let both = mean(&[quiet, busy]).unwrap();
        assert_eq!(both.others_percent, 18.0);
        assert_eq!(both.others_percent_max, 35.0);
        assert!(mean(&[]).is_none());
    }
}
