//! The hub's sampling clock: a timerfd the kernel fires every interval, so that a tick is one wake-up. tokio's own
//! timers wake twice for a period above 64 ms (its wheel first moves a far timer to a finer level), and on a machine
//! whose workers fill every core each needless wake-up preempts one of their threads.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

pub struct Ticker {
    timer: AsyncFd<OwnedFd>,
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
    }
}

impl Ticker {
    /// Ticks every `interval` from now; call it inside the runtime that awaits it.
    pub fn new(interval: Duration) -> io::Result<Ticker> {
        // SAFETY: timerfd_create returns a new descriptor this function then owns, or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and nothing else holds it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let every = libc::itimerspec {
            it_interval: timespec(interval),
            it_value: timespec(interval),
        };
        // SAFETY: a valid timerfd and a valid itimerspec; the old value is not asked for.
        if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &every, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the ticker owns `fd`, which stays open and the same until the AsyncFd is dropped.
        let timer = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(Ticker { timer })
    }

    /// Waits for the next tick; ticks missed while the hub was busy count as one.
    pub async fn tick(&mut self) -> io::Result<()> {
        loop {
            let mut ready = self.timer.readable().await?;
            let read = ready.try_io(|timer| {
                let mut expirations = [0u8; 8];
                // SAFETY: reads at most 8 bytes into an 8-byte buffer from a descriptor this ticker owns.
                let n = unsafe {
                    libc::read(
                        timer.as_raw_fd(),
                        expirations.as_mut_ptr().cast(),
                        expirations.len(),
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            if let Ok(result) = read {
                // The read took every expiry: the next comes with an edge of its own, and tokio would otherwise
                // find the timer still ready at the next tick and read it once more only to be told to wait.
                if result.is_ok() {
                    ready.clear_ready();
                }
                return result;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_at_its_interval() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            // The clock starts before the ticker is armed: its fifth expiry is 100 ms after arming, which measured
            // from just after would read a few microseconds short (seen once in CI, 99.956 ms).
            let start = std::time::Instant::now();
            let mut ticker = Ticker::new(Duration::from_millis(20)).unwrap();
            for _ in 0..5 {
                ticker.tick().await.unwrap();
            }
            let took = start.elapsed();
            assert!(
                took >= Duration::from_millis(100),
                "5 ticks of 20 ms in {took:?}"
            );
        });
    }
}
