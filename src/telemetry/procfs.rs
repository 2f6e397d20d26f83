//! Samples worker process trees from /proc at the hub's interval: resident memory, its peak, and CPU use.
//! Readings are events like any other, so they are recorded and folded into the state.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use ::procfs::FromRead;
use golow_protocol::event::Body;

/// `/proc/PID/stat` parsed by procfs, which slices the line around the command name unchecked (the pid ends one
/// byte before the first '(', the fields start two after the last ')'): the name may hold spaces and parentheses,
/// and malformed input must give `None` rather than a panic, so a line those slices would not fit is refused first.
fn proc_stat(stat: &[u8]) -> Option<::procfs::process::Stat> {
    // The text procfs would make of the bytes: borrowed, unless the name is not UTF-8 (the kernel writes it as set).
    let text = String::from_utf8_lossy(stat);
    let line = text.trim();
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    line.get(..open.checked_sub(1)?)?;
    line.get(open + 1..close)?;
    line.get(close + 2..)?;
    ::procfs::process::Stat::from_read(line.as_bytes()).ok()
}

/// CPU ticks (utime + stime) and resident pages from `/proc/PID/stat`, the cheapest file to read every interval.
pub fn parse_stat(stat: &[u8]) -> Option<(u64, u64)> {
    parse_member(stat).map(|m| (m.ticks, m.pages))
}

/// What a sample reads of each process of a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    /// utime + stime, in clock ticks.
    ticks: u64,
    /// Resident pages.
    pages: u64,
    /// When the process started, in clock ticks after boot: with the pid, it names one process, as a pid alone does
    /// not once it is taken again.
    start: u64,
    threads: u64,
}

fn parse_member(stat: &[u8]) -> Option<Stat> {
    let stat = proc_stat(stat)?;
    Some(Stat {
        ticks: stat.utime.saturating_add(stat.stime),
        pages: stat.rss,
        start: stat.starttime,
        threads: u64::try_from(stat.num_threads).unwrap_or(0),
    })
}

/// The resident-set high-water mark (VmHWM) from `/proc/PID/status`, in bytes. Read by hand, not by procfs: its
/// `Status` parses every line into a map and refuses a file that lacks any of some twenty fields (a sandbox's or an
/// older kernel's), 60 times the cost of finding this one line, which is all golow needs.
pub fn parse_peak(status: &[u8]) -> Option<u64> {
    let line = status
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"VmHWM:"))?;
    let kib = std::str::from_utf8(line).ok()?.split_whitespace().next()?;
    kib.parse::<u64>().ok().map(|v| v.saturating_mul(1024))
}

/// A /proc file's whole contents, read from its start into `buf` (reused): the kernel writes these
/// files afresh at offset 0, so one open file can be read again and again.
fn read_from_start<'b>(file: &File, buf: &'b mut Vec<u8>) -> Option<&'b [u8]> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        let n = file.read_at(&mut chunk, buf.len() as u64).ok()?;
        buf.extend_from_slice(&chunk[..n]);
        if n < chunk.len() {
            return Some(buf);
        }
    }
}

fn read_once<'b>(path: &str, buf: &'b mut Vec<u8>) -> Option<&'b [u8]> {
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
    /// CPU ticks, resident pages and start of `pid`; `None` once it is gone.
    fn read(&mut self, pid: u32) -> Option<Stat> {
        let file = match self.open.entry(pid) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(File::open(format!("/proc/{pid}/stat")).ok()?),
        };
        // An exited process's open file reads as an error, even when its pid is taken again.
        let reading = read_from_start(file, &mut self.buf).and_then(parse_member);
        if reading.is_none() {
            self.open.remove(&pid);
        }
        reading
    }

    /// Closes the files of processes no longer watched.
    fn keep_only(&mut self, pids: &HashSet<u32>) {
        self.open.retain(|pid, _| pids.contains(pid));
    }
}

fn read_peak(pid: u32, buf: &mut Vec<u8>) -> Option<u64> {
    parse_peak(read_once(&format!("/proc/{pid}/status"), buf)?)
}

/// What `/proc/PID/stat` says of a process that names it for good: when it started (the pid with it names one
/// process, as a pid alone does not once it is taken again), its parent, and whether it is a kernel thread or has
/// ended and waits to be reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub start: u64,
    pub parent: u32,
    pub kernel_thread: bool,
    pub zombie: bool,
}

