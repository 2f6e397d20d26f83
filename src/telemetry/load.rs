//! The whole machine's load, read once a second on the session's clock: what else ran while the workers were
//! measured, so that a comparison of two sessions can say when they ran under different conditions.

use std::time::{Duration, Instant};

use ::procfs::{FromBufReadSI, KernelStats};
use golow_protocol::event::Body;

const EVERY: Duration = Duration::from_secs(1);
/// Reading the clock of every CPU can interrupt each of them; it changes slowly, so it is read rarely.
const CLOCK_EVERY: Duration = Duration::from_secs(10);

/// The machine's CPU time from the first line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    pub total: u64,
    pub idle: u64,
    pub steal: u64,
}

/// From the `cpu` line; guest time is already in user time, and fields an older kernel lacks count as 0.
pub fn parse_cpu_times(stat: &[u8]) -> Option<CpuTimes> {
    let cpu = KernelStats::from_buf_read(stat, ::procfs::current_system_info())
        .ok()?
        .total;
    let [iowait, irq, softirq, steal] =
        [cpu.iowait, cpu.irq, cpu.softirq, cpu.steal].map(|ticks| ticks.unwrap_or(0));
    Some(CpuTimes {
        total: cpu.user + cpu.nice + cpu.system + cpu.idle + iowait + irq + softirq + steal,
        idle: cpu.idle + iowait,
        steal,
    })
}

/// The 1-minute load average, the first field of `/proc/loadavg`.
pub fn parse_load(loadavg: &str) -> Option<f64> {
    loadavg.split_whitespace().next()?.parse().ok()
}

/// The mean of the `cpu MHz` lines of `/proc/cpuinfo` (absent on some architectures).
pub fn parse_mean_mhz(cpuinfo: &str) -> Option<f64> {
    let clocks: Vec<f64> = cpuinfo
        .lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split_once(':')?.1.trim().parse().ok())
        .collect();
    (!clocks.is_empty()).then(|| clocks.iter().sum::<f64>() / clocks.len() as f64)
}

/// The machine's busy, stolen and others' shares between two readings, in percent of all CPUs. `session_ticks` is
/// the CPU time golow and its workers used meanwhile: what remains of the busy time, less the stolen, is others'.
pub fn shares(before: CpuTimes, after: CpuTimes, session_ticks: u64) -> Option<(f64, f64, f64)> {
    let total = after.total.checked_sub(before.total).filter(|&t| t > 0)? as f64;
    let idle = after.idle.saturating_sub(before.idle) as f64;
    let steal = after.steal.saturating_sub(before.steal) as f64;
    let busy = (total - idle).max(0.0);
    let others = (busy - steal - session_ticks as f64).max(0.0);
    let percent = |v: f64| (v / total * 100.0).clamp(0.0, 100.0);
    Some((percent(busy), percent(steal), percent(others)))
}

/// Reads `/proc/stat`, `/proc/loadavg` and, now and then, `/proc/cpuinfo`.
#[derive(Default)]
pub struct LoadSampler {
    last: Option<(Instant, CpuTimes, u64)>,
    clock: Option<(Instant, Option<f64>)>,
}

impl LoadSampler {
    /// A `machine_load` body once a second (`None` in between, and at the first call, which sets the baseline).
    /// `workers_ticks` is the CPU time golow's workers have used so far; golow's own is added here.
    pub fn sample(&mut self, workers_ticks: u64) -> Option<Body> {
        let now = Instant::now();
        if self.last.is_some_and(|(at, _, _)| now - at < EVERY) {
            return None;
        }
        let times = parse_cpu_times(&std::fs::read("/proc/stat").ok()?)?;
        let session = workers_ticks + own_ticks().unwrap_or(0);
        let previous = self.last.replace((now, times, session));
        let (_, before, session_before) = previous?;
        let (busy_percent, steal_percent, others_percent) =
            shares(before, times, session.saturating_sub(session_before))?;
        let load_1m = parse_load(&std::fs::read_to_string("/proc/loadavg").ok()?)?;
        if self.clock.is_none_or(|(at, _)| now - at >= CLOCK_EVERY) {
            let mhz = std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|info| parse_mean_mhz(&info));
            self.clock = Some((now, mhz));
        }
        Some(Body::MachineLoad {
            load_1m,
            busy_percent,
            steal_percent,
            others_percent,
            cpu_mhz: self.clock.and_then(|(_, mhz)| mhz),
        })
    }
}

