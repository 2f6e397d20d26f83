//! Memory for completed environments: one region per thread, mapped when the thread first needs it (or more than it
//! has), reused by its later starts and unmapped when the thread ends. Memory mapped for one start could not always
//! be given back: an exec from a vfork child (CPython's `subprocess`) runs in its parent's memory and, once it
//! succeeds, never returns, so each such start would leave its memory in the parent. A vfork child shares its parent
//! thread's thread-specific data, so the region it used is the one that thread's next start finds: nothing grows.
//!
//! Nothing here allocates or takes a lock, since it runs between `vfork` and `exec` too, where the heap is the
//! parent's and its lock may be held by one of the parent's threads.

use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, Ordering};

/// Linux refuses arguments and an environment that take more than three quarters of 8 MiB, whatever the stack's
/// limit (`fs/exec.c`), and a completed environment's memory holds no more than the kernel counts of it: a larger
/// one could never start.
pub const MAX_COMPLETED: usize = 6 << 20;

/// glibc keeps the values of the first 32 keys in the thread's own descriptor; the first value a thread sets for a
/// later key allocates a block for them (`PTHREAD_KEY_2NDLEVEL_SIZE`), which a vfork child must not.
const KEYS_WITHOUT_ALLOCATION: libc::pthread_key_t = 32;

/// At the start of each region, before the memory it lends.
#[repr(C)]
struct Header {
    /// The region's bytes, the header's included.
    size: usize,
    /// The process whose start holds the region, 0 when none. A vfork child whose exec succeeded leaves its own pid,
    /// not its parent's, so the region is free again when the parent's thread runs.
    holder: AtomicI32,
}

/// Why a start gets no memory for golow's additions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    TooLarge,
    /// The thread's region is held by a start that a signal handler's start interrupted.
    Busy,
    NoMemory,
    NoKey,
}

impl Refusal {
    pub fn why(self) -> &'static str {
        match self {
            Refusal::TooLarge => "its environment is too large for golow's additions",
            Refusal::Busy => {
                "it was started by a signal handler while this thread was starting another program"
            }
            Refusal::NoMemory => "no memory was left for golow's additions",
            Refusal::NoKey => "no thread-specific key was left for golow's memory",
        }
    }
}

/// The calling thread's region, lent to one start at a time.
pub struct ThreadMemory {
    key: Option<libc::pthread_key_t>,
    page: usize,
}

impl ThreadMemory {
    /// Made at load time, when the heap is free to use.
    pub fn new() -> ThreadMemory {
        let mut key = 0;
        // SAFETY: `unmap` is given only regions `lend` mapped.
        let created = unsafe { libc::pthread_key_create(&mut key, Some(unmap)) } == 0;
        let usable = created && key < KEYS_WITHOUT_ALLOCATION;
        if created && !usable {
            // SAFETY: the key just created, no value set.
            unsafe { libc::pthread_key_delete(key) };
        }
        // SAFETY: no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        ThreadMemory {
            key: usable.then_some(key),
            page: usize::try_from(page)
                .ok()
                .filter(|&page| page > 0)
                .unwrap_or(4096),
        }
    }

    /// `size` bytes, aligned for pointers, held by the calling thread's start until the lease ends.
    pub fn lend(&self, size: usize) -> Result<Lease, Refusal> {
        let key = self.key.ok_or(Refusal::NoKey)?;
        if size > MAX_COMPLETED {
            return Err(Refusal::TooLarge);
        }
        // A signal handler's start then finds the region either free or held, never half taken or replaced under it.
        let _blocked = Blocked::all();
        // SAFETY: no preconditions.
        let pid = unsafe { libc::getpid() };
        // SAFETY: the key's values are regions `lend` mapped and set, or null.
        let held = unsafe { libc::pthread_getspecific(key) }.cast::<Header>();
        if !held.is_null() {
            // SAFETY: a region mapped for this thread, unmapped only by its replacement below or its end.
            let header = unsafe { &*held };
            if header.holder.load(Ordering::Relaxed) == pid {
                return Err(Refusal::Busy);
            }
            if header.size - size_of::<Header>() >= size {
                header.holder.store(pid, Ordering::Relaxed);
                return Ok(Lease { region: held });
            }
        }
        let region = self.map(size, pid)?;
        // SAFETY: the key exists; with an index below `KEYS_WITHOUT_ALLOCATION`, setting it allocates nothing.
        if unsafe { libc::pthread_setspecific(key, region.cast()) } != 0 {
            unmap(region.cast());
            return Err(Refusal::NoMemory);
        }
        if !held.is_null() {
            unmap(held.cast());
        }
        Ok(Lease { region })
    }

    /// A region for `size` bytes, held by `holder`.
    fn map(&self, size: usize, holder: libc::pid_t) -> Result<*mut Header, Refusal> {
        let bytes = (size_of::<Header>() + size).next_multiple_of(self.page);
        // SAFETY: an anonymous private mapping.
        let region = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if region == libc::MAP_FAILED {
            return Err(Refusal::NoMemory);
        }
        let region = region.cast::<Header>();
        // SAFETY: `bytes` writable, page-aligned bytes.
        unsafe {
            region.write(Header {
                size: bytes,
                holder: AtomicI32::new(holder),
            })
        };
        Ok(region)
    }
}

/// The thread's region, held until dropped. A vfork child whose exec succeeded never drops it; the region's holder
/// then names that child, not the parent, which takes the region again.
pub struct Lease {
    region: *mut Header,
}

