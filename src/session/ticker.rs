//! The hub's sampling clock: a timerfd the kernel fires every interval, so that a tick is one wake-up. tokio's own
//! timers wake twice for a period above 64 ms (its wheel first moves a far timer to a finer level), and on a machine
//! whose workers fill every core each needless wake-up preempts one of their threads.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

pub struct Ticker {
    timer: AsyncFd<OwnedFd>,
}

impl Ticker {
    /// Ticks every `interval` from now; call it inside the runtime that awaits it.
    pub fn new(interval: Duration) -> io::Result<Ticker> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        let interval = Timespec::try_from(interval)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "tick interval too long"))?;
        let every = Itimerspec {
            it_interval: interval,
            it_value: interval,
        };
        timerfd_settime(&fd, TimerfdTimerFlags::empty(), &every)?;
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
                rustix::io::read(timer, &mut expirations)?;
                Ok(())
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