/// golow's own CPU time, all its threads, in clock ticks.
fn own_ticks() -> Option<u64> {
    let stat = std::fs::read("/proc/self/stat").ok()?;
    super::procfs::parse_stat(&stat).map(|(ticks, _)| ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_s_files() {
        // The lines after the CPUs' that procfs requires.
        let rest = "ctxt 9\nbtime 1\nprocesses 3\n";
        let stat =
            format!("cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 50 2 25 400 10 1 1 5 3 0\n{rest}");
        assert_eq!(
            parse_cpu_times(stat.as_bytes()),
            Some(CpuTimes {
                total: 990,
                idle: 820,
                steal: 10
            })
        );
        for stat in ["cpu0 1 2 3 4\n", "cpu  1 x 3 4\n", "cpu  1 2 3\n"] {
            assert_eq!(
                parse_cpu_times(format!("{stat}{rest}").as_bytes()),
                None,
                "{stat:?}"
            );
        }
        assert_eq!(parse_load("0.52 0.41 1.18 2/78 2495\n"), Some(0.52));
        assert_eq!(parse_load(""), None);
        assert_eq!(
            parse_mean_mhz("cpu MHz\t\t: 2600.000\nother: 1\ncpu MHz\t\t: 2400.000\n"),
            Some(2500.0)
        );
        assert_eq!(parse_mean_mhz("model name: arm\n"), None);
    }

    #[test]
    fn others_are_what_is_busy_less_stolen_and_the_session_s() {
        let before = CpuTimes {
            total: 1000,
            idle: 500,
            steal: 0,
        };
        let after = CpuTimes {
            total: 1200,
            idle: 550,
            steal: 10,
        };
        // 200 ticks: 150 busy, 10 stolen, 100 the session's, so 40 others'.
        assert_eq!(shares(before, after, 100), Some((75.0, 5.0, 20.0)));
        // The session's count can run ahead of the machine's (ticks are read at different moments): never below 0.
        assert_eq!(shares(before, after, 1000).map(|s| s.2), Some(0.0));
        assert_eq!(shares(after, before, 0), None);
    }

    #[test]
    fn this_machine_reads_once_a_second() {
        let mut sampler = LoadSampler::default();
        assert!(
            sampler.sample(0).is_none(),
            "the first call sets the baseline"
        );
        assert!(sampler.sample(0).is_none(), "not a second later");
        // The kernel counts CPU time in ticks of 10 ms per CPU: let some pass, this thread busy through them.
        let busy_until = Instant::now() + Duration::from_millis(200);
        let mut spins = 0u64;
        while Instant::now() < busy_until {
            spins = std::hint::black_box(spins + 1);
        }
        sampler.last = sampler.last.map(|(at, t, s)| (at - EVERY, t, s));
        match sampler.sample(0) {
            Some(Body::MachineLoad {
                load_1m,
                busy_percent,
                others_percent,
                ..
            }) => {
                // What /proc/loadavg says (it moves every 5 s, by little).
                let now = parse_load(&std::fs::read_to_string("/proc/loadavg").unwrap()).unwrap();
                assert!((load_1m - now).abs() < 1.0, "{load_1m} against {now}");
                // This thread kept a CPU busy.
                assert!(
                    busy_percent > 0.0 && busy_percent <= 100.0,
                    "{busy_percent}"
                );
                assert!(others_percent <= busy_percent);
            }
            other => panic!("{other:?}"),
        }
    }
}