/// The kernel's flag for its own threads (`PF_KTHREAD`, include/linux/sched.h).
const PF_KTHREAD: u32 = 0x0020_0000;

/// `pid`'s identity, as /proc says now; `None` when it is gone.
pub fn identity(pid: u32) -> Option<Identity> {
    let mut buf = Vec::new();
    let stat = proc_stat(read_once(&format!("/proc/{pid}/stat"), &mut buf)?)?;
    Some(Identity {
        start: stat.starttime,
        parent: u32::try_from(stat.ppid).ok()?,
        kernel_thread: stat.flags & PF_KTHREAD != 0,
        zombie: matches!(stat.state, 'Z' | 'X'),
    })
}

/// The process `pid` is a thread of (`Tgid` in `/proc/PID/status`): `pid` itself for a process, another for one of
/// its threads, which /proc also lists by its own ID.
pub fn thread_group(pid: u32) -> Option<u32> {
    let mut buf = Vec::new();
    let status = read_once(&format!("/proc/{pid}/status"), &mut buf)?;
    let line = status
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"Tgid:"))?;
    std::str::from_utf8(line).ok()?.trim().parse().ok()
}

/// The parent pid from a `/proc/PID/stat` line.
fn parent_of(stat: &[u8]) -> Option<u32> {
    u32::try_from(proc_stat(stat)?.ppid).ok()
}

/// Parents followed at most this far up from a process: no real tree is this deep.
const MAX_ANCESTORS: usize = 4096;

