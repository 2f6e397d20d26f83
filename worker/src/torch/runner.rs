//! The step loop every Rust worker runs: the same data order, timed regions, events and epoch accounting
//! as `pytorch/worker.py`, with the network as the only thing that differs between implementations.

use std::time::Instant;

use tch::{Device, Kind, Tensor};

use super::batches::DataCache;
use super::clock::{RegionTimes, StepClock};
use super::operators::Operators;
use crate::channels::emit::Emitter;
use crate::channels::turns::Turns;
use golow_data::epoch_order;
use golow_protocol::channels::Grant;
use golow_protocol::collector::monotonic_now_ns;
use golow_protocol::config::{Mode, WorkerConfig};
use golow_protocol::event::{Epoch, ExitStatus, Step, TurnEnd, WorkerEvent, WorkerExit};

/// What differs between implementations: how a step is computed.
pub trait Network {
    /// One training step on a batch (forward, backward, the SGD update): its mean loss and its logits.
    fn train_step(&mut self, inputs: &Tensor, targets: &Tensor) -> (Tensor, Tensor);
    /// Batch norm on running statistics and no gradients: the batch's mean loss and its logits.
    fn evaluate(&mut self, inputs: &Tensor, targets: &Tensor) -> (Tensor, Tensor);
    /// Switches batch norm between batch statistics and running statistics.
    fn set_train(&mut self, train: bool);
    /// Starts (`true`) or stops timing the network's own operations, for a level whose work libtorch's operator
    /// callbacks do not see.
    fn time_operations(&mut self, _on: bool) {}
    /// The network's own operations timed since the last take: name, calls and nanoseconds.
    fn take_operations(&mut self) -> Vec<(String, u64, u64)> {
        Vec::new()
    }
}

/// Running totals of one epoch.
#[derive(Default)]
struct Tally {
    loss_sum: f64,
    batches: u64,
    correct: u64,
    samples: u64,
}

impl Tally {
    fn add(&mut self, loss: f64, correct: u64, samples: u64) {
        self.loss_sum += loss;
        self.batches += 1;
        self.correct += correct;
        self.samples += samples;
    }

    fn loss(&self) -> Option<f64> {
        (self.batches > 0).then(|| self.loss_sum / self.batches as f64)
    }

    fn accuracy(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.correct as f64 / self.samples as f64)
    }
}

/// Number of whole batches in one pass over the split the mode reads.
fn steps_per_epoch(samples: usize, batch_size: u32) -> u64 {
    (samples / batch_size as usize) as u64
}

pub struct Runner<'a> {
    pub config: &'a WorkerConfig,
    pub device: Device,
    pub data: &'a DataCache,
    pub emitter: &'a mut Emitter,
    pub turns: Turns,
}

fn correct_count(logits: &Tensor, targets: &Tensor) -> u64 {
    logits
        .argmax(-1, false)
        .eq_tensor(targets)
        .sum(Kind::Int64)
        .int64_value(&[]) as u64
}

