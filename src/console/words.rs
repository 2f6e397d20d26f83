//! The words golow says a session and its numbers in, alike in the printed tables and on the screens: a session's
//! description, a measured number, a number of bytes.

use crate::state::SummaryConfig;

/// Where a session's description goes.
pub enum Describe<'a> {
    /// The live view's header: compact, with the first GPU's name.
    Header { gpu: Option<&'a str> },
    /// Above the summary table: the commands spelled out.
    Table,
}

/// What a session runs: the built-in workers' model, mode, dataset, resolution and batch (or, when only `--cmd` workers
/// run, the commands), their device and on a GPU their policy, then the schedule and what golow set for the commands,
/// joined by " · ".
pub fn describe(c: &SummaryConfig, form: Describe) -> String {
    let mut parts = Vec::new();
    match (&form, &c.builtin) {
        (Describe::Header { .. }, Some(b)) => parts.extend([
            format!("{} {}", b.model.name(), b.mode.name()),
            format!("{} {} px", b.dataset, b.resolution),
            format!("batch {}", b.batch_size),
        ]),
        (Describe::Header { .. }, None) if !c.attached.is_empty() => {
            let pids: Vec<String> = c.attached.values().map(u32::to_string).collect();
            parts.push(format!("attached to {}", pids.join(", ")));
        }
        (Describe::Header { .. }, None) => parts.push("your commands".to_string()),
        (Describe::Table, builtin) => {
            if let Some(b) = builtin {
                parts.extend([
                    format!("{} {} on {}", b.model.name(), b.mode.name(), b.dataset),
                    format!("{} px", b.resolution),
                    format!("batch {}", b.batch_size),
                ]);
            }
            parts.extend(
                c.commands
                    .iter()
                    .map(|(name, command)| format!("{name}: {command}")),
            );
            parts.extend(
                c.attached
                    .iter()
                    .map(|(name, pid)| format!("{name}: attached to pid {pid}")),
            );
        }
    }
    if let Some(b) = &c.builtin {
        parts.push(match form {
            Describe::Header { gpu: Some(gpu) } => format!("{} ({gpu})", b.device),
            _ => b.device.clone(),
        });
        // The policy every level was given matters only where cuDNN and the tensor cores run.
        if let Some(policy) = b.gpu_policy.filter(|_| b.device.starts_with("cuda")) {
            let switch = |on: bool| if on { "on" } else { "off" };
            parts.push(format!(
                "cuDNN benchmark {}, TF32 {}",
                switch(policy.cudnn_benchmark),
                switch(policy.tf32)
            ));
        }
    }
    parts.push(c.schedule.name().to_string());
    if !c.command_env.is_empty() {
        let set: Vec<String> = c
            .command_env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.push(format!("--cmd with {}", set.join(" ")));
    }
    parts.join(" · ")
}

/// A measured number for a person to read: `digits` decimals, in exponent form past a million (a diverging loss
/// would print hundreds of digits), and the schema's word ("nan", "inf", "-inf") where it is not finite.
pub fn number(v: f64, digits: usize) -> String {
    if !v.is_finite() {
        golow_protocol::nonfinite::word(v).to_string()
    } else if v.abs() < 1e6 {
        format!("{v:.digits$}")
    } else {
        format!("{v:.2e}")
    }
}

/// Human units for a number of bytes, as the tables and the panes print it.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = b;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(3.5 * 1024.0 * 1024.0), "3.5 MiB");
    }
}