/// Whether `pid` is `root` or one of its descendants, as /proc says now: its parents followed up to `root`. A
/// process that has ended, or was adopted by another when its parent ended, is not.
pub fn descends_from(pid: u32, root: u32) -> bool {
    let mut buf = Vec::new();
    let mut pid = pid;
    for _ in 0..MAX_ANCESTORS {
        if pid == root {
            return true;
        }
        match read_once(&format!("/proc/{pid}/stat"), &mut buf).and_then(parent_of) {
            // Pid 1 and the kernel's threads have parent 0.
            Some(parent) if parent != 0 && parent != pid => pid = parent,
            _ => return false,
        }
    }
    false
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

/// While a root is younger than this (since it was first watched), its tree is rescanned at every sample, though at
/// most every `YOUNG_REFRESH`: a command's shell starts its program just after golow started the shell, and a
/// launcher its ranks a moment later, so a tree first scanned at the spawn and then every `TREE_REFRESH` would miss
/// them for seconds. Young roots are few and brief, so the costly scans stay few.
const YOUNG: Duration = Duration::from_secs(10);
const YOUNG_REFRESH: Duration = Duration::from_millis(250);

/// Each watched root's process tree, rescanned every sample (at most every `YOUNG_REFRESH`) while a root is young,
/// every `TREE_REFRESH` after, and whenever the roots change.
#[derive(Default)]
pub struct Trees {
    roots: Vec<u32>,
    trees: HashMap<u32, Vec<u32>>,
    scanned: Option<Instant>,
    /// When each watched root was first watched.
    first_seen: HashMap<u32, Instant>,
}

impl Trees {
    /// Rescans when due; true when it did.
    pub fn refresh(&mut self, roots: &[u32]) -> bool {
        let now = Instant::now();
        for &root in roots {
            self.first_seen.entry(root).or_insert(now);
        }
        self.first_seen.retain(|root, _| roots.contains(root));
        let young = self.first_seen.values().any(|&t| now - t < YOUNG);
        let refresh = if young { YOUNG_REFRESH } else { TREE_REFRESH };
        let stale = self.scanned.is_none_or(|t| now - t >= refresh);
        if stale || self.roots != roots {
            self.trees = descendants(roots.iter().copied());
            self.roots = roots.to_vec();
            self.scanned = Some(now);
            return true;
        }
        false
    }

    /// The pids of `root`'s tree (just `root` until a scan has seen it).
    pub fn tree(&self, root: u32) -> Vec<u32> {
        self.trees.get(&root).cloned().unwrap_or_else(|| vec![root])
    }

    /// The ranks among `ranks` (rank → the pid that said it is that rank) whose process lies in `root`'s tree, each
    /// with its own tree: a hook's word alone never makes golow read another process.
    pub fn rank_trees(&self, root: u32, ranks: &BTreeMap<u32, u32>) -> Vec<(u32, u32, Vec<u32>)> {
        let tree = self.tree(root);
        ranks
            .iter()
            .filter(|(_, pid)| tree.contains(pid))
            .map(|(&rank, &pid)| (rank, pid, self.tree(pid)))
            .collect()
    }

    /// Every pid of every tree.
    fn all(&self) -> HashSet<u32> {
        self.roots
            .iter()
            .flat_map(|&root| self.tree(root))
            .collect()
    }
}

/// A worker's process tree read as one: each member's stat, and their resident memory summed. With `peaks` (at
/// rescans: they live in the costlier status files) the highest of the members' own high-water marks (VmHWM) too,
/// which catches a child's peak between two samples. Not their sum: each member peaked at its own time (a loader
/// process that came and went, a rank that freed before another allocated), so the sum would report a peak the
/// tree never had; the highest one is a floor that was really reached.
struct TreeReading {
    members: Vec<Member>,
}

/// One process of a tree as a sample read it.
struct Member {
    pid: u32,
    stat: Stat,
    /// Its own high-water mark, where the sample read it (0 where not).
    peak: u64,
    /// CPU ticks it used since its previous reading.
    used: u64,
}

/// What a reading says of some members of a tree together.
#[derive(Default)]
struct Totals {
    /// Resident memory, summed.
    rss: u64,
    /// The highest of the members' own peaks.
    peak: u64,
    /// CPU ticks used, summed.
    used: u64,
    threads: u64,
}

impl TreeReading {
    /// The totals of the members in `pids`.
    fn of(&self, pids: &[u32], page: u64) -> Totals {
        self.members
            .iter()
            .filter(|m| pids.contains(&m.pid))
            .fold(Totals::default(), |t, m| Totals {
                rss: t.rss.saturating_add(m.stat.pages.saturating_mul(page)),
                peak: t.peak.max(m.peak),
                used: t.used.saturating_add(m.used),
                threads: t.threads.saturating_add(m.stat.threads),
            })
    }
}

fn read_tree(files: &mut StatFiles, pids: &[u32], peaks: bool) -> Option<TreeReading> {
    let mut members = Vec::with_capacity(pids.len());
    for &pid in pids {
        if let Some(stat) = files.read(pid) {
            members.push(Member {
                pid,
                stat,
                peak: 0,
                used: 0,
            });
        }
    }
    members.first()?;
    if peaks {
        for m in &mut members {
            m.peak = read_peak(m.pid, &mut files.buf).unwrap_or(0);
        }
    }
    Some(TreeReading { members })
}

/// The CPU ticks a member used since its previous reading, which `members` then holds: none at its first reading
/// (what it used before golow found it is not this interval's), nor when its pid now names another process.
fn used_since(members: &mut HashMap<u32, (u64, u64)>, pid: u32, stat: Stat) -> u64 {
    match members.insert(pid, (stat.start, stat.ticks)) {
        Some((start, ticks)) if start == stat.start => stat.ticks.saturating_sub(ticks),
        _ => 0,
    }
}

/// What the samplers read, keyed by worker index, in worker order so that readings come out in a stable order: each
/// worker's process, and the processes of a `--cmd` worker's ranks as their hooks named them. The hub keeps it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Watching {
    pub roots: BTreeMap<usize, u32>,
    /// Worker → rank → the latest process to say it is that rank (a restarted rank replaces the one before).
    pub ranks: BTreeMap<usize, BTreeMap<u32, u32>>,
    /// The worker whose turn it is, under the alternating schedule: the one that holds the GPU.
    pub turn: Option<usize>,
}

impl Watching {
    /// Workers' processes alone, no ranks.
    pub fn of(roots: &[(usize, u32)]) -> Watching {
        Watching {
            roots: roots.iter().copied().collect(),
            ranks: BTreeMap::new(),
            turn: None,
        }
    }

    /// Every process whose tree is read: the workers', then their ranks'.
    pub fn tree_roots(&self) -> Vec<u32> {
        let mut roots: Vec<u32> = self.roots.values().copied().collect();
        for pid in self.ranks.values().flat_map(BTreeMap::values) {
            if !roots.contains(pid) {
                roots.push(*pid);
            }
        }
        roots
    }

