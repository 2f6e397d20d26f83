//! Samples worker processes from /proc on its own thread: resident memory, its peak, and CPU use.
//! Readings are events like any other, so they are recorded and folded into the state.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use golow_protocol::event::Body;

/// One reading of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcReading {
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
}

/// The fields after the command name of a `/proc/PID/stat` line: the name (field 2) may contain
/// spaces and parentheses, so fields resume after the last ')'.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace().collect())
}

/// CPU ticks (utime + stime, fields 14 and 15) and resident pages (field 24) from `/proc/PID/stat`,
/// the cheapest file to read every interval.
pub fn parse_stat(stat: &str) -> Option<(u64, u64)> {
    let fields = stat_fields(stat)?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let rss_pages: u64 = fields.get(21)?.parse().ok()?;
    Some((utime + stime, rss_pages))
}

/// The resident-set high-water mark (VmHWM) from `/proc/PID/status`, in bytes.
pub fn parse_peak(status: &str) -> Option<u64> {
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?;
    kib.parse::<u64>().ok().map(|v| v.saturating_mul(1024))
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(1) as u64
}

/// A /proc file's whole text, read from its start into `buf` (reused): the kernel writes these
/// files afresh at offset 0, so one open file can be read again and again.
fn read_from_start<'b>(file: &File, buf: &'b mut Vec<u8>) -> Option<&'b str> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        let n = file.read_at(&mut chunk, buf.len() as u64).ok()?;
        buf.extend_from_slice(&chunk[..n]);
        if n < chunk.len() {
            return std::str::from_utf8(buf).ok();
        }
    }
}

fn read_once<'b>(path: &str, buf: &'b mut Vec<u8>) -> Option<&'b str> {
    read_from_start(&File::open(path).ok()?, buf)
}

/// The watched processes' `/proc/PID/stat`, kept open and read again every interval: one system
/// call a reading instead of five (open, size, two reads, close).
#[derive(Default)]
struct StatFiles {
    open: HashMap<u32, File>,
    buf: Vec<u8>,
}

impl StatFiles {
    /// CPU ticks and resident pages of `pid`; `None` once it is gone.
    fn read(&mut self, pid: u32) -> Option<(u64, u64)> {
        let file = match self.open.entry(pid) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(File::open(format!("/proc/{pid}/stat")).ok()?),
        };
        // An exited process's open file reads as an error, even when its pid is taken again.
        let reading = read_from_start(file, &mut self.buf).and_then(parse_stat);
        if reading.is_none() {
            self.open.remove(&pid);
        }
        reading
    }

    /// Closes the files of processes no longer watched.
    fn keep_only(&mut self, pids: &[u32]) {
        self.open.retain(|pid, _| pids.contains(pid));
    }
}

fn read_peak(pid: u32, buf: &mut Vec<u8>) -> Option<u64> {
    parse_peak(read_once(&format!("/proc/{pid}/status"), buf)?)
}

/// The parent pid from a `/proc/PID/stat` line (field 4).
fn parent_of(stat: &str) -> Option<u32> {
    stat_fields(stat)?.get(1)?.parse().ok()
}

/// Every live process's children, from one scan of /proc.
fn children_by_parent() -> HashMap<u32, Vec<u32>> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut buf = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Some(stat) = read_once(&format!("/proc/{pid}/stat"), &mut buf) else {
                continue;
            };
            if let Some(parent) = parent_of(stat) {
                children.entry(parent).or_default().push(pid);
            }
        }
    }
    children
}

/// The live children of `parent`.
pub fn children(parent: u32) -> Vec<u32> {
    children_by_parent().remove(&parent).unwrap_or_default()
}

