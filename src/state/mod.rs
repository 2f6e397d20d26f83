//! The fold: `State::apply(record)` turns the event stream into everything the summary and the UI show.
//! The same fold serves live runs, replays and headless summaries, so they agree by construction.

mod stats;
mod summary;

use std::collections::VecDeque;

pub use stats::{Durations, Percentiles};
pub use summary::{Summary, WorkerStatus, WorkerSummary};

use crate::config::SessionConfig;
use crate::event::{Body, Epoch, Hello, Record, Step, WorkerExit};

/// Stderr lines kept per worker, to explain a failure.
pub const STDERR_TAIL_LINES: usize = 20;

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessEnd {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stop_requested: bool,
}

#[derive(Debug, Clone, Default)]
pub struct WorkerState {
    pub name: String,
    pub pid: Option<u32>,
    pub hello: Option<Hello>,
    /// Every step run, warm-up included.
    pub steps: u64,
    pub warmup_steps: u64,
    /// Samples of measured (non-warm-up) steps.
    pub samples: u64,
    pub compute: Durations,
    pub sample_time: Durations,
    pub h2d: Durations,
    pub h2d_bytes_total: u64,
    pub h2d_bytes_steps: u64,
    /// Time inside the timed regions of measured steps, in milliseconds.
    pub timed_ms: f64,
    pub first_loss: Option<f64>,
    pub last_step: Option<Step>,
    pub last_epoch: Option<Epoch>,
    pub peak_rss_bytes: u64,
    pub exit: Option<WorkerExit>,
    pub process_end: Option<ProcessEnd>,
    pub stderr_tail: VecDeque<String>,
    pub protocol_errors: u64,
}

impl WorkerState {
    fn new(name: &str) -> WorkerState {
        WorkerState {
            name: name.to_string(),
            ..Default::default()
        }
    }

    fn apply_step(&mut self, step: &Step) {
        self.steps += 1;
        if self.first_loss.is_none() {
            self.first_loss = Some(step.loss);
        }
        if step.warmup {
            self.warmup_steps += 1;
        } else {
            let batch = f64::from(step.batch_size.max(1));
            let timed = step.h2d_ms.unwrap_or(0.0) + step.compute_ms;
            self.samples += u64::from(step.batch_size);
            self.compute.record_ms(step.compute_ms);
            self.sample_time.record_ms(timed / batch);
            if let Some(h2d) = step.h2d_ms {
                self.h2d.record_ms(h2d);
            }
            if let Some(bytes) = step.h2d_bytes {
                self.h2d_bytes_total = self.h2d_bytes_total.saturating_add(bytes);
                self.h2d_bytes_steps += 1;
            }
            if timed.is_finite() && timed > 0.0 {
                self.timed_ms += timed;
            }
        }
        self.last_step = Some(step.clone());
    }

    /// Still running: started and not yet ended.
    pub fn is_running(&self) -> bool {
        self.pid.is_some() && self.process_end.is_none()
    }
}

#[derive(Debug, Clone, Default)]
pub struct State {
    pub session: Option<SessionConfig>,
    pub workers: Vec<WorkerState>,
    /// Timestamp of the latest record, in milliseconds since the session started.
    pub t_ms: f64,
    pub ended: bool,
}

impl State {
    pub fn worker(&self, name: &str) -> Option<&WorkerState> {
        self.workers.iter().find(|w| w.name == name)
    }

    fn worker_mut(&mut self, name: &str) -> &mut WorkerState {
        match self.workers.iter().position(|w| w.name == name) {
            Some(i) => &mut self.workers[i],
            None => {
                self.workers.push(WorkerState::new(name));
                self.workers.last_mut().expect("just pushed")
            }
        }
    }

    pub fn apply(&mut self, record: &Record) {
        self.t_ms = self.t_ms.max(record.t_ms);
        match &record.body {
            Body::SessionStart(config) => {
                for name in &config.impls {
                    self.worker_mut(name);
                }
                self.session = Some(config.clone());
            }
            Body::SessionEnd => self.ended = true,
            body => {
                let Some(name) = &record.worker else { return };
                apply_worker_event(self.worker_mut(name), body);
            }
        }
    }
}