    /// The ranks a worker's hooks named, once the worker has a process.
    pub fn ranks_of(&self, worker: usize) -> &BTreeMap<u32, u32> {
        static NONE: BTreeMap<u32, u32> = BTreeMap::new();
        self.ranks.get(&worker).unwrap_or(&NONE)
    }
}

/// A watched worker's process tree (its own process first), and its ranks': (rank, its process, that process's
/// tree).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerTree {
    pub pids: Vec<u32>,
    pub ranks: Vec<(u32, u32, Vec<u32>)>,
}

/// Reads the workers' process trees; driven by the session's clock (one reading per worker per
/// interval), so it needs no thread of its own and costs no extra wake-ups.
///
/// CPU is accounted per process: a tree's CPU over an interval is the sum of what each of its processes used since
/// its own previous reading, never a difference of the tree's summed ticks (which jumps by a process's whole
/// lifetime when a rescan finds it, and falls when one ends). A process seen for the first time starts at zero, so
/// the CPU it used before (a script's start-up, when a rescan first finds it) never lands in one interval; one that
/// ended simply drops out. A tree's CPU share thus stays within the machine's cores, give or take a tick.
pub struct ProcSampler {
    /// Each watched root's last reading: when, and the CPU ticks its tree has used while watched (the running total
    /// of the per-interval sums).
    last: HashMap<u32, (Instant, u64)>,
    /// The running totals of the roots no longer watched, so that `workers_ticks` never falls when a worker ends.
    retired_ticks: u64,
    /// Each member's start and CPU ticks at its last reading; only members of the current trees.
    members: HashMap<u32, (u64, u64)>,
    /// Each watched root's tree's peak resident memory so far.
    peaks: HashMap<u32, u64>,
    /// Each watched rank's process: when it was last read, and its tree's peak resident memory so far.
    rank_last: HashMap<u32, Instant>,
    rank_peaks: HashMap<u32, u64>,
    trees: Trees,
    files: StatFiles,
    page: u64,
    ticks_per_s: f64,
}

impl Default for ProcSampler {
    fn default() -> Self {
        ProcSampler {
            last: HashMap::new(),
            retired_ticks: 0,
            members: HashMap::new(),
            peaks: HashMap::new(),
            rank_last: HashMap::new(),
            rank_peaks: HashMap::new(),
            trees: Trees::default(),
            files: StatFiles::default(),
            page: ::procfs::page_size(),
            ticks_per_s: ::procfs::ticks_per_second().max(1) as f64,
        }
    }
}

impl ProcSampler {
    /// The CPU time the workers' trees have used while watched, at their latest readings, in clock ticks: a running
    /// total that never falls (a process that ends or is found late changes only what is added from then on), so
    /// its difference between two calls is the workers' CPU time meanwhile.
    pub fn workers_ticks(&self) -> u64 {
        self.retired_ticks + self.last.values().map(|&(_, ticks)| ticks).sum::<u64>()
    }

