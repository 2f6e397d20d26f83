//! Stragglers among a distributed job's ranks, live. In synchronous training the gradients' all-reduce makes every
//! rank leave a step together, so step *ends* say nothing of who was slow; what does is where the ranks *arrive*:
//! the start of each rank's backward pass, which golow's hook stamps on the host's monotonic clock (the same clock
//! for every rank of the machine). Per step, the skew is the spread of the ranks' arrivals and the straggler the
//! rank that arrived last; a verdict names a rank when, over the latest steps, it typically (by the median) arrived
//! later than the first rank by a visible part of a step: an occasional slow step names nobody, nor does an order of
//! arrival that costs nothing.

use std::collections::{BTreeMap, VecDeque};

use super::Durations;
use super::series::Series;

/// Ranks told apart at most: a hook's rank or world size beyond it is not believed.
pub const MAX_RANKS: u32 = 256;

/// Steps waiting for every rank's arrival at most; the oldest is given up (a rank that died never arrives).
pub const PENDING_STEPS: usize = 64;

/// The latest complete steps a verdict weighs, so that a rank that slows down mid-run is named once it was late in
/// half of them, and one that recovers is cleared as soon.
pub const VERDICT_WINDOW: usize = 20;

/// Steps a verdict needs at least.
pub const VERDICT_MIN_STEPS: usize = 10;

/// The least median lateness, as a share of the job's median step, that makes a straggler worth naming.
pub const VERDICT_MIN_SHARE: f64 = 0.02;

/// And in any case: below a millisecond, which ranks arrive first is the operating system's scheduling.
pub const VERDICT_MIN_LATE_MS: f64 = 1.0;

/// The rank a verdict names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Straggler {
    pub rank: u32,
    /// Of the latest `of` complete steps, how many it was last in.
    pub last: u64,
    pub of: u64,
    /// Its median lateness over them: how long after the first rank it arrived.
    pub late_ms: f64,
    /// The first step at which the verdict named it (since it last named nobody, or another rank).
    pub since_step: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Arrivals {
    /// Ranks expected per step: the largest world size the ranks said.
    world: u32,
    /// Step → the ranks arrived so far, with their monotonic nanoseconds.
    pending: BTreeMap<u64, Vec<(u32, u64)>>,
    /// Every complete step's skew, and over time (at the session time its last rank arrived).
    pub skew: Durations,
    pub skew_series: Series,
    /// Complete steps each rank was last in, over the whole run.
    pub last_counts: BTreeMap<u32, u64>,
    pub complete: u64,
    /// Steps given up with ranks missing.
    pub incomplete: u64,
    /// Arrivals refused because they cannot be true (before the session, after the monitor heard of them, or before
    /// the same rank's previous one): a clock the hook misread, or a script that stamps its own.
    pub implausible: u64,
    /// The latest complete steps: the rank that was last, and every rank's lateness (by rank).
    recent: VecDeque<(u32, Vec<f64>)>,
    /// The verdict as it stands after the latest complete step.
    pub verdict: Option<Straggler>,
}

impl Arrivals {
    /// Rank `rank` of `world` arrived for step `step` at `ns` (host monotonic), which golow heard of at `t` (session
    /// seconds); `step_ms` is the job's median step so far, which a verdict weighs the lateness against.
    pub fn arrive(
        &mut self,
        rank: u32,
        world: u32,
        step: u64,
        ns: u64,
        step_ms: Option<f64>,
        t: f64,
    ) {
        if !(2..=MAX_RANKS).contains(&world) || rank >= world {
            return;
        }
        self.world = self.world.max(world);
        if !self.pending.contains_key(&step) && self.pending.len() >= PENDING_STEPS {
            self.pending.pop_first();
            self.incomplete += 1;
        }
        let ranks = self.pending.entry(step).or_default();
        if ranks.iter().any(|(r, _)| *r == rank) {
            return;
        }
        ranks.push((rank, ns));
        if ranks.len() < self.world as usize {
            return;
        }
        let ranks = self.pending.remove(&step).unwrap_or_default();
        let (Some(first), Some(&(last_rank, last))) = (
            ranks.iter().map(|(_, ns)| *ns).min(),
            ranks.iter().max_by_key(|(_, ns)| *ns),
        ) else {
            return;
        };
        self.complete += 1;
        let skew_ms = (last - first) as f64 / 1e6;
        self.skew.record_ms(skew_ms);
        self.skew_series.push(t, skew_ms);
        *self.last_counts.entry(last_rank).or_default() += 1;
        let mut lateness = vec![0.0; self.world as usize];
        for (rank, ns) in &ranks {
            lateness[*rank as usize] = (ns - first) as f64 / 1e6;
        }
        if self.recent.len() == VERDICT_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back((last_rank, lateness));
        let named = self.judge(step_ms);
        self.verdict = named.map(|(rank, last, of, late_ms)| Straggler {
            rank,
            last,
            of,
            late_ms,
            since_step: match self.verdict {
                Some(v) if v.rank == rank => v.since_step,
                _ => step,
            },
        });
    }

