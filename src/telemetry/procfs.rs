//! Samples worker processes from /proc on its own thread: resident memory, its peak, and CPU use.
//! Readings are events like any other, so they are recorded and folded into the state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::event::Body;

/// One reading of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcReading {
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
}

/// Parses `/proc/PID/status` (VmRSS, VmHWM) and `/proc/PID/stat` (utime, stime).
pub fn parse_proc(status: &str, stat: &str) -> Option<ProcReading> {
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map(|v| v.saturating_mul(1024))
    };
    // The command name (field 2) may contain spaces and parentheses: fields resume after the last ')'.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime) are at 11 and 12 once pid and name are dropped.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let rss_bytes = kib("VmRSS:")?;
    Some(ProcReading {
        rss_bytes,
        peak_rss_bytes: kib("VmHWM:").unwrap_or(rss_bytes),
        cpu_ticks: utime + stime,
    })
}

fn read_proc(pid: u32) -> Option<ProcReading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc(&status, &stat)
}

/// The parent pid from a `/proc/PID/stat` line (field 4).
fn parent_of(stat: &str) -> Option<u32> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

/// Each root with all its live descendants (root first), from one scan of /proc.
pub fn descendants(roots: impl IntoIterator<Item = u32>) -> HashMap<u32, Vec<u32>> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            if let Some(parent) = parent_of(&stat) {
                children.entry(parent).or_default().push(pid);
            }
        }
    }
    roots
        .into_iter()
        .map(|root| {
            let mut tree = vec![root];
            let mut i = 0;
            while i < tree.len() {
                for &kid in children.get(&tree[i]).into_iter().flatten() {
                    if !tree.contains(&kid) {
                        tree.push(kid);
                    }
                }
                i += 1;
            }
            (root, tree)
        })
        .collect()
}

/// A worker's process tree read as one: memory and CPU summed; the peak is the root's own high-water
/// mark or the tree's current total, whichever is larger.
fn read_tree(pids: &[u32]) -> Option<ProcReading> {
    let readings: Vec<ProcReading> = pids.iter().filter_map(|&p| read_proc(p)).collect();
    let root = readings.first()?;
    let rss_bytes = readings.iter().map(|r| r.rss_bytes).sum();
    Some(ProcReading {
        rss_bytes,
        peak_rss_bytes: root.peak_rss_bytes.max(rss_bytes),
        cpu_ticks: readings.iter().map(|r| r.cpu_ticks).sum(),
    })
}

/// The processes to watch, keyed by worker index; the hub adds them as they start.
pub type Watched = Arc<Mutex<HashMap<usize, u32>>>;

pub struct ProcSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ProcSampler {
    /// Samples every `interval`, sending `(worker, Body::Process)` through `send`.
    pub fn start(
        interval: Duration,
        watched: Watched,
        send: impl Fn(usize, Body) + Send + 'static,
    ) -> ProcSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        // SAFETY: sysconf has no preconditions.
        let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let thread = std::thread::Builder::new()
            .name("golow-procfs".into())
            .spawn(move || {
                let mut last: HashMap<u32, (Instant, u64)> = HashMap::new();
                while !stopping.load(Ordering::Relaxed) {
                    let pids: Vec<(usize, u32)> = match watched.lock() {
                        Ok(w) => w.iter().map(|(&k, &v)| (k, v)).collect(),
                        Err(_) => return,
                    };
                    let trees = descendants(pids.iter().map(|&(_, pid)| pid));
                    for (worker, pid) in pids {
                        let alone = [pid];
                        let tree = trees.get(&pid).map_or(&alone[..], Vec::as_slice);
                        let Some(reading) = read_tree(tree) else {
                            continue;
                        };
                        let now = Instant::now();
                        let cpu_percent = last.get(&pid).and_then(|&(then, ticks)| {
                            let wall = now.duration_since(then).as_secs_f64();
                            (wall > 0.0).then(|| {
                                reading.cpu_ticks.saturating_sub(ticks) as f64 / ticks_per_s / wall
                                    * 100.0
                            })
                        });
                        last.insert(pid, (now, reading.cpu_ticks));
                        send(
                            worker,
                            Body::Process {
                                pid,
                                rss_bytes: reading.rss_bytes,
                                peak_rss_bytes: reading.peak_rss_bytes,
                                cpu_percent,
                            },
                        );
                    }
                    std::thread::sleep(interval);
                }
            })
            .ok();
        ProcSampler { stop, thread }
    }
}

impl Drop for ProcSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_stat() {
        let status = "Name:\tpython3\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        let stat = "42 (py thon) (x) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1 1 1";
        let r = parse_proc(status, stat).unwrap();
        assert_eq!(
            r,
            ProcReading {
                rss_bytes: 1024 * 1024,
                peak_rss_bytes: 2048 * 1024,
                cpu_ticks: 300
            }
        );
    }

    #[test]
    fn garbage_gives_none() {
        assert_eq!(parse_proc("", ""), None);
        assert_eq!(parse_proc("VmRSS: x kB", "1 (a) S"), None);
    }

    #[test]
    fn finds_a_child_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id();
        let tree = descendants([me]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(tree[&me][0], me);
        assert!(tree[&me].contains(&child.id()), "{tree:?}");
    }

    #[test]
    fn samples_this_process() {
        let watched: Watched = Arc::new(Mutex::new(HashMap::from([(7, std::process::id())])));
        let (tx, rx) = std::sync::mpsc::channel();
        let sampler = ProcSampler::start(Duration::from_millis(10), watched, move |w, b| {
            let _ = tx.send((w, b));
        });
        let (worker, body) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        drop(sampler);
        assert_eq!(worker, 7);
        match body {
            Body::Process {
                rss_bytes,
                peak_rss_bytes,
                ..
            } => assert!(rss_bytes > 0 && peak_rss_bytes >= rss_bytes),
            other => panic!("unexpected {other:?}"),
        }
    }
}
