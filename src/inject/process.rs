//! The target as /proc shows it, read through a descriptor of its /proc directory: once the process is gone, that
//! descriptor reads nothing, so a pid taken again by another process is never mistaken for it.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{Mode, OFlags};

use super::{Refusal, one_line};

/// An open /proc/PID directory.
pub(super) struct Process {
    pub pid: u32,
    dir: std::os::fd::OwnedFd,
}

impl Process {
    pub fn open(pid: u32) -> Result<Process, Refusal> {
        let path = format!("/proc/{pid}");
        rustix::fs::open(
            path.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map(|dir| Process { pid, dir })
        .map_err(|_| gone(pid))
    }

    /// A file of the process's /proc directory, or one in its root (`root/usr/lib/...`), opened without blocking
    /// (a FIFO put in a library's place must not hang golow) and refused unless it is a regular file.
    pub fn open_file(&self, name: &str) -> io::Result<File> {
        self.open_file_bytes(name.as_bytes())
    }

    pub fn open_file_bytes(&self, name: &[u8]) -> io::Result<File> {
        let fd = rustix::fs::openat(
            &self.dir,
            OsStr::from_bytes(name),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        )?;
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(file)
    }

    /// Whether the process this descriptor names still runs (or is a zombie).
    pub fn refuse_gone(&self) -> Result<(), Refusal> {
        self.open_file("stat").map(drop).map_err(|_| gone(self.pid))
    }

    /// The uid /proc shows as the owner of the files in the process's directory (not of the directory itself):
    /// root's when the process is not dumpable.
    pub fn proc_owner(&self) -> Option<u32> {
        let stat = self.open_file("stat").ok()?;
        rustix::fs::fstat(&stat).ok().map(|stat| stat.st_uid)
    }

    /// The path of the process's executable, as its maps name it (without the " (deleted)" of one replaced).
    pub fn exe_path(&self) -> Option<Vec<u8>> {
        let path = rustix::fs::readlinkat(&self.dir, "exe", Vec::new())
            .ok()?
            .into_bytes();
        Some(match path.strip_suffix(b" (deleted)") {
            Some(path) => path.to_vec(),
            None => path,
        })
    }

    /// The program's name: its executable's file name, else the name the kernel keeps for it.
    pub fn program(&self) -> String {
        let name = self.exe_path().and_then(|path| {
            let name = path.rsplit(|&b| b == b'/').next()?;
            Some(String::from_utf8_lossy(name).into_owned())
        });
        let name = name.unwrap_or_else(|| {
            let mut comm = String::new();
            let _ = self
                .open_file("comm")
                .and_then(|f| f.take(64).read_to_string(&mut comm));
            comm.trim_end().to_string()
        });
        one_line(&name, 64)
    }

    pub fn status(&self) -> Result<Status, Refusal> {
        let mut text = String::new();
        self.open_file("status")
            .and_then(|f| f.take(64 * 1024).read_to_string(&mut text))
            .map_err(|_| gone(self.pid))?;
        Ok(Status::parse(self.pid, &text))
    }

    /// Whether the variable `name` is set, not empty, in the environment the process started with.
    pub fn environment_sets(&self, name: &str) -> io::Result<bool> {
        let prefix = format!("{name}=");
        // Each string is at most 128 KiB (MAX_ARG_STRLEN), so reading one at a time stays bounded.
        for entry in BufReader::new(self.open_file("environ")?).split(0) {
            let entry = entry?;
            if let Some(value) = entry.strip_prefix(prefix.as_bytes()) {
                return Ok(!value.is_empty());
            }
        }
        Ok(false)
    }
}

fn gone(pid: u32) -> Refusal {
    Refusal(format!("process {pid} is gone"))
}

/// What /proc/PID/status says of a process.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Status {
    pub pid: u32,
    /// The state's letter: R, S, D, T (stopped), t (stopped by its tracer), Z (zombie), X (dead).
    pub state: char,
    pub thread_group: u32,
    pub tracer: u32,
    /// Real, effective, saved and file-system uids.
    pub uids: [u32; 4],
    /// The pid in each pid namespace, the process's own last.
    pub namespace_pids: Vec<u32>,
}

