//! golow's exec interposer. golow preloads it (LD_PRELOAD) into a `--cmd` worker's shell, and it stays preloaded in
//! everything started from there: each `execve`, `execv`, `execvp`, `execvpe`, `posix_spawn` and `posix_spawnp`
//! starts its program with golow's step hook first on PYTHONPATH and golow's variables in its environment, however
//! the command set them: a python named by its path with a PYTHONPATH of its own, `env`, `bash -c`, `make`,
//! `subprocess` with an `env=` of its own. A python that no environment reaches (`-I`, `-E`, `-S`) is named once on
//! its stderr. Programs that make their system calls themselves (statically linked ones, Go's) are beyond it. A
//! program whose environment leaves no room for golow's additions starts with its own, as it would without golow,
//! and says once on its stderr that it is not measured.
//!
//! Without golow's variables (a program that kept the library on LD_PRELOAD outside golow) it changes nothing.

mod environment;
mod memory;
mod python;

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use environment::{Environment, Missing, Required};
use golow_exec_variables::{EXEC_KEEP_ENV, HOOK_DIR_ENV};
use memory::ThreadMemory;

type Envp = *const *const c_char;
type Exec = unsafe extern "C" fn(*const c_char, Envp, Envp) -> c_int;
type Spawn = unsafe extern "C" fn(
    *mut libc::pid_t,
    *const c_char,
    *const c_void,
    *const c_void,
    Envp,
    Envp,
) -> c_int;

unsafe extern "C" {
    static environ: Envp;
}

/// The C library's own functions, found once at load time (`dlsym` may allocate, which must not happen after
/// `vfork`).
struct Real {
    execve: Option<Exec>,
    execvpe: Option<Exec>,
    posix_spawn: Option<Spawn>,
    posix_spawnp: Option<Spawn>,
}

impl Real {
    fn find() -> Real {
        Real {
            execve: real(c"execve"),
            execvpe: real(c"execvpe"),
            posix_spawn: real(c"posix_spawn"),
            posix_spawnp: real(c"posix_spawnp"),
        }
    }
}

/// What golow requires of every program's environment, and the memory a completed environment is laid out in.
struct Golow {
    required: Required<'static>,
    memory: ThreadMemory,
}

struct Setup {
    real: Real,
    /// `None` outside golow.
    golow: Option<Golow>,
}

static SETUP: OnceLock<Setup> = OnceLock::new();

/// Runs as the library is loaded, before the program's own code: single-threaded, the heap free to use.
#[used]
#[unsafe(link_section = ".init_array")]
static LOAD: extern "C" fn() = load;

extern "C" fn load() {
    setup();
}

/// What `load` found. Only a start from a constructor that runs before this library's finds it still to make.
fn setup() -> &'static Setup {
    SETUP.get_or_init(|| Setup {
        real: Real::find(),
        // A panic reading what golow requires leaves this process outside golow, and the setup made: no start ever
        // makes it again, which would look functions up and allocate, perhaps in a vfork child.
        golow: std::panic::catch_unwind(required)
            .ok()
            .flatten()
            .map(|required| Golow {
                required,
                memory: ThreadMemory::new(),
            }),
    })
}

fn real<F: Copy>(name: &CStr) -> Option<F> {
    // SAFETY: RTLD_NEXT finds the definition this library hides; F is its C signature.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    (!found.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, F>(&found) })
}

fn leaked(bytes: &[u8]) -> &'static [u8] {
    Box::leak(bytes.to_vec().into_boxed_slice())
}

fn variable(name: &str) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStringExt;
    std::env::var_os(name).map(|value| value.into_vec())
}

/// What golow requires, from the environment golow started the worker with.
fn required() -> Option<Required<'static>> {
    let hook_dir = variable(HOOK_DIR_ENV).filter(|dir| !dir.is_empty())?;
    let library = own_path()?;
    let kept: Vec<&'static [u8]> = variable(EXEC_KEEP_ENV)
        .unwrap_or_default()
        .split(|&b| b == b':')
        .filter(|name| !name.is_empty())
        .filter_map(|name| {
            let name = std::str::from_utf8(name).ok()?;
            let value = variable(name)?;
            Some(leaked(&[name.as_bytes(), b"=", &value].concat()))
        })
        .collect();
    Some(Required {
        hook_dir: leaked(&hook_dir),
        library,
        kept: Box::leak(kept.into_boxed_slice()),
    })
}

/// This library's path, as the loader opened it.
fn own_path() -> Option<&'static [u8]> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: any address within this library; `info` is written by dladdr.
    let found = unsafe { libc::dladdr(load as *const c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a null-terminated string the loader keeps.
    Some(leaked(unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes()))
}

fn set_errno(value: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = value };
}

