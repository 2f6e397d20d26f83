//! GPU readings from NVML on their own thread (an NVML call can take tens of milliseconds), and PCIe
//! throughput on another (NVML samples it for 20 ms per direction, which would stall the other readings), both
//! woken by the hub's sampling tick, which hands them the process trees the /proc sampler read.
//! The source sits behind a trait so that the sampling logic is tested without a GPU; on a machine without
//! one the session records why, and the GPU panes say so.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{self, SyncSender};
use std::thread::JoinHandle;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter};
use nvml_wrapper::enums::device::UsedGpuMemory;

use super::procfs::WorkerTree;
use golow_protocol::event::Body;

/// What a GPU is, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub memory_total_bytes: u64,
    pub driver: String,
    pub uuid: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceReading {
    pub utilization_percent: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub power_watts: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessReading {
    pub pid: u32,
    pub memory_bytes: Option<u64>,
    pub sm_percent: Option<u32>,
    pub last_seen_us: Option<u64>,
}

/// Where GPU readings come from: NVML on a real machine, a script in tests.
pub trait GpuSource: Send {
    fn devices(&self) -> Vec<GpuInfo>;
    fn device(&mut self, index: u32) -> DeviceReading;
    /// Processes on the GPU; SM utilisation from NVML samples newer than `since_us`.
    fn processes(&mut self, index: u32, since_us: Option<u64>) -> Vec<ProcessReading>;
    /// A second handle for the PCIe thread, where the source has PCIe counters.
    fn pcie(&self) -> Option<Box<dyn PcieSource>> {
        None
    }
}

/// PCIe throughput of a GPU in bytes per second: (into the GPU, out of it).
pub trait PcieSource: Send {
    fn throughput(&mut self, index: u32) -> (Option<u64>, Option<u64>);
}

pub struct NvmlSource {
    nvml: Arc<Nvml>,
}

struct NvmlPcie {
    nvml: Arc<Nvml>,
}

impl PcieSource for NvmlPcie {
    fn throughput(&mut self, index: u32) -> (Option<u64>, Option<u64>) {
        let Ok(d) = self.nvml.device_by_index(index) else {
            return (None, None);
        };
        // NVML counts KB/s.
        let read = |counter| {
            d.pcie_throughput(counter)
                .ok()
                .map(|kb| u64::from(kb) * 1024)
        };
        (read(PcieUtilCounter::Receive), read(PcieUtilCounter::Send))
    }
}

impl NvmlSource {
    /// Opens NVML, or says why it cannot be used here.
    pub fn open() -> Result<NvmlSource, String> {
        let nvml = Nvml::init().map_err(|e| match e {
            nvml_wrapper::error::NvmlError::LibloadingError(_) => {
                "libnvidia-ml.so.1 not found (no NVIDIA driver on this machine)".to_string()
            }
            other => other.to_string(),
        })?;
        match nvml.device_count() {
            Ok(0) => Err("NVML found no GPU".to_string()),
            Ok(_) => Ok(NvmlSource {
                nvml: Arc::new(nvml),
            }),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl GpuSource for NvmlSource {
    fn devices(&self) -> Vec<GpuInfo> {
        let driver = self.nvml.sys_driver_version().unwrap_or_default();
        let count = self.nvml.device_count().unwrap_or(0);
        (0..count)
            .filter_map(|index| {
                let d = self.nvml.device_by_index(index).ok()?;
                Some(GpuInfo {
                    index,
                    name: d.name().unwrap_or_else(|_| "unknown GPU".into()),
                    memory_total_bytes: d.memory_info().map(|m| m.total).unwrap_or(0),
                    driver: driver.clone(),
                    uuid: d.uuid().unwrap_or_default(),
                })
            })
            .collect()
    }

    fn device(&mut self, index: u32) -> DeviceReading {
        let Ok(d) = self.nvml.device_by_index(index) else {
            return DeviceReading::default();
        };
        DeviceReading {
            utilization_percent: d.utilization_rates().ok().map(|u| u.gpu),
            memory_used_bytes: d.memory_info().ok().map(|m| m.used),
            power_watts: d.power_usage().ok().map(|mw| f64::from(mw) / 1e3),
            sm_clock_mhz: d.clock_info(Clock::SM).ok(),
        }
    }

    fn processes(&mut self, index: u32, since_us: Option<u64>) -> Vec<ProcessReading> {
        let Ok(d) = self.nvml.device_by_index(index) else {
            return Vec::new();
        };
        let mut readings: HashMap<u32, ProcessReading> = HashMap::new();
        for p in d.running_compute_processes().unwrap_or_default() {
            let memory = match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            };
            readings.insert(
                p.pid,
                ProcessReading {
                    pid: p.pid,
                    memory_bytes: memory,
                    ..Default::default()
                },
            );
        }
        for s in d.process_utilization_stats(since_us).unwrap_or_default() {
            let r = readings.entry(s.pid).or_insert_with(|| ProcessReading {
                pid: s.pid,
                ..Default::default()
            });
            r.sm_percent = Some(s.sm_util);
            r.last_seen_us = Some(s.timestamp);
        }
        readings.into_values().collect()
    }

    fn pcie(&self) -> Option<Box<dyn PcieSource>> {
        Some(Box::new(NvmlPcie {
            nvml: self.nvml.clone(),
        }))
    }
}

/// How processes NVML lists are told apart from ours. Inside a PID namespace NVML reports the host's PIDs, which
/// match none of the workers'.
pub struct Attribution {
    /// Our PIDs are not the ones NVML reports (`NSpid` in /proc/self/status names more than one namespace).
    pub nested: bool,
    /// Whether a PID names a process we can see.
    pub visible: fn(u32) -> bool,
    /// The session has been told that per-process readings are unavailable.
    pub said_unavailable: bool,
}

impl Attribution {
    pub fn of_this_process() -> Attribution {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        Attribution {
            nested: in_nested_pid_namespace(&status),
            visible: |pid| std::path::Path::new("/proc").join(pid.to_string()).exists(),
            said_unavailable: false,
        }
    }

    /// Each worker's processes among `processes`; `None` when they cannot be told apart. Where PIDs are foreign,
    /// the one case that cannot be wrong is paired: one worker without a match, one process we cannot see. Some
    /// drivers inside a container list the container's PIDs as running but sample utilisation under the host's:
    /// then every worker matches, none has a utilisation sample, and samples come under PIDs we cannot see. Those
    /// go to the one worker that holds the GPU (the only one on it, or the one whose turn it is); with no such
    /// worker they are left out and `utilisation_unknown` says so.
    fn attribute<'a>(
        &self,
        processes: &'a [ProcessReading],
        workers: &HashMap<usize, WorkerTree>,
        turn: Option<usize>,
    ) -> Option<Attributed<'a>> {
        let mut found: Vec<(usize, Vec<&ProcessReading>)> = workers
            .iter()
            .map(|(&worker, tree)| {
                let mine = if self.nested {
                    Vec::new()
                } else {
                    processes
                        .iter()
                        .filter(|p| tree.pids.contains(&p.pid))
                        .collect()
                };
                (worker, mine)
            })
            .collect();
        let foreign: Vec<&ProcessReading> = processes
            .iter()
            .filter(|p| self.nested || !(self.visible)(p.pid))
            .collect();
        let unmatched: Vec<usize> = (0..found.len())
            .filter(|&i| found[i].1.is_empty())
            .collect();
        if !unmatched.is_empty() && !foreign.is_empty() {
            let ([worker], [process]) = (unmatched.as_slice(), foreign.as_slice()) else {
                return None;
            };
            found[*worker].1.push(process);
            return Some(Attributed {
                found,
                utilisation_unknown: false,
            });
        }
        // Samples without a running process of their own, while ours have none: our processes, under host PIDs.
        let sampled_only: Vec<&ProcessReading> = foreign
            .iter()
            .copied()
            .filter(|p| p.memory_bytes.is_none() && p.sm_percent.is_some())
            .collect();
        let ours_sampled = found
            .iter()
            .flat_map(|(_, mine)| mine)
            .any(|p| p.sm_percent.is_some());
        let mut utilisation_unknown = false;
        if !sampled_only.is_empty() && !ours_sampled {
            let on_gpu: Vec<usize> = (0..found.len())
                .filter(|&i| !found[i].1.is_empty())
                .collect();
            let holder = match on_gpu.as_slice() {
                [only] => Some(*only),
                _ => turn.and_then(|t| on_gpu.iter().copied().find(|&i| found[i].0 == t)),
            };
            match holder {
                Some(i) => found[i].1.extend(sampled_only),
                None => utilisation_unknown = true,
            }
        }
        Some(Attributed {
            found,
            utilisation_unknown,
        })
    }
}

/// The workers' readings among one device's, and whether utilisation samples were left out as nobody's for sure.
struct Attributed<'a> {
    found: Vec<(usize, Vec<&'a ProcessReading>)>,
    utilisation_unknown: bool,
}

/// Whether `/proc/self/status` (given) places this process in a PID namespace below the one its procfs shows.
fn in_nested_pid_namespace(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .is_some_and(|pids| pids.split_whitespace().count() > 1)
}

/// One sampling pass: a reading per device, and one per watched worker that uses a device (its own
/// process or any descendant), followed by one per rank of it that does. Returns the newest NVML sample timestamp
/// seen per device.
pub fn sample_once(
    source: &mut dyn GpuSource,
    devices: &[GpuInfo],
    workers: &HashMap<usize, WorkerTree>,
    turn: Option<usize>,
    since: &mut HashMap<u32, u64>,
    attribution: &mut Attribution,
    send: &dyn Fn(Option<usize>, Body),
) {
    for device in devices {
        let r = source.device(device.index);
        send(
            None,
            Body::GpuDevice {
                index: device.index,
                utilization_percent: r.utilization_percent,
                memory_used_bytes: r.memory_used_bytes,
                power_watts: r.power_watts,
                sm_clock_mhz: r.sm_clock_mhz,
            },
        );
        let processes = source.processes(device.index, since.get(&device.index).copied());
        if let Some(newest) = processes.iter().filter_map(|p| p.last_seen_us).max() {
            since.insert(device.index, newest);
        }
        let attributed = attribution.attribute(&processes, workers, turn);
        let unavailable = match &attributed {
            None => Some(
                "NVML reports the host's process IDs, not this PID namespace's, and the GPU's processes cannot be \
                 paired with the workers",
            ),
            Some(a) if a.utilisation_unknown => Some(
                "NVML samples utilisation under the host's process IDs, which this PID namespace cannot see, while \
                 several workers hold the GPU: per-process utilisation is unavailable here (memory still reads)",
            ),
            Some(_) => None,
        };
        if let Some(reason) = unavailable
            && !attribution.said_unavailable
        {
            attribution.said_unavailable = true;
            send(
                None,
                Body::GpuProcessesUnavailable {
                    reason: reason.into(),
                },
            );
        }
        let Some(Attributed { found, .. }) = attributed else {
            continue;
        };
        for (worker, mine) in found {
            let tree = &workers[&worker];
            let reading = |pid: u32, rank: Option<u32>, of: &[&ProcessReading]| {
                let sum = |f: fn(&ProcessReading) -> Option<u64>| {
                    let values: Vec<u64> = of.iter().filter_map(|p| f(p)).collect();
                    (!values.is_empty()).then(|| values.iter().sum::<u64>())
                };
                Body::GpuProcess {
                    pid,
                    index: device.index,
                    memory_bytes: sum(|p| p.memory_bytes),
                    sm_percent: sum(|p| p.sm_percent.map(u64::from)).map(|v| v.min(100) as u32),
                    last_seen_us: of.iter().filter_map(|p| p.last_seen_us).max(),
                    rank,
                }
            };
            if mine.is_empty() {
                continue;
            }
            send(Some(worker), reading(tree.pids[0], None, &mine));
            for (rank, pid, pids) in &tree.ranks {
                let its: Vec<&ProcessReading> = mine
                    .iter()
                    .copied()
                    .filter(|p| pids.contains(&p.pid))
                    .collect();
                if !its.is_empty() {
                    send(Some(worker), reading(*pid, Some(*rank), &its));
                }
            }
        }
    }
}

/// What the hub hands the NVML sampler at each of its ticks: the workers' process trees as the /proc sampler read
/// them this tick, and whose turn it is.
#[derive(Debug, Default)]
pub struct Tick {
    pub workers: HashMap<usize, WorkerTree>,
    pub turn: Option<usize>,
}

/// Samples NVML on a thread of its own, and PCIe on another, each time the hub ticks.
pub struct GpuSampler {
    /// Dropped to end the threads.
    ticks: Option<SyncSender<Tick>>,
    /// The sampling thread, which starts and joins the PCIe thread itself.
    thread: Option<JoinHandle<()>>,
}

impl GpuSampler {
    /// Announces the devices, then samples at every [`GpuSampler::tick`] until dropped. Everything is sent from the
    /// sampler's own threads, never the caller's: the hub calls this from inside its async runtime, where `send` (a
    /// blocking send into the hub's bounded channel) must not run. The PCIe thread starts after the announcement, so
    /// that no reading reaches the state before the device it belongs to.
    pub fn start(
        mut source: Box<dyn GpuSource>,
        send: impl Fn(Option<usize>, Body) + Send + Sync + 'static,
    ) -> GpuSampler {
        let devices = source.devices();
        let pcie = source.pcie();
        // One tick in waiting at most: a tick that finds NVML still busy with the last one is skipped, not queued.
        let (ticks, incoming) = mpsc::sync_channel::<Tick>(1);
        let send = Arc::new(send);
        let thread = std::thread::Builder::new()
            .name("golow-nvml".into())
            .spawn(move || {
                for d in &devices {
                    send(
                        None,
                        Body::GpuInfo {
                            index: d.index,
                            name: d.name.clone(),
                            memory_total_bytes: d.memory_total_bytes,
                            driver: d.driver.clone(),
                            uuid: d.uuid.clone(),
                        },
                    );
                }
                let indices: Vec<u32> = devices.iter().map(|d| d.index).collect();
                let pcie = pcie.and_then(|pcie| read_pcie(pcie, indices, send.clone()));
                let mut since = HashMap::new();
                let mut attribution = Attribution::of_this_process();
                for tick in incoming {
                    if let Some((pcie_ticks, _)) = &pcie {
                        let _ = pcie_ticks.try_send(());
                    }
                    sample_once(
                        source.as_mut(),
                        &devices,
                        &tick.workers,
                        tick.turn,
                        &mut since,
                        &mut attribution,
                        &*send,
                    );
                }
                // The PCIe thread ends once its ticks do, and is joined here.
                if let Some((pcie_ticks, thread)) = pcie {
                    drop(pcie_ticks);
                    let _ = thread.join();
                }
            })
            .ok();
        GpuSampler {
            ticks: Some(ticks),
            thread,
        }
    }

    /// Samples now, on the sampler's threads, unless they are still busy with the last tick.
    pub fn tick(&self, tick: Tick) {
        if let Some(ticks) = &self.ticks {
            let _ = ticks.try_send(tick);
        }
    }
}

/// Reads PCIe throughput on a thread of its own, at each tick the NVML thread passes on: NVML's counter samples for
/// 20 ms a call, which would stretch the other readings.
fn read_pcie(
    mut pcie: Box<dyn PcieSource>,
    indices: Vec<u32>,
    send: Arc<impl Fn(Option<usize>, Body) + Send + Sync + 'static>,
) -> Option<(SyncSender<()>, JoinHandle<()>)> {
    let (ticks, incoming) = mpsc::sync_channel::<()>(1);
    let thread = std::thread::Builder::new()
        .name("golow-nvml-pcie".into())
        .spawn(move || {
            for () in incoming {
                for &index in &indices {
                    let (rx, tx) = pcie.throughput(index);
                    send(
                        None,
                        Body::GpuPcie {
                            index,
                            rx_bytes_per_s: rx,
                            tx_bytes_per_s: tx,
                        },
                    );
                }
            }
        })
        .ok()?;
    Some((ticks, thread))
}

impl Drop for GpuSampler {
    fn drop(&mut self) {
        drop(self.ticks.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    /// A GPU that reports what the test scripted.
    struct Scripted {
        processes: Vec<ProcessReading>,
        asked_since: Vec<Option<u64>>,
    }

    impl GpuSource for Scripted {
        fn devices(&self) -> Vec<GpuInfo> {
            vec![GpuInfo {
                index: 0,
                name: "Test GPU".into(),
                memory_total_bytes: 80 << 30,
                driver: "1.0".into(),
                uuid: "GPU-5b8e6b5d-0000-4000-8000-000000000000".into(),
            }]
        }
        fn device(&mut self, _: u32) -> DeviceReading {
            DeviceReading {
                utilization_percent: Some(55),
                memory_used_bytes: Some(10 << 30),
                power_watts: Some(300.0),
                sm_clock_mhz: Some(1500),
            }
        }
        fn processes(&mut self, _: u32, since_us: Option<u64>) -> Vec<ProcessReading> {
            self.asked_since.push(since_us);
            self.processes.clone()
        }
    }

    #[test]
    fn readings_are_attributed_to_workers_through_their_process_trees() {
        let mut source = Scripted {
            processes: vec![
                ProcessReading {
                    pid: 10,
                    memory_bytes: Some(1 << 30),
                    sm_percent: Some(40),
                    last_seen_us: Some(5),
                },
                ProcessReading {
                    pid: 11,
                    memory_bytes: Some(2 << 30),
                    sm_percent: Some(30),
                    last_seen_us: Some(9),
                },
                ProcessReading {
                    pid: 99,
                    memory_bytes: Some(7 << 30),
                    sm_percent: Some(90),
                    last_seen_us: Some(7),
                },
            ],
            asked_since: Vec::new(),
        };
        let devices = source.devices();
        // Worker 0 is a shell (pid 10) whose child 11 also uses the GPU; pid 99 belongs to nobody we watch.
        let workers = trees(&[(0, vec![10, 11]), (1, vec![20])]);
        let sent = Mutex::new(Vec::new());
        let mut since = HashMap::new();
        for _ in 0..2 {
            sample_once(
                &mut source,
                &devices,
                &workers,
                None,
                &mut since,
                &mut same_namespace(),
                &|w, b| sent.lock().unwrap().push((w, b)),
            );
        }
        let sent = sent.into_inner().unwrap();
        assert!(matches!(
            sent[0],
            (
                None,
                Body::GpuDevice {
                    utilization_percent: Some(55),
                    ..
                }
            )
        ));
        let process: Vec<_> = sent.iter().filter(|(w, _)| w.is_some()).collect();
        assert_eq!(
            process.len(),
            2,
            "one reading per sampling pass for worker 0 only: {sent:?}"
        );
        match &process[0].1 {
            Body::GpuProcess {
                memory_bytes,
                sm_percent,
                last_seen_us,
                ..
            } => {
                assert_eq!(*memory_bytes, Some(3 << 30));
                assert_eq!(*sm_percent, Some(70));
                assert_eq!(*last_seen_us, Some(9));
            }
            other => panic!("{other:?}"),
        }
        // The second pass asks NVML only for samples newer than the newest seen.
        assert_eq!(source.asked_since, vec![None, Some(9)]);
    }

    /// Workers' trees without ranks.
    fn trees(of: &[(usize, Vec<u32>)]) -> HashMap<usize, WorkerTree> {
        of.iter()
            .map(|(w, pids)| {
                let tree = WorkerTree {
                    pids: pids.clone(),
                    ranks: Vec::new(),
                };
                (*w, tree)
            })
            .collect()
    }

    #[test]
    fn a_ranks_readings_are_its_own_processes_and_the_worker_keeps_their_sum() {
        // torchrun (10) started ranks 0 (11, with a data loader 13) and 1 (12).
        let mut source = Scripted {
            processes: vec![reading(11, 40), reading(12, 30), reading(13, 5)],
            asked_since: Vec::new(),
        };
        let devices = source.devices();
        let workers = HashMap::from([(
            0usize,
            WorkerTree {
                pids: vec![10, 11, 12, 13],
                ranks: vec![(0, 11, vec![11, 13]), (1, 12, vec![12])],
            },
        )]);
        let sent = Mutex::new(Vec::new());
        sample_once(
            &mut source,
            &devices,
            &workers,
            None,
            &mut HashMap::new(),
            &mut same_namespace(),
            &|w, b| sent.lock().unwrap().push((w, b)),
        );
        let readings: Vec<(u32, Option<u32>, Option<u32>)> = sent
            .into_inner()
            .unwrap()
            .into_iter()
            .filter_map(|(_, b)| match b {
                Body::GpuProcess {
                    pid,
                    sm_percent,
                    rank,
                    ..
                } => Some((pid, rank, sm_percent)),
                _ => None,
            })
            .collect();
        assert_eq!(
            readings,
            [
                (10, None, Some(75)),
                (11, Some(0), Some(45)),
                (12, Some(1), Some(30))
            ]
        );
    }

    fn same_namespace() -> Attribution {
        Attribution {
            nested: false,
            visible: |_| true,
            said_unavailable: false,
        }
    }

    fn reading(pid: u32, sm_percent: u32) -> ProcessReading {
        ProcessReading {
            pid,
            memory_bytes: Some(1 << 30),
            sm_percent: Some(sm_percent),
            last_seen_us: Some(1),
        }
    }

    #[test]
    fn a_nested_pid_namespace_is_read_from_nspid() {
        let status = |nspid: &str| format!("Name:\tgolow\nTgid:\t7\nNSpid:\t{nspid}\nPPid:\t1\n");
        assert!(in_nested_pid_namespace(&status("48213\t7")));
        assert!(!in_nested_pid_namespace(&status("7")));
        assert!(!in_nested_pid_namespace("Name:\tgolow\n"));
    }

    #[test]
    fn host_pids_are_paired_only_where_it_cannot_be_wrong() {
        let workers = trees(&[(0, vec![7, 8])]);
        let nested = Attribution {
            nested: true,
            ..same_namespace()
        };
        // One worker, one process: the pair is certain.
        let one = [reading(48213, 60)];
        let found = nested.attribute(&one, &workers, None).unwrap().found;
        assert_eq!(found[0].1[0].pid, 48213);
        // One worker, two processes (another container's on the same GPU): which is ours is unknown.
        assert!(
            nested
                .attribute(&[reading(48213, 60), reading(50000, 10)], &workers, None)
                .is_none()
        );
        // Not nested, but NVML names a process we cannot see while our worker has no match: the same pairing.
        let hidden = Attribution {
            visible: |pid| pid < 100,
            ..same_namespace()
        };
        let found = hidden.attribute(&one, &workers, None).unwrap().found;
        assert_eq!(found[0].1[0].pid, 48213);
        // Two workers and one foreign process: ambiguous.
        let two = trees(&[(0, vec![7]), (1, vec![9])]);
        assert!(hidden.attribute(&one, &two, None).is_none());
        // A worker matched by its own PID is never paired with a stranger.
        let both = [reading(7, 60), reading(48213, 5)];
        let found = hidden.attribute(&both, &workers, None).unwrap().found;
        assert_eq!(found[0].1.len(), 1);
        assert_eq!(found[0].1[0].pid, 7);
    }

    /// A running process as the container's driver lists it (its own PID, memory, no utilisation), and a
    /// utilisation sample under a host PID (no memory).
    fn listed(pid: u32) -> ProcessReading {
        ProcessReading {
            pid,
            memory_bytes: Some(1 << 30),
            sm_percent: None,
            last_seen_us: None,
        }
    }

    fn sampled(pid: u32, sm_percent: u32) -> ProcessReading {
        ProcessReading {
            pid,
            memory_bytes: None,
            sm_percent: Some(sm_percent),
            last_seen_us: Some(1),
        }
    }

    /// Each worker's SM readings over `passes` sampling passes, and how often per-process utilisation was said to
    /// be unavailable.
    fn sm_readings(
        processes: Vec<ProcessReading>,
        workers: &HashMap<usize, WorkerTree>,
        turn: Option<usize>,
        passes: usize,
    ) -> (Vec<(usize, Option<u32>)>, usize) {
        let mut source = Scripted {
            processes,
            asked_since: Vec::new(),
        };
        let devices = source.devices();
        let mut attribution = Attribution {
            visible: |pid| pid < 100,
            ..same_namespace()
        };
        let sent = Mutex::new(Vec::new());
        for _ in 0..passes {
            sample_once(
                &mut source,
                &devices,
                workers,
                turn,
                &mut HashMap::new(),
                &mut attribution,
                &|w, b| sent.lock().unwrap().push((w, b)),
            );
        }
        let sent = sent.into_inner().unwrap();
        let readings = sent
            .iter()
            .filter_map(|(w, b)| match b {
                Body::GpuProcess { sm_percent, .. } => Some((w.unwrap(), *sm_percent)),
                _ => None,
            })
            .collect();
        let unavailable = sent
            .iter()
            .filter(|(_, b)| matches!(b, Body::GpuProcessesUnavailable { .. }))
            .count();
        (readings, unavailable)
    }

    #[test]
    fn utilisation_sampled_under_host_pids_goes_to_the_worker_that_holds_the_gpu() {
        // A lone worker: its process listed under its own PID, its utilisation under the host's.
        let lone = trees(&[(0, vec![7, 8])]);
        let (readings, unavailable) =
            sm_readings(vec![listed(7), sampled(48213, 60)], &lone, None, 1);
        assert_eq!(readings, [(0, Some(60))]);
        assert_eq!(unavailable, 0);
        // Two workers alternating: the one whose turn it is.
        let two = trees(&[(0, vec![7]), (1, vec![9])]);
        let processes = vec![listed(7), listed(9), sampled(48213, 60)];
        let (mut readings, unavailable) = sm_readings(processes.clone(), &two, Some(1), 1);
        readings.sort();
        assert_eq!(readings, [(0, None), (1, Some(60))]);
        assert_eq!(unavailable, 0);
        // Two workers at once: nobody's for sure. Said once; memory still read per worker.
        let (readings, unavailable) = sm_readings(processes, &two, None, 3);
        assert_eq!(readings.len(), 6);
        assert!(readings.iter().all(|(_, sm)| sm.is_none()), "{readings:?}");
        assert_eq!(unavailable, 1);
    }

    #[test]
    fn a_stranger_s_samples_never_add_to_a_worker_sampled_under_its_own_pid() {
        let lone = trees(&[(0, vec![7])]);
        let mut own = listed(7);
        own.sm_percent = Some(30);
        let (readings, unavailable) = sm_readings(vec![own, sampled(48213, 50)], &lone, None, 1);
        assert_eq!(readings, [(0, Some(30))]);
        assert_eq!(unavailable, 0);
    }

    #[test]
    fn unattributable_readings_are_announced_once_and_devices_still_read() {
        let mut source = Scripted {
            processes: vec![reading(48213, 60), reading(50000, 10)],
            asked_since: Vec::new(),
        };
        let devices = source.devices();
        let workers = trees(&[(0, vec![7])]);
        let mut attribution = Attribution {
            nested: true,
            ..same_namespace()
        };
        let sent = Mutex::new(Vec::new());
        for _ in 0..3 {
            sample_once(
                &mut source,
                &devices,
                &workers,
                None,
                &mut HashMap::new(),
                &mut attribution,
                &|w, b| sent.lock().unwrap().push((w, b)),
            );
        }
        let sent = sent.into_inner().unwrap();
        let count = |f: fn(&Body) -> bool| sent.iter().filter(|(_, b)| f(b)).count();
        assert_eq!(count(|b| matches!(b, Body::GpuDevice { .. })), 3);
        assert_eq!(
            count(|b| matches!(b, Body::GpuProcessesUnavailable { .. })),
            1
        );
        assert_eq!(count(|b| matches!(b, Body::GpuProcess { .. })), 0);
    }

    /// PCIe counters that note which thread read them.
    struct SlowPcie(Arc<Mutex<Vec<String>>>);

    impl PcieSource for SlowPcie {
        fn throughput(&mut self, _: u32) -> (Option<u64>, Option<u64>) {
            let me = std::thread::current().name().unwrap_or("?").to_string();
            self.0.lock().unwrap().push(me);
            (Some(12 << 30), None)
        }
    }

    struct WithPcie(Scripted, Arc<Mutex<Vec<String>>>);

    impl GpuSource for WithPcie {
        fn devices(&self) -> Vec<GpuInfo> {
            self.0.devices()
        }
        fn device(&mut self, index: u32) -> DeviceReading {
            self.0.device(index)
        }
        fn processes(&mut self, index: u32, since_us: Option<u64>) -> Vec<ProcessReading> {
            self.0.processes(index, since_us)
        }
        fn pcie(&self) -> Option<Box<dyn PcieSource>> {
            Some(Box::new(SlowPcie(self.1.clone())))
        }
    }

    /// As the hub starts it: inside its async runtime, sending into a bounded channel with `blocking_send`, which
    /// panics on a runtime's thread (it did on the first GPU golow met). Devices are announced before any reading.
    #[tokio::test]
    async fn started_inside_the_runtime_it_sends_from_its_own_threads_devices_first() {
        let source = WithPcie(
            Scripted {
                processes: Vec::new(),
                asked_since: Vec::new(),
            },
            Arc::new(Mutex::new(Vec::new())),
        );
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let sampler = GpuSampler::start(Box::new(source), move |_, body| {
            let _ = tx.blocking_send(body);
        });
        let mut bodies = Vec::new();
        while bodies.len() < 6 {
            sampler.tick(Tick::default());
            bodies.push(rx.recv().await.expect("the sampler sends"));
        }
        // Dropping joins the threads, which may be blocked on a full channel: drain it meanwhile.
        let draining = tokio::spawn(async move { while rx.recv().await.is_some() {} });
        tokio::task::spawn_blocking(move || drop(sampler))
            .await
            .unwrap();
        draining.await.unwrap();
        assert!(
            matches!(bodies[0], Body::GpuInfo { index: 0, .. }),
            "{bodies:?}"
        );
        assert!(
            bodies[1..]
                .iter()
                .any(|b| matches!(b, Body::GpuDevice { .. } | Body::GpuPcie { .. })),
            "{bodies:?}"
        );
    }

    /// NVML is read when the hub ticks, and only then, with the trees the tick hands over: no timer of its own
    /// wakes it, and it reads no /proc itself.
    #[test]
    fn it_samples_at_the_hubs_ticks_with_the_trees_they_carry_and_pcie_on_a_thread_of_its_own() {
        let readers = Arc::new(Mutex::new(Vec::new()));
        let source = WithPcie(
            Scripted {
                processes: vec![ProcessReading {
                    pid: 4242,
                    memory_bytes: Some(1 << 30),
                    sm_percent: None,
                    last_seen_us: None,
                }],
                asked_since: Vec::new(),
            },
            readers.clone(),
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let tx = Mutex::new(tx);
        let sampler = GpuSampler::start(Box::new(source), move |worker, body| {
            let _ = tx.lock().unwrap().send((worker, body));
        });
        let quiet = Duration::from_millis(300);
        let (worker, info) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(matches!(info, Body::GpuInfo { .. }) && worker.is_none());
        assert!(rx.recv_timeout(quiet).is_err(), "read without a tick");
        sampler.tick(Tick {
            workers: trees(&[(3, vec![4240, 4242])]),
            turn: None,
        });
        let mut after_tick = Vec::new();
        while let Ok(reading) = rx.recv_timeout(quiet) {
            after_tick.push(reading);
        }
        drop(sampler);
        assert!(
            after_tick
                .iter()
                .any(|(w, b)| *w == Some(3) && matches!(b, Body::GpuProcess { pid: 4240, .. })),
            "the worker's tree as the tick gave it: {after_tick:?}"
        );
        let pcie: Vec<&Body> = after_tick
            .iter()
            .map(|(_, b)| b)
            .filter(|b| matches!(b, Body::GpuPcie { .. }))
            .collect();
        assert_eq!(
            pcie,
            [&Body::GpuPcie {
                index: 0,
                rx_bytes_per_s: Some(12 << 30),
                tx_bytes_per_s: None
            }],
            "one PCIe reading per tick"
        );
        assert!(
            readers
                .lock()
                .unwrap()
                .iter()
                .all(|name| name == "golow-nvml-pcie")
        );
    }
}
