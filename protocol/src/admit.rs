//! What the monitor admits of a worker's event stream, line by line, before anything is stamped or recorded: a
//! built-in worker's descriptor, or one connection of a `--cmd` worker's processes. The hook bounds what it says,
//! but anything may write on a socket the command's processes inherit, so every number is checked here: durations
//! finite, not negative and at most [`MAX_MS`], intervals also above zero, step and pass numbers rising on their
//! stream, counts within what they count, and a connection's first line the hello of the very process the kernel
//! says connected. Names are cut to [`MAX_NAME_BYTES`]. What is refused becomes the worker's protocol error,
//! counted, with the first reason kept.

use crate::event::{Hello, OperatorWindow, Step, WorkerEvent};
use crate::script::{
    BackwardPass, ForwardPass, MAX_NAME_BYTES, MAX_OPTIMIZERS, MAX_REASON_BYTES, Optimizer,
    OptimizerStep, ScriptProcess, StepPhases,
};

/// A duration or an interval longer than a day is no step's: refused.
pub const MAX_MS: f64 = 86_400_000.0;

/// Samples one step goes through at most, as the hook infers them or a script reports them.
pub const MAX_SAMPLES_PER_STEP: u64 = 1 << 32;

/// Why a line was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// This line alone; the stream goes on.
    Line(String),
    /// The connection is not listened to any further: its first line was not its own process's hello.
    Connection(String),
}

impl Refusal {
    pub fn message(&self) -> &str {
        match self {
            Refusal::Line(message) | Refusal::Connection(message) => message,
        }
    }
}

/// What one stream has said so far, which the next line is checked against.
#[derive(Debug, Default)]
pub struct Admission {
    /// For a `--cmd` process's connection, the pid the kernel gave for its peer; `None` on a built-in worker's
    /// descriptor.
    peer: Option<u32>,
    hello_said: bool,
    /// The lowest number each counter's next event may carry.
    next_step: u64,
    next_optimizer_steps: [u64; MAX_OPTIMIZERS as usize],
    next_forward_pass: u64,
    next_backward_pass: u64,
}

impl Admission {
    /// A built-in worker's event descriptor.
    pub fn of_worker() -> Admission {
        Admission::default()
    }

    /// A connection of a `--cmd` worker's process, whose peer the kernel says is `pid`.
    pub fn of_process(pid: u32) -> Admission {
        Admission {
            peer: Some(pid),
            ..Admission::default()
        }
    }

    /// `event` as it may be stamped and recorded (its names cut), or why it may not.
    pub fn admit(&mut self, mut event: WorkerEvent) -> Result<WorkerEvent, Refusal> {
        let opening = match self.peer {
            Some(peer) => self.first_hello(peer, &event)?,
            None => false,
        };
        let (kind, checked) = match &mut event {
            WorkerEvent::Hello(hello) => {
                cut_hello(hello);
                ("hello", Ok(()))
            }
            WorkerEvent::Step(step) => ("step", self.step(step)),
            WorkerEvent::Compile(compile) => ("compile", duration("ms", compile.ms)),
            WorkerEvent::Operators(window) => ("operators", operators(window)),
            WorkerEvent::ScriptProcess(process) => ("script_process", script_process(process)),
            WorkerEvent::Optimizer(optimizer) => ("optimizer", self::optimizer(optimizer)),
            WorkerEvent::OptimizerStep(step) => ("optimizer_step", self.optimizer_step(step)),
            WorkerEvent::ForwardPass(pass) => ("forward_pass", self.forward_pass(pass)),
            WorkerEvent::BackwardPass(pass) => ("backward_pass", self.backward_pass(pass)),
            WorkerEvent::Scalar(scalar) => {
                cut(&mut scalar.name);
                ("scalar", samples_reported(&scalar.name, scalar.value))
            }
            WorkerEvent::Phase(phase) => {
                cut(&mut phase.name);
                ("phase", Ok(()))
            }
            WorkerEvent::ProfilingOff(off) => {
                cut_to(&mut off.reason, MAX_REASON_BYTES);
                ("profiling_off", Ok(()))
            }
            WorkerEvent::Epoch(_)
            | WorkerEvent::TurnEnd(_)
            | WorkerEvent::Exit(_)
            | WorkerEvent::Compiling(_) => ("", Ok(())),
        };
        checked.map(|()| event).map_err(|reason| {
            let message = format!("{kind} refused: {reason}");
            if opening {
                Refusal::Connection(format!("{message}; the connection is not listened to"))
            } else {
                Refusal::Line(message)
            }
        })
    }