    /// The rank whose median lateness over the recent steps is the largest, when that is a visible share of a step
    /// (`step_ms`, the job's median step; without one, no verdict) and at least a millisecond: (rank, times last,
    /// steps weighed, median lateness).
    fn judge(&self, step_ms: Option<f64>) -> Option<(u32, u64, u64, f64)> {
        let n = self.recent.len();
        if n < VERDICT_MIN_STEPS {
            return None;
        }
        let floor = (step_ms.filter(|ms| ms.is_finite() && *ms > 0.0)? * VERDICT_MIN_SHARE)
            .max(VERDICT_MIN_LATE_MS);
        let (rank, late_ms) = (0..self.world)
            .map(|rank| {
                let mut late: Vec<f64> = self
                    .recent
                    .iter()
                    .map(|(_, lateness)| lateness.get(rank as usize).copied().unwrap_or(0.0))
                    .collect();
                late.sort_by(f64::total_cmp);
                (rank, late[late.len() / 2])
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        let last = self.recent.iter().filter(|(last, _)| *last == rank).count() as u64;
        (late_ms > 0.0 && late_ms >= floor).then_some((rank, last, n as u64, late_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks over `steps` steps: rank 1 arrives `late_ms` after rank 0 from step `from` on, and before that each
    /// arrives first on alternate steps, 0.1 ms apart.
    fn run(steps: u64, from: u64, late_ms: f64) -> Arrivals {
        let mut a = Arrivals::default();
        for step in 0..steps {
            let base = step * 100_000_000;
            let (zero, one) = if step >= from {
                (base, base + (late_ms * 1e6) as u64)
            } else if step % 2 == 0 {
                (base, base + 100_000)
            } else {
                (base + 100_000, base)
            };
            a.arrive(0, 2, step, zero, Some(100.0), 0.0);
            a.arrive(1, 2, step, one, Some(100.0), 0.0);
        }
        a
    }

    #[test]
    fn ranks_taking_turns_are_noise_and_a_slow_rank_is_named_soon() {
        let fair = run(60, u64::MAX, 0.0);
        assert_eq!(fair.complete, 60);
        assert_eq!(fair.last_counts.get(&0), Some(&30));
        assert_eq!(fair.verdict, None);

        let slowed = run(60, 20, 30.0);
        let v = slowed.verdict.expect("rank 1 is named");
        assert_eq!((v.rank, v.last, v.of), (1, 20, 20));
        assert!((v.late_ms - 30.0).abs() < 0.01, "{v:?}");
        // Late in 10 of the latest 20 steps (the upper median of an even count): named on its 10th late step.
        assert_eq!(v.since_step, 29, "{v:?}");
        // It recovers: 11 even steps later nobody is named.
        let mut recovered = slowed;
        for step in 60..71u64 {
            let base = step * 100_000_000;
            recovered.arrive(0, 2, step, base, Some(100.0), 0.0);
            recovered.arrive(1, 2, step, base, Some(100.0), 0.0);
        }
        assert_eq!(recovered.verdict, None);
    }

    #[test]
    fn a_lateness_too_small_to_matter_or_too_rare_names_nobody() {
        // Rank 1 always last, by 0.5 ms of a 100 ms step: not 2% of a step.
        let a = run(60, 0, 0.5);
        assert_eq!(a.last_counts.get(&1), Some(&60));
        assert_eq!(a.verdict, None);
        // By 0.5 ms of a 5 ms step: 10%, but within the scheduler's jitter.
        let mut tiny = Arrivals::default();
        for step in 0..60u64 {
            tiny.arrive(0, 2, step, step * 5_000_000, Some(5.0), 0.0);
            tiny.arrive(1, 2, step, step * 5_000_000 + 500_000, Some(5.0), 0.0);
        }
        assert_eq!(tiny.verdict, None);
        // One step in three, rank 1 stalls 50 ms: a rare slow step, not a slow rank.
        let mut rare = Arrivals::default();
        for step in 0..60u64 {
            let base = step * 100_000_000;
            let late = if step % 3 == 0 { 50_000_000 } else { 0 };
            rare.arrive(0, 2, step, base + 10, Some(100.0), 0.0);
            rare.arrive(1, 2, step, base + late, Some(100.0), 0.0);
        }
        assert_eq!(rare.verdict, None);
        // Without a step time to weigh it against, nobody either.
        assert_eq!(run(60, 0, 30.0).judge(None), None);
    }

    #[test]
    fn hostile_ranks_and_missing_ones_stay_bounded() {
        let mut a = Arrivals::default();
        a.arrive(7, 4, 0, 1, None, 0.0);
        a.arrive(300, 400, 0, 1, None, 0.0);
        a.arrive(5, 2, 0, 1, None, 0.0);
        a.arrive(0, 2, 0, 1, None, 0.0);
        a.arrive(0, 2, 0, 2, None, 0.0);
        assert_eq!(a.complete, 0, "one rank twice is not two ranks");
        // Rank 1 never comes: steps pile up only to PENDING_STEPS.
        for step in 1..1_000 {
            a.arrive(0, 4, step, step, None, 0.0);
        }
        assert_eq!(a.pending.len(), PENDING_STEPS);
        assert_eq!(a.incomplete, 1_000 - PENDING_STEPS as u64);
    }
}
