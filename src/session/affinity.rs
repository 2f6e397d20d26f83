//! `--monitor-cpu N`: golow's own threads on one CPU, its workers (and what prepares them) on every CPU the
//! process had. With `--threads` one below the core count and the monitor on the core left, no wake-up of the
//! monitor preempts a worker's thread.

use std::io;
use std::sync::OnceLock;

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// The CPUs golow was given, restored in every process it starts; set once the monitor is pinned.
static GIVEN: OnceLock<CpuSet> = OnceLock::new();

/// Pins the calling thread, and every thread it starts from now on, to `cpu`. Call it before the first thread.
pub fn pin_monitor(cpu: usize) -> io::Result<()> {
    let given = sched_getaffinity(None)?;
    if cpu >= CpuSet::MAX_CPU || !given.is_set(cpu) {
        return Err(io::Error::other(format!(
            "CPU {cpu} is not one this process may run on"
        )));
    }
    let mut one = CpuSet::new();
    one.set(cpu);
    sched_setaffinity(None, &one)?;
    let _ = GIVEN.set(given);
    Ok(())
}

/// In a child between fork and exec (a plain system call, no allocation): back on every CPU golow was given, when
/// the monitor was pinned.
pub fn unpin_child() -> io::Result<()> {
    if let Some(given) = GIVEN.get() {
        sched_setaffinity(None, given)?;
    }
    Ok(())
}