impl Lease {
    pub fn memory(&self) -> *mut u8 {
        // SAFETY: the lent bytes follow the header, within the region.
        unsafe { self.region.cast::<u8>().add(size_of::<Header>()) }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // SAFETY: the region stays mapped while it is held.
        unsafe { &*self.region }.holder.store(0, Ordering::Relaxed);
    }
}

/// The thread's key's destructor as the thread ends, and what a replaced region goes through.
extern "C" fn unmap(region: *mut c_void) {
    // SAFETY: a region `map` made, whose header says its size.
    unsafe {
        let size = (*region.cast::<Header>()).size;
        libc::munmap(region, size);
    }
}

/// Every signal blocked in the calling thread, until dropped.
struct Blocked(libc::sigset_t);

impl Blocked {
    fn all() -> Blocked {
        // SAFETY: sigset_t is plain data, filled by sigfillset and pthread_sigmask.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
            Blocked(before)
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: the mask the thread had before.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    /// One for the tests, as the library makes one: each key taken is one fewer below `KEYS_WITHOUT_ALLOCATION`.
    fn memory() -> &'static ThreadMemory {
        static MEMORY: OnceLock<ThreadMemory> = OnceLock::new();
        MEMORY.get_or_init(ThreadMemory::new)
    }

    /// Whether the page at `address` is mapped in this process.
    fn mapped(address: usize) -> bool {
        let page = address & !(memory().page - 1);
        let mut resident = 0u8;
        // SAFETY: mincore only reads the page table; ENOMEM says the page is not mapped.
        unsafe { libc::mincore(page as *mut c_void, 1, &mut resident) == 0 }
    }

    /// Whether `check` holds in a child process, where the calling thread is the only one: no other thread's new
    /// mapping (a test's stack) can take the place of a region it finds unmapped.
    fn holds_alone(check: fn() -> bool) -> bool {
        // SAFETY: the child runs `check` and ends without returning into the harness.
        match unsafe { libc::fork() } {
            0 => {
                let held = std::panic::catch_unwind(check).unwrap_or(false);
                // SAFETY: the child's end.
                unsafe { libc::_exit(if held { 0 } else { 1 }) }
            }
            child => {
                let mut status = 0;
                // SAFETY: our child.
                let waited = unsafe { libc::waitpid(child, &mut status, 0) } == child;
                waited && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
            }
        }
    }

    fn lent(size: usize) -> usize {
        memory().lend(size).unwrap().memory() as usize
    }

    #[test]
    fn a_threads_starts_reuse_its_region_until_one_needs_more() {
        let first = lent(100);
        for size in [1, 100, 50] {
            assert_eq!(lent(size), first, "{size} bytes");
        }
        let larger = lent(MAX_COMPLETED);
        assert_ne!(larger, first);
        assert_eq!(lent(100), larger);
    }

    #[test]
    fn a_replaced_region_and_the_region_of_a_thread_that_ended_are_unmapped() {
        assert!(holds_alone(|| {
            let replaced = lent(100);
            lent(MAX_COMPLETED) != replaced && !mapped(replaced)
        }));
        assert!(holds_alone(|| {
            let region = std::thread::spawn(|| lent(100)).join().unwrap();
            !mapped(region)
        }));
    }

    #[test]
    fn a_start_inside_a_start_of_the_same_thread_is_refused_and_one_after_it_is_not() {
        let held = memory().lend(100).unwrap();
        assert_eq!(memory().lend(100).err(), Some(Refusal::Busy));
        drop(held);
        assert!(memory().lend(100).is_ok());
        assert_eq!(
            memory().lend(MAX_COMPLETED + 1).err(),
            Some(Refusal::TooLarge)
        );
    }

    /// What a vfork child does before its exec: it takes its parent thread's region, which its exec never gives back.
    extern "C" fn take_the_region_and_exec(taken: *mut c_void) -> libc::c_int {
        let Ok(lease) = memory().lend(100) else {
            // SAFETY: end the child without unwinding through the parent's frames.
            unsafe { libc::_exit(126) }
        };
        // SAFETY: the parent waits (CLONE_VFORK), so `taken` is its live local.
        unsafe { taken.cast::<usize>().write(lease.memory() as usize) };
        std::mem::forget(lease);
        let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        // SAFETY: null-terminated arrays of strings; the raw system call, not this crate's own `execve`.
        unsafe { libc::syscall(libc::SYS_execve, argv[0], argv.as_ptr(), envp.as_ptr()) };
        // SAFETY: the exec failed; end the child without running anything of the parent's.
        unsafe { libc::_exit(127) }
    }

    #[test]
    fn the_region_a_vfork_childs_successful_exec_left_held_is_the_parents_threads_next_one() {
        let before = lent(100);
        let mut taken = 0usize;
        let mut stack = vec![0u128; 4096];
        // SAFETY: the child runs `take_the_region_and_exec` on `stack`, in this process's memory and this thread's
        // thread pointer (no CLONE_SETTLS), as a vfork child does; this thread waits until its exec.
        let child = unsafe {
            libc::clone(
                take_the_region_and_exec,
                stack.as_mut_ptr().add(stack.len()).cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw mut taken).cast(),
            )
        };
        assert!(child > 0);
        let mut status = 0;
        // SAFETY: our child.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(taken, before, "the child took this thread's region");
        assert_eq!(lent(100), before);
    }
}
