//! The session hub: starts workers as the schedule says, stamps everything that happens with the
//! monitor's monotonic clock, folds it into the session's store (the one fold of a live or headless run) and hands
//! each record, with the state it made, to the observers: they read the state under the store's lock, and do what
//! can wait (the recorder's backpressure, writing to stderr) once it is released.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::launcher::Incoming;
use super::observer::Observer;
use super::schedule::{Action, Scheduler};
use super::ticker::Ticker;
use super::worker::{Worker, WorkerSpec, is_end, never_started, not_started, start_worker};
use crate::channels::Control;
use crate::state::State;
use crate::state::ranks::MAX_RANKS;
use crate::store::Store;
use crate::telemetry::gpu::{GpuSampler, NvmlSource, Tick};
use crate::telemetry::load::LoadSampler;
use crate::telemetry::procfs::{ProcSampler, Watching};
use golow_protocol::config::SessionConfig;
use golow_protocol::event::{Body, Name, Record};

/// What may wait for the hub from workers, collectors and samplers together.
const INCOMING_CAPACITY: usize = 4096;
/// Terminating signals that may wait for the hub: a second interrupt is all it acts on past the first.
const SIGNALS_PENDING: usize = 8;

struct Hub<'a> {
    start: Instant,
    store: &'a Store,
    names: Vec<Name>,
    observer: &'a mut (dyn Observer + Send),
}

impl Hub<'_> {
    fn publish(&mut self, worker: Option<usize>, body: Body) {
        // Microseconds are far below any timed region and keep recorded numbers short.
        let t_ms = self.start.elapsed().as_micros() as f64 / 1e3;
        let name = worker.and_then(|i| self.names.get(i).cloned());
        let record = Record::new(t_ms, name, body);
        {
            let mut folded = self.store.lock();
            folded.apply(&record);
            self.observer.read(&record, &folded);
        }
        self.observer.on_record(&record);
    }
}

/// `run` on a single-threaded runtime in the calling thread: the hub's work is a few events a second,
/// and one thread wakes far less often than a pool.
pub fn run_blocking(
    session: SessionConfig,
    workers: Vec<(String, WorkerSpec)>,
    interval: Duration,
    stop_after: Option<Duration>,
    store: &Store,
    observer: &mut (dyn Observer + Send),
    controls: mpsc::UnboundedReceiver<Control>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let ticks = Ticker::new(interval)?;
        let stop_at = stop_after.map(|after| tokio::time::Instant::now() + after);
        run(session, workers, ticks, stop_at, store, observer, controls).await;
        Ok(())
    })
}