fn errno() -> c_int {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() }
}

/// The arguments after `argv[0]`, read in place.
///
/// # Safety
/// `argv` is null or a null-terminated array of null-terminated strings.
unsafe fn arguments<'a>(argv: Envp) -> impl Iterator<Item = &'a [u8]> {
    let mut index = 1;
    std::iter::from_fn(move || {
        if argv.is_null() || unsafe { argv.read().is_null() } {
            return None;
        }
        let arg = unsafe { argv.add(index).read() };
        if arg.is_null() {
            return None;
        }
        index += 1;
        Some(unsafe { CStr::from_ptr(arg) }.to_bytes())
    })
}

/// One line on stderr, written with no allocation, at most `buffer`'s length.
fn tell(program: &[u8], why: &str) {
    let mut buffer = [0u8; 512];
    let mut len = 0;
    for part in [
        b"golow: ".as_slice(),
        program,
        b" is not measured: ",
        why.as_bytes(),
    ] {
        let take = part.len().min(buffer.len() - 1 - len);
        buffer[len..len + take].copy_from_slice(&part[..take]);
        len += take;
    }
    buffer[len] = b'\n';
    // SAFETY: `len + 1` initialised bytes.
    unsafe { libc::write(2, buffer.as_ptr().cast(), len + 1) };
}

/// What an exec that failed for want of room for golow's additions returns.
fn exec_found_no_room(result: c_int) -> bool {
    result == -1 && errno() == libc::E2BIG
}

/// What a spawn that failed for want of room for golow's additions returns.
fn spawn_found_no_room(result: c_int) -> bool {
    result == libc::E2BIG
}

const NO_ROOM: &str = "its environment leaves no room for golow's additions (E2BIG)";

/// Starts a program with `envp` completed; `program` and `argv` are what it starts, to tell an unreachable python.
/// Where the completed environment has no memory, or no room (`found_no_room` of what `start` returned), the program
/// is started with the caller's own environment, and says once that it is not measured.
///
/// # Safety
/// `program`, `argv` and `envp` are what the C function being interposed was given.
unsafe fn completed(
    golow: &Golow,
    program: *const c_char,
    argv: Envp,
    envp: Envp,
    mut start: impl FnMut(Envp) -> c_int,
    found_no_room: fn(c_int) -> bool,
) -> c_int {
    if envp.is_null() {
        return start(envp);
    }
    let required = &golow.required;
    // SAFETY: the interposed function's contract.
    let environment = unsafe { Environment::new(envp) };
    let missing = Missing::of(&environment, required);
    let program = if program.is_null() {
        b"".as_slice()
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(program) }.to_bytes()
    };
    let unreachable = (!missing.told())
        .then(|| python::unreachable(program, unsafe { arguments(argv) }))
        .flatten();
    if let Some(why) = unreachable {
        tell(program, why);
    }
    if missing.none() && unreachable.is_none() {
        return start(envp);
    }
    let size = missing.size(&environment, required, unreachable.is_some());
    let lease = match golow.memory.lend(size) {
        Ok(lease) => lease,
        Err(refusal) => {
            tell(program, refusal.why());
            return start(envp);
        }
    };
    // SAFETY: `size` bytes, aligned for pointers, this thread's until the lease ends.
    let result = start(unsafe {
        missing.lay_out(
            lease.memory(),
            &environment,
            required,
            unreachable.is_some(),
        )
    });
    drop(lease);
    if !found_no_room(result) {
        return result;
    }
    tell(program, NO_ROOM);
    start(envp)
}

/// An exec through the C library's own `real`, its environment completed.
///
/// # Safety
/// As the exec function `real` is.
unsafe fn exec(real: Option<Exec>, program: *const c_char, argv: Envp, envp: Envp) -> c_int {
    let Some(real) = real else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: the caller's arguments, the environment alone replaced by a valid one.
    let start = |envp| unsafe { real(program, argv, envp) };
    match &setup().golow {
        // SAFETY: the interposed function's contract.
        Some(golow) => unsafe { completed(golow, program, argv, envp, start, exec_found_no_room) },
        None => start(envp),
    }
}

/// A spawn through the C library's own `real`, its environment completed.
///
/// # Safety
/// As the spawn function `real` is.
unsafe fn spawn(
    real: Option<Spawn>,
    pid: *mut libc::pid_t,
    program: *const c_char,
    file_actions: *const c_void,
    attributes: *const c_void,
    argv: Envp,
    envp: Envp,
) -> c_int {
    let Some(real) = real else {
        return libc::ENOSYS;
    };
    // SAFETY: as in `exec`.
    let start = |envp| unsafe { real(pid, program, file_actions, attributes, argv, envp) };
    match &setup().golow {
        // SAFETY: as in `exec`.
        Some(golow) => unsafe { completed(golow, program, argv, envp, start, spawn_found_no_room) },
        None => start(envp),
    }
}

