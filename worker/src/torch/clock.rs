//! Times a step's regions: a monotonic clock on the CPU, CUDA events on the working stream on a GPU
//! (no host synchronisation inside a region; one wait after the step, before reading).

use std::time::Instant;

use cudarc::runtime::{
    result::{device, event},
    sys,
};

/// Marks, in order: before the copy, after the copy (= before compute), after compute.
pub const MARKS: usize = 3;

pub enum StepClock {
    Host([Instant; MARKS]),
    Cuda([sys::cudaEvent_t; MARKS]),
}

/// Milliseconds of the two regions; `h2d` is `None` on the CPU, where nothing is copied.
pub struct RegionTimes {
    pub h2d_ms: Option<f64>,
    pub compute_ms: f64,
}

impl StepClock {
    /// A clock for work on `cuda_device` (a device index), or on the host when `None`.
    pub fn new(cuda_device: Option<usize>) -> Result<StepClock, String> {
        let Some(index) = cuda_device else {
            return Ok(StepClock::Host([Instant::now(); MARKS]));
        };
        // SAFETY: only asks the dynamic loader whether libcudart can be opened.
        if !unsafe { sys::is_culib_present() } {
            return Err("CUDA runtime library (libcudart) not found".to_string());
        }
        // Events belong to the current device, and the null stream they are recorded on is that device's: both
        // must be the device libtorch computes on.
        let ordinal = i32::try_from(index).map_err(|_| format!("no CUDA device {index}"))?;
        device::set(ordinal).map_err(|e| format!("cudaSetDevice({index}): {e:?}"))?;
        let mut events = [std::ptr::null_mut(); MARKS];
        for e in &mut events {
            *e = event::create(sys::cudaEventDefault)
                .map_err(|err| format!("cudaEventCreate: {err:?}"))?;
        }
        Ok(StepClock::Cuda(events))
    }

    pub fn mark(&mut self, index: usize) -> Result<(), String> {
        match self {
            StepClock::Host(marks) => marks[index] = Instant::now(),
            // SAFETY: the event was created by `new`; the null stream is the legacy default stream
            // that libtorch launches its work on unless told otherwise.
            StepClock::Cuda(events) => unsafe {
                event::record(events[index], std::ptr::null_mut())
                    .map_err(|e| format!("cudaEventRecord: {e:?}"))?
            },
        }
        Ok(())
    }

    pub fn read(&self) -> Result<RegionTimes, String> {
        match self {
            StepClock::Host(m) => Ok(RegionTimes {
                h2d_ms: None,
                compute_ms: (m[2] - m[1]).as_secs_f64() * 1e3,
            }),
            // SAFETY: events created by `new` and recorded on one stream by `mark`.
            StepClock::Cuda(e) => unsafe {
                sys::cudaEventSynchronize(e[2])
                    .result()
                    .map_err(|err| format!("cudaEventSynchronize: {err:?}"))?;
                let h2d = event::elapsed(e[0], e[1]).map_err(|err| format!("{err:?}"))?;
                let compute = event::elapsed(e[1], e[2]).map_err(|err| format!("{err:?}"))?;
                Ok(RegionTimes {
                    h2d_ms: Some(f64::from(h2d)),
                    compute_ms: f64::from(compute),
                })
            },
        }
    }
}

impl Drop for StepClock {
    fn drop(&mut self) {
        if let StepClock::Cuda(events) = self {
            for e in events {
                // SAFETY: created by `new`, destroyed once here.
                let _ = unsafe { event::destroy(*e) };
            }
        }
    }
}