    /// A connection's first line is the hello of the process that connected, and its only hello; true for that
    /// first line.
    fn first_hello(&mut self, peer: u32, event: &WorkerEvent) -> Result<bool, Refusal> {
        match (event, self.hello_said) {
            (WorkerEvent::ScriptProcess(hello), false) if hello.pid == peer => {
                self.hello_said = true;
                Ok(true)
            }
            (WorkerEvent::ScriptProcess(hello), false) => Err(Refusal::Connection(format!(
                "a connection from pid {peer} said it is pid {}; the connection is not listened to",
                hello.pid
            ))),
            (_, false) => Err(Refusal::Connection(format!(
                "a connection from pid {peer} began without its script_process hello; the connection is not listened to"
            ))),
            (WorkerEvent::ScriptProcess(_), true) => Err(Refusal::Line(format!(
                "a second script_process from pid {peer} refused: a process says hello once"
            ))),
            (_, true) => Ok(false),
        }
    }

    fn step(&mut self, step: &Step) -> Result<(), String> {
        let next = rising("step", step.step, self.next_step)?;
        duration("data_ms", step.data_ms)?;
        duration("compute_ms", step.compute_ms)?;
        step.h2d_ms.map_or(Ok(()), |ms| duration("h2d_ms", ms))?;
        span(step.start_ns, step.end_ns)?;
        if step.batch_size == 0 || step.correct > step.batch_size {
            return Err(format!(
                "{} correct of a batch of {}",
                step.correct, step.batch_size
            ));
        }
        self.next_step = next;
        Ok(())
    }

    fn optimizer_step(&mut self, step: &OptimizerStep) -> Result<(), String> {
        let slot = optimizer_slot(step.optimizer)?;
        let mut next = rising("step", step.step, self.next_optimizer_steps[slot])?;
        // A skipped step carries the number the next taken step will have.
        if step.skipped {
            next = step.step;
        }
        step.interval_ms
            .map_or(Ok(()), |ms| interval("interval_ms", ms))?;
        step.first_step_ms
            .map_or(Ok(()), |ms| duration("first_step_ms", ms))?;
        step.phases.as_ref().map_or(Ok(()), phases)?;
        self.next_optimizer_steps[slot] = next;
        Ok(())
    }

    fn forward_pass(&mut self, pass: &ForwardPass) -> Result<(), String> {
        let next = rising("pass", pass.pass, self.next_forward_pass)?;
        duration("ms", pass.ms)?;
        pass.interval_ms
            .map_or(Ok(()), |ms| interval("interval_ms", ms))?;
        self.next_forward_pass = next;
        Ok(())
    }

    fn backward_pass(&mut self, pass: &BackwardPass) -> Result<(), String> {
        let next = rising("pass", pass.pass, self.next_backward_pass)?;
        pass.interval_ms
            .map_or(Ok(()), |ms| interval("interval_ms", ms))?;
        pass.phases.as_ref().map_or(Ok(()), phases)?;
        self.next_backward_pass = next;
        Ok(())
    }
}

/// Cuts `name` to [`MAX_NAME_BYTES`], at a character boundary.
fn cut(name: &mut String) {
    cut_to(name, MAX_NAME_BYTES);
}