    /// One `Body::Process` per watched worker whose process is still there, each followed by one per rank of it
    /// whose process lies in its tree.
    pub fn sample(&mut self, watching: &Watching) -> Vec<(usize, Body)> {
        let roots: Vec<u32> = watching.roots.values().copied().collect();
        let mut retired = 0u64;
        self.last.retain(|root, &mut (_, ticks)| {
            let watched = roots.contains(root);
            if !watched {
                retired = retired.saturating_add(ticks);
            }
            watched
        });
        self.retired_ticks = self.retired_ticks.saturating_add(retired);
        self.peaks.retain(|root, _| roots.contains(root));
        let rescanned = self.trees.refresh(&watching.tree_roots());
        if rescanned {
            let all = self.trees.all();
            self.files.keep_only(&all);
            self.members.retain(|pid, _| all.contains(pid));
        }
        let mut readings = Vec::with_capacity(roots.len());
        let mut ranks_read = HashSet::new();
        for (&worker, &pid) in &watching.roots {
            let tree = self.trees.tree(pid);
            let Some(mut reading) = read_tree(&mut self.files, &tree, rescanned) else {
                continue;
            };
            for m in &mut reading.members {
                m.used = used_since(&mut self.members, m.pid, m.stat);
            }
            let Totals {
                rss: rss_bytes,
                peak: member_peak,
                used,
                threads,
            } = reading.of(&tree, self.page);
            let now = Instant::now();
            let previous = self.last.get(&pid).copied();
            let cpu_percent = previous.and_then(|(then, _)| self.cpu_percent(used, then, now));
            let total = previous.map_or(0, |(_, t)| t).saturating_add(used);
            self.last.insert(pid, (now, total));
            let peak = self.peaks.entry(pid).or_insert(0);
            *peak = (*peak).max(rss_bytes).max(member_peak);
            readings.push((
                worker,
                Body::Process {
                    pid,
                    rss_bytes,
                    peak_rss_bytes: *peak,
                    cpu_percent,
                    rank: None,
                    threads: u32::try_from(threads).ok(),
                },
            ));
            for (rank, rank_pid, rank_tree) in self.trees.rank_trees(pid, watching.ranks_of(worker))
            {
                if !reading.members.iter().any(|m| m.pid == rank_pid) {
                    continue;
                }
                let Totals {
                    rss: rss_bytes,
                    peak: member_peak,
                    used,
                    threads,
                } = reading.of(&rank_tree, self.page);
                ranks_read.insert(rank_pid);
                let then = self.rank_last.insert(rank_pid, now);
                let peak = self.rank_peaks.entry(rank_pid).or_insert(0);
                *peak = (*peak).max(rss_bytes).max(member_peak);
                readings.push((
                    worker,
                    Body::Process {
                        pid: rank_pid,
                        rss_bytes,
                        peak_rss_bytes: *peak,
                        cpu_percent: then.and_then(|then| self.cpu_percent(used, then, now)),
                        rank: Some(rank),
                        threads: u32::try_from(threads).ok(),
                    },
                ));
            }
        }
        self.rank_last.retain(|pid, _| ranks_read.contains(pid));
        self.rank_peaks.retain(|pid, _| ranks_read.contains(pid));
        readings
    }

    /// Each watched worker's tree and its ranks' as this tick's `sample` read them: the one reading of /proc a
    /// tick makes, which the NVML sampler is handed rather than scanning /proc again.
    pub fn worker_trees(&self, watching: &Watching) -> HashMap<usize, WorkerTree> {
        watching
            .roots
            .iter()
            .map(|(&worker, &pid)| {
                let tree = WorkerTree {
                    pids: self.trees.tree(pid),
                    ranks: self.trees.rank_trees(pid, watching.ranks_of(worker)),
                };
                (worker, tree)
            })
            .collect()
    }

    /// `used` ticks between `then` and `now` as a share of one core (100 = one core busy), to a tenth of a percent:
    /// a tick is a hundredth of a second, so over a sampling interval the share is known to a few percent at best, and
    /// the digits beyond were the wall clock's noise, recorded every sampling interval for every worker.
    fn cpu_percent(&self, used: u64, then: Instant, now: Instant) -> Option<f64> {
        let wall = now.duration_since(then).as_secs_f64();
        (wall > 0.0).then(|| (used as f64 / self.ticks_per_s / wall * 1000.0).round() / 10.0)
    }
}

#[cfg(test)]
mod tests {
    use rustix::process::{Pid, Signal, kill_process, kill_process_group};

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
    fn a_grandchild_descends_from_its_ancestors_and_no_one_else_does() {
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let me = std::process::id();
        let deadline = Instant::now() + Duration::from_secs(10);
        let grandchild = loop {
            if let Some(&pid) = children(shell.id()).first() {
                break pid;
            }
            assert!(Instant::now() < deadline, "the shell started no child");
            std::thread::sleep(Duration::from_millis(10));
        };
        let held = [
            descends_from(grandchild, shell.id()),
            descends_from(grandchild, me),
            descends_from(me, me),
            descends_from(me, shell.id()),
            descends_from(1, me),
            descends_from(u32::MAX, me),
        ];
        if let Some(sleep) = Pid::from_raw(grandchild as i32) {
            let _ = kill_process(sleep, Signal::KILL);
        }
        let _ = shell.kill();
        let _ = shell.wait();
        assert_eq!(held, [true, true, true, false, false, false]);
    }

