//! What two sessions ran and where — configuration, library versions, machine — and how they differ, so that a
//! comparison says what it compares before it gives a verdict.

use std::collections::BTreeMap;

use golow_protocol::config::SessionConfig;

use crate::state::State;
use crate::telemetry::machine::Machine;

/// A worker's name and the library versions its hello reported.
pub type WorkerVersions = (String, BTreeMap<String, String>);

/// What each worker of a session reported of its libraries, in the session's order.
pub fn versions(state: &State) -> Vec<WorkerVersions> {
    state
        .workers
        .iter()
        .filter_map(|w| Some((w.name.clone(), w.hello.as_ref()?.versions.clone())))
        .collect()
}

/// A session's setup: its configuration, the machine it ran on, golow's version, and its workers' library versions.
pub struct Setup<'a> {
    pub config: &'a SessionConfig,
    pub machine: &'a Machine,
    pub golow_version: &'a str,
    pub versions: &'a [WorkerVersions],
}

/// One difference: what differs, A's value and B's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub what: String,
    pub a: String,
    pub b: String,
}

impl Difference {
    pub fn describe(&self) -> String {
        format!("{} {} vs {}", self.what, self.a, self.b)
    }

    /// Whether it makes a step of A and one of B hold different work, so that per-step figures do not compare.
    pub fn changes_steps(&self) -> bool {
        matches!(self.what.as_str(), "batch" | "resolution" | "model")
    }

    /// Whether A and B did different work altogether (training against evaluation), so that none of their figures
    /// compare.
    pub fn changes_work(&self) -> bool {
        self.what == "mode"
    }
}

/// Everything in which B's setup differs from A's, in the order a reader weighs it.
pub fn differences(a: &Setup, b: &Setup) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut differ = |what: &str, va: String, vb: String| {
        if va != vb {
            out.push(Difference {
                what: what.to_string(),
                a: va,
                b: vb,
            });
        }
    };
    let (ca, cb) = (a.config, b.config);
    differ("model", ca.model.name().into(), cb.model.name().into());
    differ("mode", ca.mode.name().into(), cb.mode.name().into());
    differ("dataset", ca.dataset.clone(), cb.dataset.clone());
    differ(
        "batch",
        ca.batch_size.to_string(),
        cb.batch_size.to_string(),
    );
    differ(
        "resolution",
        format!("{} px", ca.resolution),
        format!("{} px", cb.resolution),
    );
    differ("threads", ca.threads.to_string(), cb.threads.to_string());
    differ("device", ca.device.clone(), cb.device.clone());
    differ(
        "schedule",
        ca.schedule.name().into(),
        cb.schedule.name().into(),
    );
    differ("pinned", ca.pinned.to_string(), cb.pinned.to_string());
    differ(
        "optimiser",
        format!("{:?}", ca.optimiser),
        format!("{:?}", cb.optimiser),
    );
    if let (Some(ma), Some(mb)) = (ca.compile_mode, cb.compile_mode) {
        differ("compile mode", ma.name().into(), mb.name().into());
    }
    for (name, command) in &ca.commands {
        if let Some(other) = cb.commands.get(name) {
            differ(&format!("{name}'s command"), command.clone(), other.clone());
        }
    }
    differ("machine", a.machine.host.clone(), b.machine.host.clone());
    differ("CPU", a.machine.cpu.clone(), b.machine.cpu.clone());
    differ(
        "cores",
        a.machine.cores.to_string(),
        b.machine.cores.to_string(),
    );
    let gpus = |m: &Machine| {
        let names: Vec<&str> = m.gpus.iter().map(|g| g.name.as_str()).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    differ("GPUs", gpus(a.machine), gpus(b.machine));
    differ("golow", a.golow_version.into(), b.golow_version.into());
    for (name, va) in a.versions {
        let Some((_, vb)) = b.versions.iter().find(|(other, _)| other == name) else {
            continue;
        };
        for (library, version) in va {
            if let Some(other) = vb.get(library) {
                differ(
                    &format!("{name}'s {library}"),
                    version.clone(),
                    other.clone(),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::event::Body;

    fn config() -> SessionConfig {
        match golow_protocol::samples::every_body().remove(0) {
            Body::SessionStart(c) => *c,
            other => panic!("{other:?}"),
        }
    }

    fn machine() -> Machine {
        Machine {
            host: "box".into(),
            cpu: "Xeon".into(),
            cores: 2,
            gpus: Vec::new(),
            gpu_unavailable: None,
        }
    }

    #[test]
    fn the_same_setup_has_no_differences() {
        let (c, m, s) = (config(), machine(), Vec::new());
        let setup = Setup {
            config: &c,
            machine: &m,
            golow_version: "0.1.0",
            versions: &s,
        };
        assert!(differences(&setup, &setup).is_empty());
    }

    #[test]
    fn a_different_batch_threads_compile_mode_and_host_are_each_said() {
        let (ca, m, s) = (config(), machine(), Vec::new());
        let cb = SessionConfig {
            batch_size: ca.batch_size * 2,
            threads: 1,
            compile_mode: Some(golow_protocol::config::CompileMode::Default),
            ..ca.clone()
        };
        let mb = Machine {
            host: "other".into(),
            ..m.clone()
        };
        let a = Setup {
            config: &ca,
            machine: &m,
            golow_version: "0.1.0",
            versions: &s,
        };
        let b = Setup {
            config: &cb,
            machine: &mb,
            golow_version: "0.1.0",
            versions: &s,
        };
        let said: Vec<String> = differences(&a, &b)
            .iter()
            .map(Difference::describe)
            .collect();
        assert_eq!(
            said,
            [
                "batch 8 vs 16",
                "threads 4 vs 1",
                "compile mode reduce-overhead vs default",
                "machine box vs other"
            ]
        );
        assert!(differences(&a, &b).iter().any(Difference::changes_steps));
        let c_threads = SessionConfig {
            threads: 1,
            ..ca.clone()
        };
        let c = Setup {
            config: &c_threads,
            ..a
        };
        assert!(!differences(&a, &c).iter().any(Difference::changes_steps));
    }
}