/// Runs the workers to their end (or until the user stops them), folding into `store`.
async fn run(
    mut session: SessionConfig,
    workers: Vec<(String, WorkerSpec)>,
    mut ticks: Ticker,
    stop_at: Option<tokio::time::Instant>,
    store: &Store,
    observer: &mut (dyn Observer + Send),
    mut controls: mpsc::UnboundedReceiver<Control>,
) {
    let names: Vec<Name> = workers
        .iter()
        .map(|(n, _)| Name::from(n.as_str()))
        .collect();
    let start = Instant::now();
    session.monotonic_origin_ns = golow_protocol::collector::monotonic_now_ns();
    // A store outlives the session it follows in a sweep, or a run of several sessions.
    store.lock().restart(State::default());
    let mut hub = Hub {
        start,
        store,
        names,
        observer,
    };
    // Listening from before the first worker starts: an interrupt must never find golow deaf and end it with its
    // workers' recordings unclosed. SIGTERM and SIGHUP stop the workers as an interrupt does, with the same grace;
    // golow then exits with 128 + the signal (`termination`). A flood of signals beyond what the hub has yet to read
    // is one signal too many to act on twice: dropped.
    let (signals_tx, mut signals) = mpsc::channel::<i32>(SIGNALS_PENDING);
    let _catching = crate::termination::catch_telling(move |signal| {
        let _ = signals_tx.try_send(signal);
    });
    let mut scheduler = Scheduler::new(session.schedule, workers.len());
    hub.publish(None, Body::SessionStart(Box::new(session)));

    // Bounded: a worker flooding its pipe waits for the hub rather than filling memory.
    let (tx, mut rx) = mpsc::channel::<Incoming>(INCOMING_CAPACITY);
    // The workers' processes and their ranks': what the /proc sampler reads once a tick, and hands the NVML sampler.
    let mut watching = Watching::default();
    let mut proc_sampler = ProcSampler::default();
    let mut load_sampler = LoadSampler::default();
    load_sampler.sample(0);
    let gpu_sampler = match NvmlSource::open() {
        Ok(source) => {
            let gpu_tx = tx.clone();
            Some(GpuSampler::start(Box::new(source), move |worker, body| {
                let _ = gpu_tx.blocking_send(Incoming { worker, body });
            }))
        }
        Err(reason) => {
            hub.publish(None, Body::GpuUnavailable { reason });
            None
        }
    };

    let mut launched: Vec<Option<Box<dyn Worker>>> = (0..workers.len()).map(|_| None).collect();
    let mut ended = vec![false; workers.len()];
    let mut pending = scheduler.start();
    // A signal that came while the session was being prepared (a sweep catches them between its cells) stops it
    // before any worker starts.
    let mut stopping = crate::termination::received().is_some();

    loop {
        for action in std::mem::take(&mut pending) {
            match action {
                Action::Spawn(i) if stopping => {
                    ended[i] = true;
                    hub.publish(Some(i), never_started(&workers[i].1));
                }
                Action::Spawn(i) => {
                    let (_, spec) = &workers[i];
                    match start_worker(i, spec, scheduler.controls_turns(), tx.clone()) {
                        Ok(started) => {
                            watching.roots.insert(i, started.worker.pid());
                            hub.publish(Some(i), started.body);
                            launched[i] = Some(started.worker);
                        }
                        Err(e) => {
                            for body in not_started(spec, &e) {
                                hub.publish(Some(i), body);
                            }
                            ended[i] = true;
                            pending.extend(scheduler.on_exit(i));
                        }
                    }
                }
                Action::Grant(i, steps) => {
                    watching.turn = Some(i);
                    if let Some(worker) = launched[i].as_mut() {
                        worker.grant(steps).await;
                    }
                }
            }
        }
        if ended.iter().all(|&e| e) {
            break;
        }
        tokio::select! {
            incoming = rx.recv() => {
                let Some(Incoming { worker, body }) = incoming else { break };
                let Some(worker) = worker else {
                    hub.publish(None, body);
                    continue;
                };
                let reaction = match &body {
                    Body::TurnEnd(_) => scheduler.on_turn_end(worker),
                    end if is_end(end) => {
                        ended[worker] = true;
                        launched[worker] = None;
                        watching.roots.remove(&worker);
                        watching.ranks.remove(&worker);
                        scheduler.on_exit(worker)
                    }
                    Body::ScriptProcess(hello) => {
                        if let Some(rank) = hello.rank {
                            watch_rank(watching.ranks.entry(worker).or_default(), rank, hello.pid);
                        }
                        Vec::new()
                    }
                    _ => Vec::new(),
                };
                hub.publish(Some(worker), body);
                pending.extend(reaction);
            }
            _ = ticks.tick() => {
                hub.observer.tick();
                if let Some(reason) = hub.observer.failure() {
                    hub.publish(None, Body::RecordingFailed { reason });
                }
                for worker in launched.iter_mut().flatten().filter(|w| w.overdue()) {
                    worker.kill();
                }
                for (worker, body) in proc_sampler.sample(&watching) {
                    hub.publish(Some(worker), body);
                }
                let trees = proc_sampler.worker_trees(&watching);
                for (worker, running) in launched.iter_mut().enumerate() {
                    let (Some(running), Some(tree)) = (running, trees.get(&worker)) else { continue };
                    for found in running.tree_read(&tree.pids) {
                        if let Body::RankProcess { pid, rank, .. } = found {
                            watch_rank(watching.ranks.entry(worker).or_default(), rank, pid);
                        }
                        hub.publish(Some(worker), found);
                    }
                }
                if let Some(gpu) = &gpu_sampler {
                    gpu.tick(Tick {
                        workers: trees,
                        turn: watching.turn,
                    });
                }
                if let Some(body) = load_sampler.sample(proc_sampler.workers_ticks()) {
                    hub.publish(None, body);
                }
            }
            Some(signal) = signals.recv() => {
                // A second interrupt does not wait for the grace period; a terminating signal is not a person
                // asking twice, and never cuts the grace short (whoever sent it kills golow itself when its own
                // grace is up, as `timeout -k` and `docker stop` do).
                if std::mem::replace(&mut stopping, true) {
                    if signal == libc::SIGINT {
                        kill_all(&mut launched);
                    }
                } else {
                    stop_all(&mut hub, &workers, &mut scheduler, &mut launched, &mut ended);
                }
            }
            _ = until(stop_at), if !stopping => {
                stopping = true;
                stop_all(&mut hub, &workers, &mut scheduler, &mut launched, &mut ended);
            }
            Some(control) = controls.recv() => match control {
                Control::StopAll if stopping => kill_all(&mut launched),
                Control::StopAll => {
                    stopping = true;
                    stop_all(&mut hub, &workers, &mut scheduler, &mut launched, &mut ended);
                }
                Control::Stop(i) => {
                    if let Some(worker) = launched.get_mut(i).and_then(Option::as_mut) {
                        worker.stop();
                    }
                }
            },
        }
    }
    // Closed before the GPU sampler is dropped and joined: its thread may be waiting for room in a full queue.
    drop(rx);
    hub.publish(None, Body::SessionEnd);
}

/// Watches `pid` as `rank` (the latest process to say so), for as many ranks as the state tells apart.
fn watch_rank(ranks: &mut BTreeMap<u32, u32>, rank: u32, pid: u32) {
    if rank < MAX_RANKS && (ranks.len() < MAX_RANKS as usize || ranks.contains_key(&rank)) {
        ranks.insert(rank, pid);
    }
}

/// Stops every running worker (killing it if it is still there after `STOP_GRACE`) and cancels those not yet
/// started.
fn stop_all(
    hub: &mut Hub<'_>,
    workers: &[(String, WorkerSpec)],
    scheduler: &mut Scheduler,
    launched: &mut [Option<Box<dyn Worker>>],
    ended: &mut [bool],
) {
    for i in scheduler.cancel_pending() {
        ended[i] = true;
        hub.publish(Some(i), never_started(&workers[i].1));
    }
    for worker in launched.iter_mut().flatten() {
        worker.stop();
    }
}

/// Ends every running worker's process group at once.
fn kill_all(launched: &mut [Option<Box<dyn Worker>>]) {
    for worker in launched.iter_mut().flatten() {
        worker.kill();
    }
}

/// Waits for `at`; for ever without one.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
