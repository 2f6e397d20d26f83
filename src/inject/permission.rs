//! Whether golow may trace a process, asked of the kernel without tracing it: opening /proc/PID/mem passes the
//! same access check as `ptrace(PTRACE_ATTACH)` (uids, dumpability, CAP_SYS_PTRACE, Yama), so a refusal there is
//! the refusal gdb would meet, and its reason is then worked out from what /proc and sysctl say.

use std::fs::File;
use std::io::{ErrorKind, Read};

use super::Refusal;
use super::process::{Process, Status};

/// CAP_SYS_PTRACE's bit in a capability set.
const CAP_SYS_PTRACE: u64 = 1 << 19;

/// The tracer's side: who golow runs as, and what the machine allows.
struct Tracer {
    /// The file-system uid, which the kernel compares with the target's uids.
    uid: u32,
    may_trace_anyone: bool,
    /// kernel.yama.ptrace_scope; `None` without Yama.
    yama_scope: Option<u8>,
}

impl Tracer {
    fn here() -> Tracer {
        let mut status = String::new();
        let _ = File::open("/proc/self/status")
            .and_then(|f| f.take(64 * 1024).read_to_string(&mut status));
        let capabilities = status
            .lines()
            .find_map(|line| line.strip_prefix("CapEff:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0);
        Tracer {
            uid: Status::parse(std::process::id(), &status).uids[3],
            may_trace_anyone: capabilities & CAP_SYS_PTRACE != 0,
            yama_scope: std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        }
    }
}

/// The target opened for tracing: its memory, readable because the kernel would let golow trace it.
pub(super) struct Access {
    pub memory: File,
}

/// Opens the target's memory, or says why golow may not trace it.
pub(super) fn check(target: &Process, status: &Status) -> Result<Access, Refusal> {
    match target.open_file("mem") {
        Ok(memory) => Ok(Access { memory }),
        Err(e) if matches!(e.kind(), ErrorKind::PermissionDenied) => {
            Err(not_permitted(target, status))
        }
        Err(_) => {
            target.refuse_gone()?;
            Err(not_permitted(target, status))
        }
    }
}

/// The line for a process the kernel does not let golow trace, with the reason and what would change it.
pub(super) fn not_permitted(target: &Process, status: &Status) -> Refusal {
    let tracer = Tracer::here();
    let pid = target.pid;
    let (reason, fix) = if tracer.yama_scope == Some(3) {
        (
            "kernel.yama.ptrace_scope is 3, which forbids tracing any process until the machine restarts".to_string(),
            "golow can only watch it from /proc and NVML".to_string(),
        )
    } else if tracer.may_trace_anyone {
        (
            "the kernel refused even with CAP_SYS_PTRACE: a security module, or a container's seccomp profile"
                .to_string(),
            "allow ptrace to golow (docker run --cap-add SYS_PTRACE, or a seccomp profile that permits it)"
                .to_string(),
        )
    } else if tracer.yama_scope == Some(2) {
        (
            "kernel.yama.ptrace_scope is 2: only with CAP_SYS_PTRACE".to_string(),
            "run golow as root".to_string(),
        )
    } else if let Some(uid) = status.uids[..3].iter().find(|&&uid| uid != tracer.uid) {
        (
            format!("it runs as uid {uid}, golow as uid {}", tracer.uid),
            "run golow as the process's user or with CAP_SYS_PTRACE".to_string(),
        )
    } else if target.proc_owner() == Some(0) && tracer.uid != 0 {
        (
            "it made itself undumpable: prctl PR_SET_DUMPABLE 0, or a change of user".to_string(),
            "run golow with CAP_SYS_PTRACE".to_string(),
        )
    } else if tracer.yama_scope == Some(1) {
        (
            "kernel.yama.ptrace_scope is 1: a process may trace its own descendants only"
                .to_string(),
            "sudo sysctl kernel.yama.ptrace_scope=0, or run golow with CAP_SYS_PTRACE".to_string(),
        )
    } else {
        (
            "the kernel refused: a security module, or a container's seccomp profile".to_string(),
            "allow ptrace to golow (docker run --cap-add SYS_PTRACE)".to_string(),
        )
    };
    Refusal(format!(
        "cannot attach to process {pid}: ptrace is not permitted ({reason}); {fix}"
    ))
}

/// Whether this golow may attach to other processes here, as one line for `golow doctor`: gdb found or not, Yama's
/// ptrace_scope, CAP_SYS_PTRACE, the user golow runs as.
pub fn attach_permission_here() -> String {
    let gdb = super::gdb::find(std::env::var_os("PATH").as_deref()).ok();
    describe(gdb.as_deref(), &Tracer::here())
}

fn describe(gdb: Option<&std::path::Path>, tracer: &Tracer) -> String {
    let verdict = match (gdb, tracer.yama_scope, tracer.may_trace_anyone) {
        (None, _, _) => "cannot load: gdb is missing (apt install gdb)",
        (_, Some(3), _) => "cannot load: kernel.yama.ptrace_scope 3 forbids tracing",
        (_, _, true) => "loads into any process",
        (_, Some(2), false) => "cannot load without CAP_SYS_PTRACE (kernel.yama.ptrace_scope 2)",
        (_, Some(1), false) => {
            "cannot load without CAP_SYS_PTRACE: kernel.yama.ptrace_scope 1 lets a process trace its descendants \
             only (sudo sysctl kernel.yama.ptrace_scope=0)"
        }
        _ => "loads into your own processes",
    };
    let gdb = match gdb {
        Some(path) => format!("gdb {}", path.display()),
        None => "no gdb on PATH".to_string(),
    };
    let user = match tracer.uid {
        0 => "root".to_string(),
        uid => format!("uid {uid}"),
    };
    let capability = match tracer.may_trace_anyone {
        true => "CAP_SYS_PTRACE",
        false => "no CAP_SYS_PTRACE",
    };
    let yama = match tracer.yama_scope {
        Some(scope) => format!("Yama ptrace_scope {scope}"),
        None => "no Yama".to_string(),
    };
    format!("golow attach's step hook: {verdict} ({gdb}; {user}, {capability}; {yama})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_doctors_line_says_whom_golow_may_attach_to_and_why() {
        let gdb = Some(Path::new("/usr/bin/gdb"));
        let tracer = |uid, may_trace_anyone, yama_scope| Tracer {
            uid,
            may_trace_anyone,
            yama_scope,
        };
        assert_eq!(
            describe(gdb, &tracer(0, true, None)),
            "golow attach's step hook: loads into any process (gdb /usr/bin/gdb; root, \
             CAP_SYS_PTRACE; no Yama)"
        );
        assert_eq!(
            describe(gdb, &tracer(1000, false, Some(0))),
            "golow attach's step hook: loads into your own processes (gdb /usr/bin/gdb; uid 1000, \
             no CAP_SYS_PTRACE; Yama ptrace_scope 0)"
        );
        assert!(
            describe(gdb, &tracer(1000, false, Some(1)))
                .contains(": cannot load without CAP_SYS_PTRACE: ")
        );
        assert!(describe(gdb, &tracer(0, true, Some(1))).contains(": loads into any process ("));
        assert!(
            describe(gdb, &tracer(0, true, Some(3)))
                .contains(": cannot load: kernel.yama.ptrace_scope 3")
        );
        assert!(
            describe(None, &tracer(0, true, None))
                .contains(": cannot load: gdb is missing (apt install gdb) (no gdb")
        );
    }
}