    #[test]
    fn parses_stat_and_status() {
        let stat = b"42 (py thon) (x) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 4242 123456 789 1 \
            94220207910912 94220207930793 140721859605904 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94220207946800 \
            94220207948416 94221132075008 140721859607265 140721859607285 140721859607285 140721859608555 0\n";
        assert_eq!(parse_stat(stat), Some((300, 789)));
        assert_eq!(
            parse_member(stat),
            Some(Stat {
                ticks: 300,
                pages: 789,
                start: 4242,
                threads: 1,
            })
        );
        assert_eq!(parent_of(stat), Some(1));
        // The kernel writes a name as it was set, UTF-8 or not.
        let mut renamed = stat.to_vec();
        renamed[4] = 0xff;
        assert_eq!(parse_stat(&renamed), Some((300, 789)));
        assert_eq!(
            parse_peak(b"Name:\tpython3\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"),
            Some(2048 * 1024)
        );
    }

    #[test]
    fn garbage_gives_none() {
        assert_eq!(parse_stat(b""), None);
        assert_eq!(parse_stat(b"1 (a) S"), None);
        // Lines that would slice procfs's parsing out of bounds or through a character.
        for line in [
            "(a) S 1",
            "1 (a)",
            "1 ) ( S 1",
            "1 (a)\u{e9}1 2",
            "\u{e9}(a) S 1",
        ] {
            assert_eq!(parse_stat(line.as_bytes()), None, "{line:?}");
            assert_eq!(parent_of(line.as_bytes()), None, "{line:?}");
        }
        assert_eq!(parse_peak(b"VmHWM: x kB"), None);
    }

    /// CPU time this process has used.
    fn cpu_time() -> Duration {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }

