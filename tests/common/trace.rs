//! Reading a Chrome trace golow exported: its slices by thread, and the order every thread keeps. Shared by the
//! integration tests and, by path, the export's unit tests (`src/export/tests.rs`).

use std::collections::HashMap;

use serde_json::Value;

/// A slice of a trace: its name, start and end in µs.
#[derive(Debug)]
pub struct Slice {
    pub name: String,
    pub start: f64,
    pub end: f64,
}

/// Every slice of `trace`, by process and thread, in the order written.
pub fn slices_by_thread(trace: &Value) -> HashMap<(u64, u64), Vec<Slice>> {
    let mut threads: HashMap<(u64, u64), Vec<Slice>> = HashMap::new();
    for e in trace["traceEvents"].as_array().unwrap() {
        if e["ph"] != "X" {
            continue;
        }
        let start = e["ts"].as_f64().unwrap();
        let thread = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        threads.entry(thread).or_default().push(Slice {
            name: e["name"].as_str().unwrap().to_string(),
            start,
            end: start + e["dur"].as_f64().unwrap(),
        });
    }
    threads
}

/// A step, pass or window slice, which holds its phases or operators, with its kind and number (a step's, a
/// pass's); `None` for what it holds.
fn numbered(name: &str) -> Option<(&str, Option<u64>)> {
    if ["operators: ", "compile", "recompile"]
        .iter()
        .any(|k| name.starts_with(k))
    {
        return Some((name, None));
    }
    let kind = ["step ", "backward pass ", "forward "]
        .into_iter()
        .find(|k| name.starts_with(k))?;
    let number = name[kind.len()..].split(' ').next()?.parse().ok();
    Some((kind, number))
}

/// No thread of `trace` goes back in time: each step, pass or window starts where the one before it on its thread
/// ended or later, and their numbers rise; what they hold lies inside them.
pub fn assert_no_thread_goes_back(trace: &Value) {
    for (thread, slices) in slices_by_thread(trace) {
        let mut parent: Option<&Slice> = None;
        let mut last_number: HashMap<&str, u64> = HashMap::new();
        for slice in &slices {
            let Some((kind, number)) = numbered(&slice.name) else {
                let parent = parent.unwrap_or_else(|| panic!("{thread:?}: {} alone", slice.name));
                assert!(
                    parent.start <= slice.start && slice.end <= parent.end,
                    "{thread:?}: {} outside {}",
                    slice.name,
                    parent.name
                );
                continue;
            };
            if let Some(before) = parent {
                assert!(
                    slice.start >= before.end,
                    "{thread:?}: {} at {} µs starts before {} ends at {} µs",
                    slice.name,
                    slice.start,
                    before.name,
                    before.end
                );
            }
            if let Some(n) = number {
                if let Some(&before) = last_number.get(kind) {
                    assert!(
                        n > before,
                        "{thread:?}: {} after {kind} {before}",
                        slice.name
                    );
                }
                last_number.insert(kind, n);
            }
            parent = Some(slice);
        }
    }
}

/// `inner` lies within `outer`, give or take `slack` µs.
pub fn assert_within(inner: &Slice, outer: &Slice, slack: f64) {
    assert!(
        outer.start - slack <= inner.start && inner.end <= outer.end + slack,
        "{} [{}, {}] µs is not within {} [{}, {}] µs",
        inner.name,
        inner.start,
        inner.end,
        outer.name,
        outer.start,
        outer.end
    );
}