impl Status {
    pub fn parse(pid: u32, text: &str) -> Status {
        let mut status = Status {
            pid,
            ..Status::default()
        };
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let numbers = || value.split_whitespace().filter_map(|n| n.parse().ok());
            match key {
                "State" => status.state = value.trim().chars().next().unwrap_or('?'),
                "Tgid" => status.thread_group = numbers().next().unwrap_or(0),
                "TracerPid" => status.tracer = numbers().next().unwrap_or(0),
                "Uid" => numbers()
                    .take(4)
                    .enumerate()
                    .for_each(|(i, uid)| status.uids[i] = uid),
                "NSpid" => status.namespace_pids = numbers().collect(),
                _ => {}
            }
        }
        status
    }

    /// The pid the process itself sees (`os.getpid()`), inside its own pid namespace.
    pub fn pid_inside(&self) -> u32 {
        self.namespace_pids.last().copied().unwrap_or(self.pid)
    }

    pub fn refuse_exited(&self) -> Result<(), Refusal> {
        let pid = self.pid;
        if self.thread_group != 0 && self.thread_group != pid {
            return Err(Refusal(format!(
                "{pid} is a thread of process {}, not a process; name the process",
                self.thread_group
            )));
        }
        match self.state {
            'Z' | 'X' => Err(Refusal(format!("process {pid} has exited (zombie)"))),
            _ => Ok(()),
        }
    }

    pub fn refuse_stopped(&self) -> Result<(), Refusal> {
        match self.state {
            'T' => Err(Refusal(format!(
                "process {} is stopped (SIGSTOP/Ctrl-Z); resume it and retry",
                self.pid
            ))),
            _ => Ok(()),
        }
    }

    pub fn refuse_traced(&self) -> Result<(), Refusal> {
        match self.tracer {
            0 => Ok(()),
            tracer => Err(traced_by(self.pid, tracer)),
        }
    }
}

/// The line for a process another tracer holds.
pub(super) fn traced_by(pid: u32, tracer: u32) -> Refusal {
    let name = Process::open(tracer)
        .map(|p| format!(" ({})", p.program()))
        .unwrap_or_default();
    Refusal(format!(
        "process {pid} is being traced by process {tracer}{name} (a debugger, py-spy, strace?); detach it first"
    ))
}

/// CPython 3.14 and later honour this variable (PEP 768): a process that sets it wants no debugger to run code in
/// it. golow honours it for every version.
const REMOTE_DEBUG_OFF: &str = "PYTHON_DISABLE_REMOTE_DEBUG";

pub(super) fn refuse_remote_debug_disabled(target: &Process) -> Result<(), Refusal> {
    match target.environment_sets(REMOTE_DEBUG_OFF) {
        Ok(false) => Ok(()),
        Ok(true) => Err(Refusal(format!(
            "process {} started with {REMOTE_DEBUG_OFF} set, which forbids running code in it; golow leaves it alone",
            target.pid
        ))),
        Err(e) => Err(Refusal(format!(
            "cannot read the environment of process {}: {e}",
            target.pid
        ))),
    }
}

/// Where `pid`'s main thread waits, for a line such as "blocked in select": the system call's name from
/// /proc/PID/syscall (the common ones), else the kernel function /proc/PID/wchan names; `None` while it runs.
pub fn main_thread_waits_in(pid: u32) -> Option<String> {
    let target = Process::open(pid).ok()?;
    let read = |name: &str| {
        let mut text = String::new();
        target
            .open_file(name)
            .and_then(|f| f.take(512).read_to_string(&mut text))
            .ok()?;
        Some(text)
    };
    let syscall = read("syscall");
    let first = syscall.as_deref().and_then(|s| s.split_whitespace().next());
    if first == Some("running") {
        return None;
    }
    if let Some(name) = first.and_then(|n| n.parse().ok()).and_then(syscall_name) {
        return Some(name.to_string());
    }
    let wchan = read("wchan")?;
    let wchan: String = wchan
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
        .take(64)
        .collect();
    match wchan.as_str() {
        "" | "0" => first
            .filter(|n| *n != "-1")
            .map(|n| format!("system call {}", one_line(n, 8))),
        _ => Some(wchan),
    }
}

/// The blocking system calls a Python program's main thread is commonly found in.
#[cfg(target_arch = "x86_64")]
fn syscall_name(number: i64) -> Option<&'static str> {
    Some(match number {
        0 => "read",
        1 => "write",
        7 => "poll",
        17 => "pread64",
        19 => "readv",
        23 => "select",
        34 => "pause",
        35 => "nanosleep",
        42 => "connect",
        43 => "accept",
        44 => "sendto",
        45 => "recvfrom",
        46 => "sendmsg",
        47 => "recvmsg",
        61 => "wait4",
        65 => "semop",
        72 => "fcntl",
        73 => "flock",
        128 => "rt_sigtimedwait",
        130 => "rt_sigsuspend",
        202 => "futex",
        220 => "semtimedop",
        230 => "clock_nanosleep",
        232 => "epoll_wait",
        247 => "waitid",
        270 => "pselect6",
        271 => "ppoll",
        281 => "epoll_pwait",
        288 => "accept4",
        299 => "recvmmsg",
        441 => "epoll_pwait2",
        _ => return None,
    })
}