fn apply_worker_event(worker: &mut WorkerState, body: &Body) {
    match body {
        Body::WorkerStarted { pid, .. } => worker.pid = Some(*pid),
        Body::Hello(hello) => worker.hello = Some(hello.clone()),
        Body::Step(step) => worker.apply_step(step),
        Body::Epoch(epoch) => worker.last_epoch = Some(epoch.clone()),
        Body::Exit(exit) => worker.exit = Some(exit.clone()),
        Body::Output {
            stream: crate::event::Stream::Stderr,
            line,
        } => {
            if worker.stderr_tail.len() == STDERR_TAIL_LINES {
                worker.stderr_tail.pop_front();
            }
            worker.stderr_tail.push_back(line.clone());
        }
        Body::ProtocolError { .. } => worker.protocol_errors += 1,
        Body::Process { peak_rss_bytes, .. } => {
            worker.peak_rss_bytes = worker.peak_rss_bytes.max(*peak_rss_bytes);
        }
        Body::WorkerExited {
            exit_code,
            signal,
            stop_requested,
        } => {
            worker.process_end = Some(ProcessEnd {
                exit_code: *exit_code,
                signal: *signal,
                stop_requested: *stop_requested,
            });
        }
        Body::Output { .. } | Body::TurnEnd(_) | Body::SessionStart(_) | Body::SessionEnd => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ExitStatus, Phase, Stream};

    fn step(step: u64, compute_ms: f64, warmup: bool) -> Body {
        Body::Step(Step {
            step,
            epoch: 0,
            phase: Phase::Train,
            batch_size: 10,
            data_ms: 0.1,
            h2d_ms: Some(1.0),
            h2d_bytes: Some(1000),
            compute_ms,
            loss: 2.0 - step as f64 * 0.1,
            correct: 3,
            warmup,
        })
    }

    fn fold(worker: &str, bodies: Vec<Body>) -> State {
        let mut state = State::default();
        for (i, body) in bodies.into_iter().enumerate() {
            state.apply(&Record::new(i as f64, Some(worker.into()), body));
        }
        state
    }

    #[test]
    fn warmup_is_counted_but_not_measured() {
        let state = fold(
            "libtorch",
            vec![
                step(0, 1000.0, true),
                step(1, 9.0, false),
                step(2, 9.0, false),
                Body::Exit(WorkerExit {
                    status: ExitStatus::Ok,
                    message: None,
                }),
                Body::WorkerExited {
                    exit_code: Some(0),
                    signal: None,
                    stop_requested: false,
                },
            ],
        );
        let summary = Summary::from_state(&state);
        let w = &summary.workers[0];
        assert_eq!((w.steps, w.warmup_steps, w.samples), (3, 1, 20));
        assert_eq!(w.status, WorkerStatus::Ok);
        let compute = w.compute_ms.unwrap();
        assert!((compute.max - 9.0).abs() < 0.01, "{compute:?}");
        // (1 ms copy + 9 ms compute) per 10 samples.
        assert!((w.sample_time_ms.unwrap().p50 - 1.0).abs() < 0.01);
        assert!((w.throughput_samples_per_s.unwrap() - 1000.0).abs() < 0.1);
        assert_eq!(w.h2d_bytes_per_step, Some(1000));
        assert_eq!(w.loss.first, Some(2.0));
        assert!((w.loss.last.unwrap() - 1.8).abs() < 1e-9);
    }

    #[test]
    fn a_killed_worker_is_failed_with_its_stderr() {
        let state = fold(
            "pytorch",
            vec![
                step(0, 5.0, false),
                Body::Output {
                    stream: Stream::Stderr,
                    line: "about to die".into(),
                },
                Body::WorkerExited {
                    exit_code: None,
                    signal: Some(9),
                    stop_requested: false,
                },
            ],
        );
        let w = &Summary::from_state(&state).workers[0];
        assert_eq!(w.status, WorkerStatus::Failed);
        assert_eq!(w.signal, Some(9));
        let error = w.error.as_deref().unwrap();
        assert!(
            error.contains("SIGKILL") && error.contains("about to die"),
            "{error}"
        );
    }

    #[test]
    fn a_stop_requested_by_the_user_is_not_a_failure() {
        let state = fold(
            "pytorch",
            vec![Body::WorkerExited {
                exit_code: None,
                signal: Some(15),
                stop_requested: true,
            }],
        );
        assert_eq!(
            Summary::from_state(&state).workers[0].status,
            WorkerStatus::Stopped
        );
    }

    #[test]
    fn stderr_tail_is_bounded() {
        let lines = (0..100)
            .map(|i| Body::Output {
                stream: Stream::Stderr,
                line: i.to_string(),
            })
            .collect();
        let state = fold("pytorch", lines);
        let tail = &state.workers[0].stderr_tail;
        assert_eq!(tail.len(), STDERR_TAIL_LINES);
        assert_eq!(tail.back().map(String::as_str), Some("99"));
    }
}
