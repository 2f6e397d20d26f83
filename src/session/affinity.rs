//! `--monitor-cpu N`: golow's own threads on one CPU, its workers (and what prepares them) on every CPU the
//! process had. With `--threads` one below the core count and the monitor on the core left, no wake-up of the
//! monitor preempts a worker's thread.

use std::io;
use std::sync::OnceLock;

/// The CPUs golow was given, restored in every process it starts; set once the monitor is pinned.
static GIVEN: OnceLock<libc::cpu_set_t> = OnceLock::new();

/// Pins the calling thread, and every thread it starts from now on, to `cpu`. Call it before the first thread.
pub fn pin_monitor(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain bits; sched_{get,set}affinity read or write exactly one of them.
    unsafe {
        let mut given: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut given) != 0 {
            return Err(io::Error::last_os_error());
        }
        if cpu >= libc::CPU_SETSIZE as usize || !libc::CPU_ISSET(cpu, &given) {
            return Err(io::Error::other(format!(
                "CPU {cpu} is not one this process may run on"
            )));
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &one) != 0 {
            return Err(io::Error::last_os_error());
        }
        let _ = GIVEN.set(given);
    }
    Ok(())
}

/// In a child between fork and exec: back on every CPU golow was given, when the monitor was pinned.
pub fn unpin_child() -> io::Result<()> {
    if let Some(given) = GIVEN.get() {
        // SAFETY: sched_setaffinity is a plain system call, safe between fork and exec.
        if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), given) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