#[cfg(target_arch = "aarch64")]
fn syscall_name(number: i64) -> Option<&'static str> {
    Some(match number {
        22 => "epoll_pwait",
        25 => "fcntl",
        32 => "flock",
        63 => "read",
        64 => "write",
        65 => "readv",
        67 => "pread64",
        72 => "pselect6",
        73 => "ppoll",
        95 => "waitid",
        98 => "futex",
        101 => "nanosleep",
        115 => "clock_nanosleep",
        133 => "rt_sigsuspend",
        137 => "rt_sigtimedwait",
        193 => "semtimedop",
        202 => "accept",
        203 => "connect",
        206 => "sendto",
        207 => "recvfrom",
        211 => "sendmsg",
        212 => "recvmsg",
        242 => "accept4",
        243 => "recvmmsg",
        260 => "wait4",
        441 => "epoll_pwait2",
        _ => return None,
    })
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn syscall_name(_number: i64) -> Option<&'static str> {
    None
}

/// A file the process maps, as /proc/PID/maps names it, and where its first page (file offset 0) lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mapped {
    /// The path in the process's root, as bytes (a path need not be UTF-8).
    pub path: Vec<u8>,
    pub start: u64,
    /// Replaced or removed on disk since it was mapped: the file at its path is another.
    pub deleted: bool,
}

impl Process {
    /// Each file the process maps from its first page, in the order of its address space.
    pub fn mapped_files(&self) -> io::Result<Vec<Mapped>> {
        let mut files: Vec<Mapped> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for line in BufReader::new(self.open_file("maps")?).split(b'\n') {
            if let Some(mapped) = parse_maps_line(&line?)
                && seen.insert(mapped.path.clone())
            {
                files.push(mapped);
            }
        }
        Ok(files)
    }
}

/// `START-END PERMS OFFSET DEV INODE PATH`: the mapping of a file's first page, or `None`.
fn parse_maps_line(line: &[u8]) -> Option<Mapped> {
    let mut rest = line;
    let mut fields = [&b""[..]; 5];
    for field in &mut fields {
        rest = rest.trim_ascii_start();
        let end = rest.iter().position(u8::is_ascii_whitespace)?;
        *field = &rest[..end];
        rest = &rest[end..];
    }
    let path = rest.trim_ascii();
    if !path.starts_with(b"/")
        || u64::from_str_radix(std::str::from_utf8(fields[2]).ok()?, 16).ok()? != 0
    {
        return None;
    }
    let start = std::str::from_utf8(fields[0]).ok()?.split('-').next()?;
    let (path, deleted) = match path.strip_suffix(b" (deleted)") {
        Some(path) => (path, true),
        None => (path, false),
    };
    Some(Mapped {
        path: path.to_vec(),
        start: u64::from_str_radix(start, 16).ok()?,
        deleted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_gives_state_tracer_uids_and_the_pid_inside() {
        let text = "Name:\tpython3\nState:\tS (sleeping)\nTgid:\t42\nNgid:\t0\nPid:\t42\nTracerPid:\t7\n\
                    Uid:\t1000\t1001\t1002\t1003\nNSpid:\t42\t5\n";
        let status = Status::parse(42, text);
        assert_eq!(status.state, 'S');
        assert_eq!(status.tracer, 7);
        assert_eq!(status.uids, [1000, 1001, 1002, 1003]);
        assert_eq!(status.pid_inside(), 5);
        assert_eq!(Status::parse(42, "State:\tR (running)\n").pid_inside(), 42);
    }

    #[test]
    fn maps_lines_give_first_pages_of_files_only() {
        let line = b"7f2116e85000-7f2116eab000 r--p 00000000 fe:00 326279      /usr/lib/libc.so.6";
        assert_eq!(
            parse_maps_line(line),
            Some(Mapped {
                path: b"/usr/lib/libc.so.6".to_vec(),
                start: 0x7f2116e85000,
                deleted: false
            })
        );
        let later = b"7f2116eab000-7f2116ffe000 r-xp 00026000 fe:00 326279  /usr/lib/libc.so.6";
        assert_eq!(parse_maps_line(later), None);
        assert_eq!(
            parse_maps_line(b"7ffd1000-7ffd2000 rw-p 00000000 00:00 0   [stack]"),
            None
        );
        assert_eq!(
            parse_maps_line(b"7ffd1000-7ffd2000 rw-p 00000000 00:00 0"),
            None
        );
        let gone =
            parse_maps_line(b"400000-401000 r--p 00000000 fe:00 9 /opt/a b/python3 (deleted)")
                .unwrap();
        assert_eq!(
            (gone.path.as_slice(), gone.deleted),
            (&b"/opt/a b/python3"[..], true)
        );
        assert_eq!(parse_maps_line(b"zz-yy r--p 00000000 fe:00 9 /x"), None);
    }
}