/// # Safety
/// As `execve(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Envp, envp: Envp) -> c_int {
    unsafe { exec(setup().real.execve, path, argv, envp) }
}

/// # Safety
/// As `execv(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Envp) -> c_int {
    unsafe { execve(path, argv, environ) }
}

/// # Safety
/// As `execvpe(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Envp, envp: Envp) -> c_int {
    unsafe { exec(setup().real.execvpe, file, argv, envp) }
}

/// # Safety
/// As `execvp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Envp) -> c_int {
    unsafe { execvpe(file, argv, environ) }
}

/// # Safety
/// As `posix_spawn(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const c_char,
    file_actions: *const c_void,
    attributes: *const c_void,
    argv: Envp,
    envp: Envp,
) -> c_int {
    let real = setup().real.posix_spawn;
    unsafe { spawn(real, pid, path, file_actions, attributes, argv, envp) }
}

/// # Safety
/// As `posix_spawnp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    file: *const c_char,
    file_actions: *const c_void,
    attributes: *const c_void,
    argv: Envp,
    envp: Envp,
) -> c_int {
    let real = setup().real.posix_spawnp;
    unsafe { spawn(real, pid, file, file_actions, attributes, argv, envp) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// `NAME=` and a value longer than Linux takes in one string (`MAX_ARG_STRLEN`, 32 pages): refused with E2BIG
    /// whatever the limits.
    fn too_long(name: &str) -> CString {
        CString::new(format!("{name}={}", "x".repeat(200_000))).unwrap()
    }

    fn null_terminated(strings: &[&CString]) -> Vec<*const c_char> {
        let mut pointers: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        pointers.push(std::ptr::null());
        pointers
    }

    /// `program` spawned by `completed` through the C library's `posix_spawn`: what it returned, how many times it
    /// started, and the exit status of what ran.
    fn spawned(
        golow: &Golow,
        argv: &[&CString],
        envp: &[&CString],
    ) -> (c_int, usize, Option<c_int>) {
        let real = setup().real.posix_spawn.unwrap();
        let (argv, envp) = (null_terminated(argv), null_terminated(envp));
        let mut pid = 0;
        let mut starts = 0;
        let start = |envp| {
            starts += 1;
            // SAFETY: null-terminated arrays of strings that outlive the call.
            unsafe {
                real(
                    &mut pid,
                    argv[0],
                    std::ptr::null(),
                    std::ptr::null(),
                    argv.as_ptr(),
                    envp,
                )
            }
        };
        // SAFETY: as above.
        let result = unsafe {
            completed(
                golow,
                argv[0],
                argv.as_ptr(),
                envp.as_ptr(),
                start,
                spawn_found_no_room,
            )
        };
        let mut status = 0;
        // SAFETY: our child, when the spawn succeeded.
        let ran = (result == 0 && unsafe { libc::waitpid(pid, &mut status, 0) } == pid)
            .then(|| libc::WEXITSTATUS(status));
        (result, starts, ran)
    }

    #[test]
    fn a_start_refused_for_the_room_golows_additions_take_runs_with_the_callers_own_environment() {
        let golow = |kept: &'static [&'static [u8]]| Golow {
            required: Required {
                hook_dir: b"/s/pyhook",
                library: b"/g/libgolow_exec.so",
                kept,
            },
            memory: ThreadMemory::new(),
        };
        let long = leaked(too_long("GOLOW_LONG").to_bytes());
        let golow_too_long = golow(Box::leak(Box::new([long])));
        let sh = CString::new("/bin/sh").unwrap();
        let dash_c = CString::new("-c").unwrap();
        let check = CString::new(r#"test -z "$GOLOW_LONG" && test "$MARK" = caller"#).unwrap();
        let mark = CString::new("MARK=caller").unwrap();
        assert_eq!(
            spawned(&golow_too_long, &[&sh, &dash_c, &check], &[&mark]),
            (0, 2, Some(0)),
            "refused, then run with the caller's environment"
        );
        let nonexistent = CString::new("/nonexistent/program").unwrap();
        assert_eq!(
            spawned(&golow(&[]), &[&nonexistent], &[&mark]),
            (libc::ENOENT, 1, None),
            "any other failure is the start's own"
        );
    }
}