/// Cuts `text` to `bytes`, at a character boundary.
fn cut_to(text: &mut String, bytes: usize) {
    let mut end = text.len().min(bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
}

fn script_process(process: &mut ScriptProcess) -> Result<(), String> {
    cut(&mut process.python);
    if let Some(torch) = &mut process.torch {
        cut(torch);
    }
    if let Some(world) = process.world_size {
        let beyond = |rank: Option<u32>| rank.is_some_and(|r| r >= world);
        if beyond(process.rank) || beyond(process.local_rank) {
            return Err(format!(
                "rank {:?} (local {:?}) in a world of {world}",
                process.rank, process.local_rank
            ));
        }
    }
    if process.threads == Some(0) {
        return Err("0 threads".into());
    }
    Ok(())
}

fn cut_hello(hello: &mut Hello) {
    cut(&mut hello.implementation);
    cut(&mut hello.device);
    hello.versions = std::mem::take(&mut hello.versions)
        .into_iter()
        .map(|(mut name, mut version)| {
            cut(&mut name);
            cut(&mut version);
            (name, version)
        })
        .collect();
}

/// A count that rises on its stream: `number` is at least `next`, the lowest it may be; the next must pass it.
fn rising(field: &str, number: u64, next: u64) -> Result<u64, String> {
    if number < next {
        return Err(format!(
            "{field} {number} where {next} or more was due: its numbers rise"
        ));
    }
    Ok(number.saturating_add(1))
}

/// A step's span on the host's clock: both ends or neither, the end not before the start, at most `MAX_MS` long.
fn span(start_ns: Option<u64>, end_ns: Option<u64>) -> Result<(), String> {
    match (start_ns, end_ns) {
        (None, None) => Ok(()),
        (Some(start), Some(end)) if end >= start => {
            duration("end_ns - start_ns", (end - start) as f64 / 1e6)
        }
        _ => Err(format!(
            "start_ns {start_ns:?} and end_ns {end_ns:?}: a step's span has both ends, the end not before the start"
        )),
    }
}

/// Measured time: finite, not negative, at most `MAX_MS`.
fn duration(field: &str, ms: f64) -> Result<(), String> {
    if ms.is_finite() && (0.0..=MAX_MS).contains(&ms) {
        Ok(())
    } else {
        Err(format!(
            "{field} {ms:?}: a duration is from 0 to {MAX_MS} ms (a day)"
        ))
    }
}

/// Time between two events: a duration, and above zero.
fn interval(field: &str, ms: f64) -> Result<(), String> {
    if ms.is_finite() && ms > 0.0 && ms <= MAX_MS {
        Ok(())
    } else {
        Err(format!(
            "{field} {ms:?}: an interval is above 0 and at most {MAX_MS} ms (a day)"
        ))
    }
}

fn phases(phases: &StepPhases) -> Result<(), String> {
    duration("phases.data_ms", phases.data_ms)?;
    duration("phases.forward_ms", phases.forward_ms)?;
    duration("phases.backward_ms", phases.backward_ms)?;
    duration("phases.optimizer_ms", phases.optimizer_ms)?;
    phases
        .hook_ms
        .map_or(Ok(()), |ms| duration("phases.hook_ms", ms))?;
    match phases.samples {
        Some(n) if n == 0 || n > MAX_SAMPLES_PER_STEP => Err(format!(
            "phases.samples {n}: a step goes through 1 to {MAX_SAMPLES_PER_STEP} samples"
        )),
        _ => Ok(()),
    }
}

/// The samples a script reports (`golow.report(samples=…)`) are counted like the hook's.
fn samples_reported(name: &str, value: f64) -> Result<(), String> {
    let samples = 0.0..=MAX_SAMPLES_PER_STEP as f64;
    if name == "samples" && !samples.contains(&value) {
        return Err(format!(
            "samples {value:?}: a step goes through 0 to {MAX_SAMPLES_PER_STEP} samples"
        ));
    }
    Ok(())
}

fn optimizer(optimizer: &mut Optimizer) -> Result<(), String> {
    cut(&mut optimizer.class);
    if optimizer.optimizer >= MAX_OPTIMIZERS {
        return Err(beyond_optimizers(optimizer.optimizer));
    }
    match optimizer.lr {
        Some(lr) if !(lr.is_finite() && lr >= 0.0) => Err(format!("a learning rate of {lr:?}")),
        _ => Ok(()),
    }
}

/// Where optimiser `index`'s count is kept: the hook numbers at most `MAX_OPTIMIZERS` per process.
fn optimizer_slot(index: u32) -> Result<usize, String> {
    if index < MAX_OPTIMIZERS {
        Ok(index as usize)
    } else {
        Err(beyond_optimizers(index))
    }
}

fn beyond_optimizers(index: u32) -> String {
    format!(
        "optimizer {index}: a process numbers its optimisers from 0 to {}",
        MAX_OPTIMIZERS - 1
    )
}

fn operators(window: &OperatorWindow) -> Result<(), String> {
    duration("compute_ms", window.compute_ms)?;
    // The recorders name at most `MAX_OPERATORS`, and sum the rest under one name more.
    let most = crate::event::MAX_OPERATORS + 1;
    if window.operators.len() > most || window.every == 0 {
        return Err(format!(
            "{} operators (at most {most}), one step in {}",
            window.operators.len(),
            window.every
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_worker_line;

    const PEER: u32 = 4242;

    fn hello(pid: u32, rank: &str) -> String {
        format!(
            r#"{{"type":"script_process","pid":{pid},{rank},"python":"3.11.7","torch":"2.11.0","threads":4}}"#
        )
    }

    /// A connection that said its hello, and what it makes of each line after.
    fn connection() -> Admission {
        let mut admission = Admission::of_process(PEER);
        admit(
            &mut admission,
            &hello(PEER, r#""rank":null,"local_rank":null,"world_size":null"#),
        )
        .unwrap();
        admission
    }

    fn admit(admission: &mut Admission, line: &str) -> Result<WorkerEvent, Refusal> {
        admission.admit(parse_worker_line(line).unwrap())
    }

    fn refused_line(admission: &mut Admission, line: &str) -> String {
        match admit(admission, line) {
            Err(Refusal::Line(message)) => message,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn intervals_that_no_step_takes_are_refused() {
        let mut admission = connection();
        for (i, ms) in ["-5", "0", "-1e9", "1e308", "86400001"].iter().enumerate() {
            let line = format!(r#"{{"type":"optimizer_step","step":{i},"interval_ms":{ms}}}"#);
            let message = refused_line(&mut admission, &line);
            assert!(
                message.starts_with("optimizer_step refused: interval_ms"),
                "{message}"
            );
        }
        let forward = r#"{"type":"forward_pass","pass":0,"ms":-1,"interval_ms":null,"grad":false}"#;
        assert!(refused_line(&mut admission, forward).contains("ms -1.0"));
        let phases = r#"{"type":"backward_pass","pass":0,"interval_ms":5,"phases":{"data_ms":1e300,"forward_ms":1,"backward_ms":1,"optimizer_ms":0,"forward_passes":1,"backward_passes":1}}"#;
        assert!(refused_line(&mut admission, phases).contains("phases.data_ms"));
        // The refused lines moved no count on: step 0 is still the first.
        let first = r#"{"type":"optimizer_step","step":0,"interval_ms":0.5}"#;
        assert!(admit(&mut admission, first).is_ok());
    }

    #[test]
    fn step_numbers_rise_per_optimiser_and_a_skipped_step_keeps_its_number() {
        let mut admission = connection();
        let step = |optimizer: u32, step: u64, skipped: bool| {
            format!(
                r#"{{"type":"optimizer_step","optimizer":{optimizer},"step":{step},"interval_ms":10,"skipped":{skipped}}}"#
            )
        };
        for line in [
            step(0, 0, false),
            step(1, 0, false),
            step(0, 1, true),
            step(0, 1, false),
            step(0, 5, false),
            step(1, 1, false),
        ] {
            assert!(admit(&mut admission, &line).is_ok(), "{line}");
        }
        let message = refused_line(&mut admission, &step(0, 3, false));
        assert_eq!(
            message,
            "optimizer_step refused: step 3 where 6 or more was due: its numbers rise"
        );
        assert!(refused_line(&mut admission, &step(1, 1, false)).contains("step 1"));
        assert!(refused_line(&mut admission, &step(16, 0, false)).contains("optimizer 16"));
        let pass = |n: u64| format!(r#"{{"type":"backward_pass","pass":{n},"interval_ms":1}}"#);
        assert!(admit(&mut admission, &pass(7)).is_ok());
        assert!(refused_line(&mut admission, &pass(7)).contains("pass 7"));
    }

    #[test]
    fn names_are_cut_at_a_character_boundary() {
        let mut admission = Admission::of_process(PEER);
        let long_python = format!(
            r#"{{"type":"script_process","pid":{PEER},"rank":null,"local_rank":null,"world_size":null,"python":"{}","torch":"{}","threads":1}}"#,
            "3".repeat(100_000),
            "é".repeat(100)
        );
        let Ok(WorkerEvent::ScriptProcess(hello)) = admit(&mut admission, &long_python) else {
            panic!("the hello was refused");
        };
        assert_eq!(hello.python.len(), MAX_NAME_BYTES);
        assert_eq!(hello.torch.unwrap(), "é".repeat(MAX_NAME_BYTES / 2));
        let name = "x".repeat(1_000_000);
        for line in [
            format!(r#"{{"type":"scalar","name":"{name}","value":1}}"#),
            format!(r#"{{"type":"phase","name":"{name}"}}"#),
            format!(r#"{{"type":"optimizer","optimizer":0,"class":"{name}","lr":0.1}}"#),
        ] {
            let event = admit(&mut admission, &line).unwrap();
            let cut = match &event {
                WorkerEvent::Scalar(s) => &s.name,
                WorkerEvent::Phase(p) => &p.name,
                WorkerEvent::Optimizer(o) => &o.class,
                other => panic!("{other:?}"),
            };
            assert_eq!(cut.len(), MAX_NAME_BYTES);
        }
        let samples = r#"{"type":"scalar","name":"samples","value":1e300}"#;
        assert!(refused_line(&mut admission, samples).contains("samples 1e300"));
    }

    #[test]
    fn a_connection_opens_with_its_own_process_hello_once() {
        let claim = hello(1, r#""rank":0,"local_rank":0,"world_size":2"#);
        let refusal = admit(&mut Admission::of_process(PEER), &claim).unwrap_err();
        assert_eq!(
            refusal,
            Refusal::Connection(format!(
                "a connection from pid {PEER} said it is pid 1; the connection is not listened to"
            ))
        );
        let step = r#"{"type":"optimizer_step","step":0,"interval_ms":null}"#;
        assert!(matches!(
            admit(&mut Admission::of_process(PEER), step),
            Err(Refusal::Connection(_))
        ));
        let beyond_world = hello(PEER, r#""rank":2,"local_rank":0,"world_size":2"#);
        assert!(matches!(
            admit(&mut Admission::of_process(PEER), &beyond_world),
            Err(Refusal::Connection(m)) if m.contains("rank Some(2)")
        ));
        let mut admission = connection();
        let again = hello(PEER, r#""rank":0,"local_rank":0,"world_size":2"#);
        assert!(refused_line(&mut admission, &again).contains("says hello once"));
        // A built-in worker's descriptor has no peer to check.
        assert!(admit(&mut Admission::of_worker(), step).is_ok());
    }

    #[test]
    fn a_built_in_workers_steps_rise_and_their_times_are_durations() {
        let mut admission = Admission::of_worker();
        let step = |n: u64, compute: &str| {
            format!(
                r#"{{"type":"step","step":{n},"epoch":0,"phase":"train","batch_size":4,"data_ms":0.1,"h2d_ms":null,"h2d_bytes":null,"compute_ms":{compute},"loss":2.3,"correct":1,"warmup":false}}"#
            )
        };
        assert!(admit(&mut admission, &step(0, "5")).is_ok());
        assert!(refused_line(&mut admission, &step(0, "5")).contains("step 0 where 1"));
        assert!(refused_line(&mut admission, &step(1, "-5")).contains("compute_ms -5"));
        assert!(admit(&mut admission, &step(1, "5")).is_ok());
        let spanned = |n: u64, span: &str| {
            step(n, "5").replace(r#""warmup""#, &format!(r#"{span},"warmup""#))
        };
        assert!(admit(&mut admission, &spanned(2, r#""start_ns":10,"end_ns":20"#)).is_ok());
        for half_or_backwards in [r#""start_ns":10"#, r#""start_ns":30,"end_ns":20"#] {
            let refused = refused_line(&mut admission, &spanned(3, half_or_backwards));
            assert!(refused.contains("a step's span"), "{refused}");
        }
        let too_long = refused_line(
            &mut admission,
            &spanned(3, r#""start_ns":0,"end_ns":99999999999999999"#),
        );
        assert!(too_long.contains("end_ns - start_ns"), "{too_long}");
    }
}
