//! The worker's ends of its channels to the monitor: events out ([`emit`]), turn grants in ([`turns`]), each on a
//! descriptor the launcher passed down and named in the environment (`golow_protocol::channels`).

pub mod emit;
pub mod turns;

use std::fs::File;
use std::os::fd::FromRawFd;

/// The file descriptor the launcher passed down under the environment variable `name`, if any.
fn inherited_fd(name: &str) -> Result<Option<File>, String> {
    let Ok(value) = std::env::var(name) else {
        return Ok(None);
    };
    let fd: i32 = value
        .parse()
        .map_err(|_| format!("{name}={value} is not a file descriptor number"))?;
    // SAFETY: fcntl(F_GETFD) only asks whether the descriptor is open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return Err(format!("{name}={value} is not an open file descriptor"));
    }
    // SAFETY: the descriptor is open and was handed to this process for this use alone.
    Ok(Some(unsafe { File::from_raw_fd(fd) }))
}
