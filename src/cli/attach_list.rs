//! `golow attach` without a process to watch: the Python processes here that use torch, for a user to pick one; and
//! `golow attach --detach PID…`, which lets processes go.

use std::io::Write;

use crate::inject;
use crate::session::{Target, process_command_line};
use crate::telemetry::gpu::{GpuSource, NvmlSource};
use crate::telemetry::procfs;

/// Characters of a command line shown in the list.
const COMMAND_WIDTH: usize = 60;

/// Prints the Python processes that have torch loaded; exit 0 (a line on stderr where there are none).
pub fn list() -> i32 {
    let gpu_memory = gpu_memory_by_pid();
    let own = std::process::id();
    let mut rows = Vec::new();
    for pid in all_pids().into_iter().filter(|&pid| pid != own) {
        let Ok(version) = inject::python_in(pid) else {
            continue;
        };
        if !maps_torch(pid) {
            continue;
        }
        let memory = gpu_memory
            .get(&pid)
            .map_or("-".to_string(), |bytes| format!("{} MiB", bytes >> 20));
        rows.push([
            pid.to_string(),
            user_of(pid),
            format!("{version}"),
            uptime_of(pid),
            memory,
            printable(&process_command_line(pid).join(" "), COMMAND_WIDTH),
        ]);
    }
    if rows.is_empty() {
        let _ = writeln!(
            std::io::stderr(),
            "no Python process using torch runs here that golow can read (another user's needs root)"
        );
        return 0;
    }
    let header = ["PID", "USER", "PYTHON", "UPTIME", "GPU MEMORY", "COMMAND"];
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = std::io::stdout().lock();
    for row in std::iter::once(header.map(String::from)).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    let _ = writeln!(out, "attach with: golow attach PID");
    0
}

/// Asks each target's step hook to let go, a line each; exit 0 when every one could be asked, 1 otherwise.
pub fn let_go(targets: &[(String, Target)]) -> i32 {
    let mut code = 0;
    for (_, target) in targets {
        match crate::session::let_go(target.pid) {
            Ok(line) => {
                let _ = writeln!(std::io::stdout(), "{line}");
            }
            Err(line) => {
                let _ = writeln!(std::io::stderr(), "golow: {line}");
                code = 1;
            }
        }
    }
    code
}

fn all_pids() -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether `pid` has torch's library mapped (it imported torch).
fn maps_torch(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.lines().any(|line| line.contains("/libtorch")))
}

/// The name of `pid`'s user, from /etc/passwd; the number where it has none.
fn user_of(pid: u32) -> String {
    let Some(uid) = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            line.split_whitespace().nth(1).map(str::to_string)
        })
    else {
        return "?".into();
    };
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                (fields.get(2) == Some(&uid.as_str())).then(|| fields[0].to_string())
            })
        })
        .map_or(uid, |name| printable(&name, 16))
}

/// How long `pid` has run, as 1h02m or 3m20s.
fn uptime_of(pid: u32) -> String {
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    let since_boot = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok());
    let (Some(identity), Some(since_boot)) = (procfs::identity(pid), since_boot) else {
        return "?".into();
    };
    let seconds = (since_boot - identity.start as f64 / ticks as f64).max(0.0) as u64;
    match seconds {
        s if s >= 3600 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// GPU memory each process holds, as NVML says; empty without a GPU.
fn gpu_memory_by_pid() -> std::collections::HashMap<u32, u64> {
    let Ok(mut source) = NvmlSource::open() else {
        return Default::default();
    };
    let mut memory = std::collections::HashMap::new();
    for device in source.devices() {
        for process in source.processes(device.index, None) {
            *memory.entry(process.pid).or_default() += process.memory_bytes.unwrap_or(0);
        }
    }
    memory
}

/// `text` for a terminal (control characters and bidirectional marks escaped), at most `width` characters.
fn printable(text: &str, width: usize) -> String {
    let one_line = text.replace('\n', " ");
    let shown = golow_protocol::text::printable(&one_line);
    if shown.chars().count() <= width {
        return shown.into_owned();
    }
    let mut cut: String = shown.chars().take(width - 1).collect();
    cut.push('…');
    cut
}
