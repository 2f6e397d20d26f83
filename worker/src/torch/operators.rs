//! The operator breakdown of the Rust levels: one step in `every` past the warm-up is profiled through libtorch's own
//! operator callbacks (`csrc/operators.cpp`), only while the model computes; once a window (1 s) has passed, what
//! those steps ran is taken and sent as one `operators` event: per operator its calls, self and total time and its
//! inputs' most frequent shapes, largest self time first, capped like the collector's kernels.

use std::ffi::{CStr, c_char};
use std::time::{Duration, Instant};

use golow_protocol::event::{MAX_OPERATORS, OTHER_OPERATORS, OperatorStats, OperatorWindow};
use serde::Deserialize;

use crate::shim::{check, result};

unsafe extern "C" {
    fn golow_ops_begin() -> *mut c_char;
    fn golow_ops_end() -> *mut c_char;
    fn golow_ops_take(json: *mut *mut c_char) -> *mut c_char;
    fn golow_free_error(message: *mut c_char);
}

/// How often a window of profiled steps is sent.
const WINDOW: Duration = Duration::from_secs(1);

/// What the shim hands over.
#[derive(Deserialize)]
struct Taken {
    dropped: u64,
    operators: Vec<TakenOperator>,
}

#[derive(Deserialize)]
struct TakenOperator {
    name: String,
    calls: u64,
    self_ns: u64,
    total_ns: u64,
    shapes: Vec<(String, u64)>,
}

pub struct Operators {
    every: u64,
    warmup: u64,
    recording: bool,
    since: Instant,
    steps: u64,
    compute_ms: f64,
}

impl Operators {
    /// Profiles one step in `every` past `warmup`; `None` when `every` is 0 (`--no-ops`).
    pub fn new(every: u32, warmup: u64) -> Option<Operators> {
        (every > 0).then(|| Operators {
            every: u64::from(every),
            warmup,
            recording: false,
            since: Instant::now(),
            steps: 0,
            compute_ms: 0.0,
        })
    }

    /// Whether `step` is profiled.
    pub fn profiles(&self, step: u64) -> bool {
        step >= self.warmup && (step - self.warmup).is_multiple_of(self.every)
    }

    /// Just before the model computes step `step`: starts recording, with input shapes, when it is profiled; whether
    /// it did.
    pub fn begin(&mut self, step: u64) -> bool {
        if self.profiles(step) {
            // SAFETY: the shim's entry points take no pointers here.
            check(unsafe { golow_ops_begin() });
            self.recording = true;
        }
        self.recording
    }

    /// Just after the model computed, in `compute_ms`: stops recording. Whether the step was profiled.
    pub fn end(&mut self, compute_ms: f64) -> bool {
        if !std::mem::take(&mut self.recording) {
            return false;
        }
        // SAFETY: as in `begin`.
        check(unsafe { golow_ops_end() });
        self.steps += 1;
        self.compute_ms += compute_ms;
        true
    }

    /// Whether a window is due: a profiled step since the last, and a window's time passed (or `now`).
    pub fn due(&self, now: bool) -> bool {
        self.steps > 0 && (now || self.since.elapsed() >= WINDOW)
    }

    /// The window of the profiled steps since the last: what libtorch's callbacks recorded, and the network's `own`
    /// operations (name, calls, nanoseconds; no children, so their self time is their total).
    pub fn window(&mut self, own: Vec<(String, u64, u64)>) -> OperatorWindow {
        let mut json: *mut c_char = std::ptr::null_mut();
        // SAFETY: the shim writes one malloc'd string into `json`, freed below.
        if let Err(message) = result(unsafe { golow_ops_take(&mut json) }) {
            panic!("libtorch: {message}");
        }
        // SAFETY: NUL-terminated and ours to free.
        let text = unsafe {
            let text = CStr::from_ptr(json).to_string_lossy().into_owned();
            golow_free_error(json);
            text
        };
        let mut taken: Taken = serde_json::from_str(&text).expect("the shim writes valid JSON");
        for (name, calls, ns) in own {
            match taken.operators.iter_mut().find(|op| op.name == name) {
                Some(op) => {
                    op.calls += calls;
                    op.self_ns += ns;
                    op.total_ns += ns;
                }
                None => taken.operators.push(TakenOperator {
                    name,
                    calls,
                    self_ns: ns,
                    total_ns: ns,
                    shapes: Vec::new(),
                }),
            }
        }
        let window = OperatorWindow {
            process: 0,
            steps: std::mem::take(&mut self.steps),
            compute_ms: std::mem::take(&mut self.compute_ms),
            every: self.every as u32,
            operators: capped(taken.operators),
            dropped: taken.dropped,
        };
        self.since = Instant::now();
        window
    }
}