    #[test]
    fn an_open_stat_file_reads_fresh_numbers_until_its_process_is_gone() {
        let mut files = StatFiles::default();
        let me = std::process::id();
        let before = files.read(me).unwrap().ticks;
        let start = cpu_time();
        while cpu_time() - start < Duration::from_millis(80) {
            std::hint::black_box(0u64);
        }
        let after = files.read(me).unwrap().ticks;
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
        files.keep_only(&HashSet::new());
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

    /// `sh -c SCRIPT` in a process group of its own, killed with its children when dropped; its output's lines
    /// arrive on `lines`.
    struct Shell {
        child: std::process::Child,
        lines: std::sync::mpsc::Receiver<String>,
    }

    impl Shell {
        fn run(script: &str) -> Shell {
            use std::io::BufRead;
            use std::os::unix::process::CommandExt;
            let mut child = std::process::Command::new("sh")
                .args(["-c", script])
                .stdout(std::process::Stdio::piped())
                .process_group(0)
                .spawn()
                .unwrap();
            let out = std::io::BufReader::new(child.stdout.take().unwrap());
            let (tx, lines) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in out.lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
            Shell { child, lines }
        }

        fn pid(&self) -> u32 {
            self.child.id()
        }

        /// The script's next line, waiting for it.
        fn line(&self) -> String {
            self.lines
                .recv_timeout(Duration::from_secs(30))
                .expect("the script wrote its line")
        }
    }

    impl Drop for Shell {
        fn drop(&mut self) {
            if let Some(leader) = Pid::from_raw(self.child.id() as i32) {
                let _ = kill_process_group(leader, Signal::KILL);
            }
            let _ = self.child.wait();
        }
    }

    /// A Python process that says its pid, burns `seconds` of CPU, says `burned`, and sleeps.
    fn burner(seconds: f64) -> String {
        format!(
            "python3 -c 'import os, time\nprint(os.getpid(), flush=True)\nt = time.process_time()\nwhile time.process_time() - t < {seconds}: pass\nprint(\"burned\", flush=True)\ntime.sleep(30)'"
        )
    }

    fn cpu_of(reading: &[(usize, Body)]) -> Option<f64> {
        match reading {
            [(_, Body::Process { cpu_percent, .. })] => *cpu_percent,
            other => panic!("{other:?}"),
        }
    }

    /// The most a tree's CPU share can be over an interval of `ms` milliseconds: every core, give or take a tick.
    fn most_cpu(ms: f64) -> f64 {
        let tick_ms = 1000.0 / rustix::param::clock_ticks_per_second().max(1) as f64;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        cores * 100.0 + 2.0 * tick_ms / ms * 100.0
    }

    #[test]
    fn a_shells_child_is_followed_from_its_start_within_the_cores() {
        // Like a `--cmd` worker: the shell golow starts, and the program it starts a moment later.
        let shell = Shell::run(&format!("sleep 0.2; {}; true", burner(0.8)));
        let root = shell.pid();
        let mut sampler = ProcSampler::default();
        let start = Instant::now();
        let mut samples = Vec::new();
        let mut said = Vec::new();
        while !said.iter().any(|line| line == "burned") && start.elapsed() < Duration::from_secs(10)
        {
            said.extend(shell.lines.try_iter());
            let cpu = cpu_of(&sampler.sample(&Watching::of(&[(0, root)])));
            samples.push((start.elapsed(), sampler.trees.tree(root), cpu));
            std::thread::sleep(Duration::from_millis(150));
        }
        let [pid, burned] = said.as_slice() else {
            panic!("{said:?}")
        };
        assert_eq!(burned, "burned");
        let child: u32 = pid.parse().unwrap();
        for (at, _, cpu) in &samples {
            let cpu = cpu.unwrap_or(0.0);
            assert!(cpu <= most_cpu(150.0), "{cpu}% at {at:?}");
        }
        let found = samples.iter().find(|(_, tree, _)| tree.contains(&child));
        assert!(
            found.is_some_and(|(at, _, _)| *at < Duration::from_millis(1500)),
            "the child was found {:?}",
            found.map(|(at, ..)| at)
        );
        // Nearly all the child's CPU was counted: it started burning about when it was found.
        let counted = sampler.workers_ticks() as f64 / sampler.ticks_per_s;
        assert!(counted >= 0.4, "{counted} s of the child's 0.8 s");

        // A worker that ends leaves its CPU in the total, and nothing in the maps.
        let total = sampler.workers_ticks();
        assert!(sampler.sample(&Watching::default()).is_empty());
        assert_eq!(sampler.workers_ticks(), total);
        assert!(sampler.last.is_empty() && sampler.peaks.is_empty());
        assert!(sampler.members.is_empty() && sampler.files.open.is_empty());
    }

    #[test]
    fn a_process_found_late_starts_its_cpu_at_zero() {
        // The shell's child burns a second of CPU after the tree was first scanned without it.
        let shell = Shell::run(&format!("sleep 0.5; {}; true", burner(1.0)));
        let root = shell.pid();
        let mut sampler = ProcSampler::default();
        assert_eq!(cpu_of(&sampler.sample(&Watching::of(&[(0, root)]))), None);
        let child: u32 = shell.line().parse().unwrap();
        assert!(!sampler.trees.tree(root).contains(&child), "scanned before");
        assert_eq!(shell.line(), "burned");
        // The first reading that finds it (a young root's tree is rescanned at every sample), and a rescan soon
        // after, which a change of the roots forces (as any rescan after a reading without the child would).
        let found = cpu_of(&sampler.sample(&Watching::of(&[(0, root)]))).unwrap();
        let found_tree = sampler.trees.tree(root);
        std::thread::sleep(Duration::from_millis(100));
        let next = cpu_of(&sampler.sample(&Watching::of(&[(0, root), (1, u32::MAX)]))).unwrap();
        assert!(
            next <= most_cpu(100.0),
            "the child's past CPU in 100 ms: {next}%"
        );
        assert!(found_tree.contains(&child), "{found_tree:?}");
        assert!(
            found < 20.0,
            "the child's CPU before it was seen landed in one interval: {found}%"
        );
    }

    #[test]
    fn each_rank_is_read_apart_and_only_inside_its_workers_tree() {
        const SIZE: u64 = 150 << 20;
        // A launcher's two ranks: one burning CPU, one holding memory.
        let shell = Shell::run(&format!(
            "python3 -c 'import os, time\nprint(\"busy\", os.getpid(), flush=True)\nwhile True: pass' & \
             python3 -c 'import os, time\nb = bytearray(b\"x\") * {SIZE}\nprint(\"big\", os.getpid(), flush=True)\ntime.sleep(30)' & wait"
        ));
        let mut pids = BTreeMap::new();
        for _ in 0..2 {
            let line = shell.line();
            let (what, pid) = line.split_once(' ').unwrap();
            pids.insert(what.to_string(), pid.parse::<u32>().unwrap());
        }
        let mut watching = Watching::of(&[(0, shell.pid())]);
        // Rank 2 names a process outside the worker's tree: this one.
        watching.ranks.insert(
            0,
            BTreeMap::from([(0, pids["busy"]), (1, pids["big"]), (2, std::process::id())]),
        );
        let mut sampler = ProcSampler::default();
        sampler.sample(&watching);
        std::thread::sleep(Duration::from_millis(400));
        let readings = sampler.sample(&watching);
        let read: Vec<(u32, Option<u32>, u64, f64)> = readings
            .iter()
            .map(|(worker, body)| match body {
                Body::Process {
                    pid,
                    rank,
                    rss_bytes,
                    cpu_percent,
                    ..
                } if *worker == 0 => (*pid, *rank, *rss_bytes, cpu_percent.unwrap_or(-1.0)),
                other => panic!("{other:?}"),
            })
            .collect();
        let [
            (root, None, tree_rss, tree_cpu),
            (busy, Some(0), busy_rss, busy_cpu),
            (big, Some(1), big_rss, big_cpu),
        ] = read.as_slice()
        else {
            panic!("the worker, then ranks 0 and 1, and no rank 2: {read:?}")
        };
        assert_eq!(
            (*root, *busy, *big),
            (shell.pid(), pids["busy"], pids["big"])
        );
        assert!(*big_rss >= SIZE && *busy_rss < SIZE, "{read:?}");
        assert!(*tree_rss >= big_rss + busy_rss, "{read:?}");
        assert!(*busy_cpu > 20.0 && *big_cpu < 5.0, "{read:?}");
        assert!(*tree_cpu >= busy_cpu + big_cpu - 1.0, "{read:?}");
    }

    #[test]
    fn a_trees_peak_counts_a_childs_own_high_water_mark() {
        const SIZE: u64 = 200 << 20;
        let shell = Shell::run(&format!(
            "python3 -c 'import time\nb = bytearray(b\"x\") * {SIZE}\ndel b\nprint(\"freed\", flush=True)\ntime.sleep(30)'; true"
        ));
        let root = shell.pid();
        let mut sampler = ProcSampler::default();
        let memory = |sampler: &mut ProcSampler| match sampler
            .sample(&Watching::of(&[(0, root)]))
            .as_slice()
        {
            [
                (
                    _,
                    Body::Process {
                        peak_rss_bytes,
                        rss_bytes,
                        ..
                    },
                ),
            ] => (*peak_rss_bytes, *rss_bytes),
            other => panic!("{other:?}"),
        };
        let start = Instant::now();
        let (before, _) = memory(&mut sampler);
        assert!(
            before < SIZE / 2,
            "read before the allocation: {before} bytes"
        );
        assert_eq!(shell.line(), "freed");
        // No sample saw the allocation: only the child's own high-water mark, read at the next rescan, can tell.
        std::thread::sleep(YOUNG_REFRESH.saturating_sub(start.elapsed()));
        let (peak, now) = memory(&mut sampler);
        assert!(peak >= SIZE, "peak {peak} bytes");
        assert!(now < SIZE / 2, "the allocation was freed: {now} bytes");
    }

    #[test]
    fn samples_this_process() {
        let mut sampler = ProcSampler::default();
        let me = std::process::id();
        let first = sampler.sample(&Watching::of(&[(7, me)]));
        // Busy for a while, in ticks of 10 ms: a CPU share of this process that must show.
        let busy_until = Instant::now() + Duration::from_millis(200);
        let mut spins = 0u64;
        while Instant::now() < busy_until {
            spins = std::hint::black_box(spins + 1);
        }
        let second = sampler.sample(&Watching::of(&[(7, me), (8, u32::MAX)]));
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
                        threads: Some(threads),
                        ..
                    },
                ),
            ) => {
                assert!(*rss_bytes > 0 && peak_rss_bytes >= rss_bytes);
                // This test's thread, and the harness's main thread waiting for it.
                assert!(*threads >= 2, "{threads} threads");
                // A spinning thread is a core's worth; under a loaded machine's scheduler, still a visible share.
                assert!(*cpu > 10.0 && *cpu < 100.0 * 64.0, "{cpu}% after spinning");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