/// Each root with all its live descendants (root first), from one scan of /proc.
pub fn descendants(roots: impl IntoIterator<Item = u32>) -> HashMap<u32, Vec<u32>> {
    let children = children_by_parent();
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

/// How often the process trees are rebuilt from a scan of all of /proc: the scan costs far more than
/// reading the workers' own files, and trees change rarely (data-loader processes at epoch starts).
const TREE_REFRESH: Duration = Duration::from_secs(5);

/// Each watched root's process tree, rescanned at most every `TREE_REFRESH` or when the roots change.
#[derive(Default)]
pub struct Trees {
    roots: Vec<u32>,
    trees: HashMap<u32, Vec<u32>>,
    scanned: Option<Instant>,
}

impl Trees {
    /// Rescans when due; true when it did.
    pub fn refresh(&mut self, roots: &[u32]) -> bool {
        let stale = self.scanned.is_none_or(|t| t.elapsed() >= TREE_REFRESH);
        if stale || self.roots != roots {
            self.trees = descendants(roots.iter().copied());
            self.roots = roots.to_vec();
            self.scanned = Some(Instant::now());
            return true;
        }
        false
    }

    /// The pids of `root`'s tree (just `root` until a scan has seen it).
    pub fn tree(&self, root: u32) -> Vec<u32> {
        self.trees.get(&root).cloned().unwrap_or_else(|| vec![root])
    }

    /// Every pid of every tree.
    fn all(&self) -> Vec<u32> {
        self.roots
            .iter()
            .flat_map(|&root| self.tree(root))
            .collect()
    }
}

/// A worker's process tree read as one: memory and CPU summed. The root's high-water mark is read
/// only when `peak` asks (it lives in the costlier status file); the peak is never below the tree's
/// current total.
fn read_tree(
    files: &mut StatFiles,
    pids: &[u32],
    page: u64,
    known_peak: u64,
    peak: bool,
) -> Option<ProcReading> {
    let readings: Vec<(u64, u64)> = pids.iter().filter_map(|&p| files.read(p)).collect();
    readings.first()?;
    let rss_bytes = readings.iter().map(|&(_, pages)| pages * page).sum();
    let root_peak = if peak {
        pids.first()
            .and_then(|&p| read_peak(p, &mut files.buf))
            .unwrap_or(0)
    } else {
        0
    };
    Some(ProcReading {
        rss_bytes,
        peak_rss_bytes: known_peak.max(root_peak).max(rss_bytes),
        cpu_ticks: readings.iter().map(|&(ticks, _)| ticks).sum(),
    })
}

/// The processes to watch, keyed by worker index; the hub adds them as they start.
pub type Watched = Arc<Mutex<HashMap<usize, u32>>>;

/// (worker, pid) pairs in worker order, so that readings come out in a stable order; `None` once the
/// hub is gone.
pub fn watched_pids(watched: &Watched) -> Option<Vec<(usize, u32)>> {
    let mut pids: Vec<(usize, u32)> = watched.lock().ok()?.iter().map(|(&k, &v)| (k, v)).collect();
    pids.sort_unstable();
    Some(pids)
}

/// Reads the workers' process trees; driven by the session's clock (one reading per worker per
/// interval), so it needs no thread of its own and costs no extra wake-ups.
pub struct ProcSampler {
    last: HashMap<u32, (Instant, u64)>,
    peaks: HashMap<u32, u64>,
    trees: Trees,
    files: StatFiles,
    page: u64,
    ticks_per_s: f64,
}

impl Default for ProcSampler {
    fn default() -> Self {
        ProcSampler {
            last: HashMap::new(),
            peaks: HashMap::new(),
            trees: Trees::default(),
            files: StatFiles::default(),
            page: page_size(),
            // SAFETY: sysconf has no preconditions.
            ticks_per_s: unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64,
        }
    }
}

impl ProcSampler {
    /// The CPU time of every worker tree read so far, at its latest reading, in clock ticks.
    pub fn workers_ticks(&self) -> u64 {
        self.last.values().map(|&(_, ticks)| ticks).sum()
    }

    /// One `Body::Process` per (worker, pid) whose process is still there.
    pub fn sample(&mut self, workers: &[(usize, u32)]) -> Vec<(usize, Body)> {
        let roots: Vec<u32> = workers.iter().map(|&(_, pid)| pid).collect();
        let rescanned = self.trees.refresh(&roots);
        if rescanned {
            self.files.keep_only(&self.trees.all());
        }
        let mut readings = Vec::with_capacity(workers.len());
        for &(worker, pid) in workers {
            let known_peak = self.peaks.get(&pid).copied().unwrap_or(0);
            let tree = self.trees.tree(pid);
            let Some(reading) = read_tree(&mut self.files, &tree, self.page, known_peak, rescanned)
            else {
                continue;
            };
            let now = Instant::now();
            let cpu_percent = self.last.get(&pid).and_then(|&(then, ticks)| {
                let wall = now.duration_since(then).as_secs_f64();
                (wall > 0.0).then(|| {
                    reading.cpu_ticks.saturating_sub(ticks) as f64 / self.ticks_per_s / wall * 100.0
                })
            });
            self.last.insert(pid, (now, reading.cpu_ticks));
            self.peaks.insert(pid, reading.peak_rss_bytes);
            readings.push((
                worker,
                Body::Process {
                    pid,
                    rss_bytes: reading.rss_bytes,
                    peak_rss_bytes: reading.peak_rss_bytes,
                    cpu_percent,
                },
            ));
        }
        readings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_found_by_its_parent() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let found = children(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&child.id()), "{found:?}");
        assert!(children(u32::MAX).is_empty());
    }

    #[test]
    fn parses_stat_and_status() {
        let stat =
            "42 (py thon) (x) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1 123456 789 1";
        assert_eq!(parse_stat(stat), Some((300, 789)));
        assert_eq!(
            parse_peak("Name:\tpython3\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"),
            Some(2048 * 1024)
        );
    }

    #[test]
    fn garbage_gives_none() {
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("1 (a) S"), None);
        assert_eq!(parse_peak("VmHWM: x kB"), None);
    }

    /// CPU time this process has used.
    fn cpu_time() -> Duration {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid timespec for the call to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }

    #[test]
    fn an_open_stat_file_reads_fresh_numbers_until_its_process_is_gone() {
        let mut files = StatFiles::default();
        let me = std::process::id();
        let (before, _) = files.read(me).unwrap();
        let start = cpu_time();
        while cpu_time() - start < Duration::from_millis(80) {
            std::hint::black_box(0u64);
        }
        let (after, _) = files.read(me).unwrap();
        assert!(after > before, "{before} then {after} ticks");

        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(files.read(child.id()).is_some());
        assert_eq!(files.open.len(), 2);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(files.read(child.id()), None);
        assert_eq!(files.open.len(), 1, "the gone process's file is closed");
        files.keep_only(&[]);
        assert!(files.open.is_empty());
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
        let mut sampler = ProcSampler::default();
        let me = std::process::id();
        let first = sampler.sample(&[(7, me)]);
        std::thread::sleep(Duration::from_millis(20));
        let second = sampler.sample(&[(7, me), (8, u32::MAX)]);
        assert_eq!(
            second.len(),
            1,
            "a pid that does not exist gives no reading"
        );
        match (&first[0], &second[0]) {
            (
                (
                    7,
                    Body::Process {
                        rss_bytes,
                        peak_rss_bytes,
                        cpu_percent: None,
                        ..
                    },
                ),
                (
                    7,
                    Body::Process {
                        cpu_percent: Some(cpu),
                        ..
                    },
                ),
            ) => {
                assert!(*rss_bytes > 0 && peak_rss_bytes >= rss_bytes);
                assert!(*cpu >= 0.0);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