/// Largest self time first, at most `MAX_OPERATORS` in all: beyond that, and what the shim already could not tell
/// apart, summed as `OTHER_OPERATORS`, last.
fn capped(mut taken: Vec<TakenOperator>) -> Vec<OperatorStats> {
    let mut other = OperatorStats {
        name: OTHER_OPERATORS.into(),
        calls: 0,
        self_ns: 0,
        total_ns: 0,
        shapes: Default::default(),
    };
    let mut fold = |op: &TakenOperator| {
        other.calls += op.calls;
        other.self_ns += op.self_ns;
        other.total_ns += op.total_ns;
    };
    taken.retain(|op| {
        op.name != OTHER_OPERATORS || {
            fold(op);
            false
        }
    });
    taken.sort_by(|a, b| b.self_ns.cmp(&a.self_ns).then_with(|| a.name.cmp(&b.name)));
    let rest = taken.split_off(taken.len().min(MAX_OPERATORS - 1));
    rest.iter().for_each(&mut fold);
    let mut operators: Vec<OperatorStats> = taken
        .into_iter()
        .map(|op| {
            let shapes = op
                .shapes
                .iter()
                .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
                .map(|(s, _)| s.as_str().into())
                .unwrap_or_default();
            OperatorStats {
                name: op.name.into(),
                calls: op.calls,
                self_ns: op.self_ns,
                total_ns: op.total_ns,
                shapes,
            }
        })
        .collect();
    if other.calls > 0 {
        operators.push(other);
    }
    operators
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_of_distinct_input_shapes_stay_bounded() {
        let mut operators = Operators::new(1, 0).unwrap();
        operators.begin(0);
        for n in 1..=3000 {
            let _ = tch::Tensor::ones([n], (tch::Kind::Float, tch::Device::Cpu)) + 1.0;
        }
        assert!(operators.end(1.0));
        assert!(operators.due(true));
        let window = operators.window(vec![("golow::own".into(), 2, 5_000)]);
        assert!(window.operators.len() <= MAX_OPERATORS, "{window:?}");
        let add = window
            .operators
            .iter()
            .find(|o| o.name == "aten::add")
            .unwrap_or_else(|| panic!("{window:?}"));
        assert!(add.calls >= 3000, "{add:?}");
        // Eight forms of its input are told apart; the other 2,992 calls' shapes are dropped, not kept.
        assert!(add.shapes.starts_with('['), "{add:?}");
        assert!(window.dropped >= 3000 - 8, "{}", window.dropped);
        let own = window.operators.iter().find(|o| o.name == "golow::own");
        assert_eq!(
            own.map(|o| (o.calls, o.self_ns, o.total_ns)),
            Some((2, 5_000, 5_000))
        );
        assert!(!operators.due(true), "taken: nothing left");
    }

    fn taken(name: &str, self_ns: u64, shapes: &[(&str, u64)]) -> TakenOperator {
        TakenOperator {
            name: name.into(),
            calls: 2,
            self_ns,
            total_ns: self_ns + 1,
            shapes: shapes.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
        }
    }

    #[test]
    fn a_window_names_the_largest_and_sums_the_rest_last() {
        let mut all: Vec<TakenOperator> = (0..100)
            .map(|i| taken(&format!("aten::op_{i:03}"), 1_000 + i, &[]))
            .collect();
        all.push(taken(OTHER_OPERATORS, 7, &[]));
        all.push(taken(
            "aten::conv",
            1,
            &[("[1]", 1), ("[2, 2]", 5), ("[3]", 5)],
        ));
        let window = capped(all);
        assert_eq!(window.len(), MAX_OPERATORS);
        assert_eq!(window[0].name, "aten::op_099");
        assert!(
            window[..MAX_OPERATORS - 1]
                .windows(2)
                .all(|w| w[0].self_ns >= w[1].self_ns)
        );
        let other = window.last().unwrap();
        assert_eq!(other.name, OTHER_OPERATORS);
        // 37 of the 100, the conv, and what the shim had already folded.
        let folded: u64 = (0..37).map(|i| 1_000 + i).sum::<u64>() + 1 + 7;
        assert_eq!((other.self_ns, other.calls), (folded, 2 * 39));
        let small = capped(vec![taken(
            "aten::conv",
            1,
            &[("[1]", 1), ("[2, 2]", 5), ("[3]", 5)],
        )]);
        assert_eq!(
            small[0].shapes, "[2, 2]",
            "the most frequent, the first of equals by name"
        );
        assert!(capped(Vec::new()).is_empty());
    }
}