impl Runner<'_> {
    fn emit(&mut self, event: WorkerEvent) -> Result<(), String> {
        self.emit_or_hold(event, false)
    }

    /// `emit`, or when `hold`, written for the next `emit` to flush along.
    fn emit_or_hold(&mut self, event: WorkerEvent, hold: bool) -> Result<(), String> {
        let written = if hold {
            self.emitter.hold(&event)
        } else {
            self.emitter.emit(&event)
        };
        written.map_err(|e| format!("event channel: {e}"))
    }

    /// Runs every configured step; returns how the run ended.
    pub fn run(&mut self, net: &mut dyn Network) -> Result<ExitStatus, String> {
        let config = self.config;
        let train = config.mode == Mode::Train;
        let phase = if train { Mode::Train } else { Mode::Eval };
        let split_count = self.data.split(phase).count;
        let per_epoch = steps_per_epoch(split_count, config.batch_size);
        if per_epoch == 0 {
            return Err(format!(
                "batch size {} is larger than the {} split ({split_count} samples)",
                config.batch_size,
                config.mode.name()
            ));
        }
        net.set_train(train);
        let cuda = self.device.is_cuda();
        let mut clock = StepClock::new(match self.device {
            Device::Cuda(index) => Some(index),
            _ => None,
        })?;
        let pinned = (config.pinned && cuda).then_some(self.device);
        let batch = config.batch_size as usize;
        let mut order = Vec::new();
        let mut tally = Tally::default();
        let mut operators = Operators::new(config.ops_every, config.warmup);
        for step in 0..config.steps {
            if self.turns.turn_over() {
                self.emit(WorkerEvent::TurnEnd(TurnEnd { steps_done: step }))?;
                if self.turns.wait()? == Grant::Stop {
                    self.send_operators(&mut operators, net, true)?;
                    return Ok(ExitStatus::Stopped);
                }
            }
            let epoch = step / per_epoch;
            let position = (step % per_epoch) as usize;
            if position == 0 {
                order = if train {
                    epoch_order(config.seed, epoch, split_count)
                } else {
                    (0..split_count).collect()
                };
            }
            let start_ns = monotonic_now_ns();
            let data_start = Instant::now();
            let host = self.data.batch(
                phase,
                &order[position * batch..(position + 1) * batch],
                pinned,
            );
            let data_ms = data_start.elapsed().as_secs_f64() * 1e3;

            clock.mark(0)?;
            let (inputs, targets) = if cuda {
                (
                    host.inputs
                        .to_device_(self.device, Kind::Float, pinned.is_some(), false),
                    host.targets
                        .to_device_(self.device, Kind::Int64, pinned.is_some(), false),
                )
            } else {
                (host.inputs.shallow_clone(), host.targets.shallow_clone())
            };
            clock.mark(1)?;
            if let Some(operators) = operators.as_mut()
                && operators.begin(step)
            {
                net.time_operations(true);
            }
            let (loss, logits) = if train {
                net.train_step(&inputs, &targets)
            } else {
                net.evaluate(&inputs, &targets)
            };
            clock.mark(2)?;
            let RegionTimes { h2d_ms, compute_ms } = clock.read()?;
            let profiled = operators.as_mut().is_some_and(|o| o.end(compute_ms));
            if profiled {
                net.time_operations(false);
            }
            let loss = loss.double_value(&[]);
            let correct = tch::no_grad(|| correct_count(&logits, &targets));
            self.turns.took_step();
            tally.add(loss, correct, batch as u64);
            let epoch_complete = position as u64 + 1 == per_epoch;
            let epoch_ends = epoch_complete || step + 1 == config.steps;
            // When the turn's end comes next, with no evaluation between, both go in one write; a due window of
            // operators goes before them (under the alternate schedule every step ends a turn).
            let turn_end_next = self.turns.turn_over() && !epoch_ends;
            self.send_operators(&mut operators, net, false)?;
            self.emit_or_hold(
                WorkerEvent::Step(Step {
                    step,
                    epoch,
                    phase,
                    batch_size: config.batch_size,
                    data_ms,
                    h2d_ms,
                    h2d_bytes: cuda.then(|| host.bytes()),
                    compute_ms,
                    loss,
                    correct: correct as u32,
                    warmup: step < config.warmup,
                    profiled,
                    start_ns,
                    end_ns: start_ns.and(monotonic_now_ns()),
                }),
                turn_end_next,
            )?;
            if epoch_ends {
                let event = self.end_epoch(net, epoch, epoch_complete, &tally)?;
                self.emit(WorkerEvent::Epoch(event))?;
                tally = Tally::default();
            }
        }
        self.send_operators(&mut operators, net, true)?;
        Ok(ExitStatus::Ok)
    }

    /// The operators of the latest profiled steps, once a window is due (at once when `now`: at the run's end).
    fn send_operators(
        &mut self,
        operators: &mut Option<Operators>,
        net: &mut dyn Network,
        now: bool,
    ) -> Result<(), String> {
        let Some(operators) = operators.as_mut().filter(|o| o.due(now)) else {
            return Ok(());
        };
        let window = operators.window(net.take_operations());
        self.emit(WorkerEvent::Operators(window))
    }

    fn end_epoch(
        &self,
        net: &mut dyn Network,
        epoch: u64,
        complete: bool,
        tally: &Tally,
    ) -> Result<Epoch, String> {
        if self.config.mode == Mode::Eval {
            return Ok(Epoch {
                epoch,
                complete,
                train_loss: None,
                train_accuracy: None,
                eval_loss: tally.loss(),
                eval_accuracy: tally.accuracy(),
            });
        }
        let eval = if complete {
            Some(self.evaluate(net))
        } else {
            None
        };
        Ok(Epoch {
            epoch,
            complete,
            train_loss: tally.loss(),
            train_accuracy: tally.accuracy(),
            eval_loss: eval.as_ref().and_then(Tally::loss),
            eval_accuracy: eval.as_ref().and_then(Tally::accuracy),
        })
    }

    /// One untimed pass over the whole test split, the last partial batch included.
    fn evaluate(&self, net: &mut dyn Network) -> Tally {
        net.set_train(false);
        let mut tally = Tally::default();
        let count = self.data.test.count;
        let indices: Vec<usize> = (0..count).collect();
        for chunk in indices.chunks(self.config.batch_size as usize) {
            let host = self.data.batch(Mode::Eval, chunk, None);
            let inputs = host.inputs.to_device(self.device);
            let targets = host.targets.to_device(self.device);
            let (loss, logits) = net.evaluate(&inputs, &targets);
            let correct = tch::no_grad(|| correct_count(&logits, &targets));
            tally.add(loss.double_value(&[]), correct, chunk.len() as u64);
        }
        net.set_train(true);
        tally
    }
}

/// Sends the final event of a run that ended on the worker's own terms.
pub fn emit_exit(emitter: &mut Emitter, outcome: &Result<ExitStatus, String>) {
    let (status, message) = match outcome {
        Ok(status) => (*status, None),
        Err(message) => (ExitStatus::Error, Some(message.clone())),
    };
    let _ = emitter.emit(&WorkerEvent::Exit(WorkerExit { status, message }));
}
