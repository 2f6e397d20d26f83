//! The environment a program is started with, completed: golow's step hook first on PYTHONPATH, this library on
//! LD_PRELOAD (so the program's own children are reached too) and golow's own variables, wherever the command that
//! starts it replaced or dropped them. Nothing here allocates: it runs between `vfork` and `exec` too, where the
//! heap belongs to the parent, so the completed environment is laid out in memory the caller maps itself.

use std::ffi::{CStr, c_char};

const PYTHONPATH: &[u8] = b"PYTHONPATH";
const LD_PRELOAD: &[u8] = b"LD_PRELOAD";
/// Set in a program's environment once it was told it is out of golow's reach, so that its children do not say it
/// again.
pub const TOLD: &[u8] = b"GOLOW_EXEC_TOLD=1";
/// golow's own variables an environment is completed with, at most.
pub const MAX_KEPT: usize = 64;

/// What every program started under golow should have, as golow's own environment said at load time.
pub struct Required<'a> {
    pub hook_dir: &'a [u8],
    pub library: &'a [u8],
    /// `NAME=value` of each of golow's variables (the first `MAX_KEPT`).
    pub kept: &'a [&'a [u8]],
}

impl Required<'_> {
    fn kept(&self) -> impl Iterator<Item = (usize, &[u8])> {
        self.kept.iter().take(MAX_KEPT).copied().enumerate()
    }
}

/// A null-terminated `envp`, read in place.
#[derive(Clone, Copy)]
pub struct Environment {
    envp: *const *const c_char,
    len: usize,
}

impl Environment {
    /// # Safety
    /// `envp` must be null, or a null-terminated array of null-terminated strings that outlives the value.
    pub unsafe fn new(envp: *const *const c_char) -> Environment {
        let mut len = 0;
        // SAFETY: the caller's promise.
        while !envp.is_null() && unsafe { !envp.add(len).read().is_null() } {
            len += 1;
        }
        Environment { envp, len }
    }

    fn pointer(&self, index: usize) -> *const c_char {
        // SAFETY: `index < len`, within the array `new` measured.
        unsafe { self.envp.add(index).read() }
    }

    fn entry(&self, index: usize) -> &[u8] {
        // SAFETY: a non-null entry of the array, null-terminated (`new`'s promise).
        unsafe { CStr::from_ptr(self.pointer(index)) }.to_bytes()
    }

    fn entries(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len).map(|index| self.entry(index))
    }
}

/// `NAME=value` split at its first `=`.
fn split(entry: &[u8]) -> (&[u8], &[u8]) {
    match entry.iter().position(|&b| b == b'=') {
        Some(i) => (&entry[..i], &entry[i + 1..]),
        None => (entry, &[]),
    }
}

fn holds(list: &[u8], item: &[u8], separators: &[u8]) -> bool {
    list.split(|b| separators.contains(b))
        .any(|part| part == item)
}

/// A search-path variable that lacks golow's entry: where the environment has it (to prepend to), if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lacking {
    Unset,
    At(usize),
}

/// What an environment lacks of what golow requires.
#[derive(Debug, PartialEq, Eq)]
pub struct Missing {
    entries: usize,
    pythonpath: Option<Lacking>,
    preload: Option<Lacking>,
    /// Bit `i`: `kept[i]` is missing.
    kept: u64,
    told: bool,
}

impl Missing {
    pub fn of(environment: &Environment, required: &Required) -> Missing {
        let mut missing = Missing {
            entries: environment.len,
            pythonpath: Some(Lacking::Unset),
            preload: Some(Lacking::Unset),
            kept: required.kept().fold(0, |bits, (i, _)| bits | 1 << i),
            told: false,
        };
        for (index, entry) in environment.entries().enumerate() {
            let (name, value) = split(entry);
            if name == PYTHONPATH {
                missing.pythonpath =
                    (!holds(value, required.hook_dir, b":")).then_some(Lacking::At(index));
            } else if name == LD_PRELOAD {
                missing.preload =
                    (!holds(value, required.library, b": ")).then_some(Lacking::At(index));
            } else if entry == TOLD {
                missing.told = true;
            }
            for (i, kept) in required.kept() {
                if split(kept).0 == name {
                    missing.kept &= !(1 << i);
                }
            }
        }
        missing
    }

    pub fn none(&self) -> bool {
        self.pythonpath.is_none() && self.preload.is_none() && self.kept == 0
    }

    pub fn told(&self) -> bool {
        self.told
    }

    /// The completed environment's entries (without its terminating null).
    fn completed_entries(&self, tell: bool) -> usize {
        let added = |gap| usize::from(gap == Some(Lacking::Unset));
        self.entries
            + added(self.pythonpath)
            + added(self.preload)
            + self.kept.count_ones() as usize
            + usize::from(tell)
    }

    /// The entries golow's own goes before. An empty value has none: CPython takes an empty PYTHONPATH for an unset
    /// one, while `hook:` would end in an empty entry, the working directory, ahead of the standard library.
    fn rest(environment: &Environment, gap: Option<Lacking>) -> Option<&[u8]> {
        match gap {
            Some(Lacking::At(index)) => Some(split(environment.entry(index)).1),
            _ => None,
        }
        .filter(|rest| !rest.is_empty())
    }

    /// Bytes the completed environment takes: its pointer array, then the entries it rewrites or adds.
    pub fn size(&self, environment: &Environment, required: &Required, tell: bool) -> usize {
        let list = |gap: Option<Lacking>, name: &[u8], first: &[u8]| match gap {
            None => 0,
            Some(_) => {
                let rest = Self::rest(environment, gap).map_or(0, |rest| rest.len() + 1);
                name.len() + 1 + first.len() + rest + 1
            }
        };
        let kept: usize = required
            .kept()
            .filter(|(i, _)| self.kept & (1 << i) != 0)
            .map(|(_, kept)| kept.len() + 1)
            .sum();
        (self.completed_entries(tell) + 1) * size_of::<*const c_char>()
            + list(self.pythonpath, PYTHONPATH, required.hook_dir)
            + list(self.preload, LD_PRELOAD, required.library)
            + kept
            + if tell { TOLD.len() + 1 } else { 0 }
    }

    /// Lays the completed environment out in `memory` and returns its `envp`: the environment's own entries, in
    /// place or rewritten, then what it lacked.
    ///
    /// # Safety
    /// `memory` must be valid for writes of `self.size(environment, required, tell)` bytes and aligned for pointers.
    pub unsafe fn lay_out(
        &self,
        memory: *mut u8,
        environment: &Environment,
        required: &Required,
        tell: bool,
    ) -> *const *const c_char {
        let pointers = memory.cast::<*const c_char>();
        let mut writer = Writer {
            pointers,
            next: 0,
            // SAFETY: the strings start after the pointer array, within `size`.
            cursor: unsafe {
                memory.add((self.completed_entries(tell) + 1) * size_of::<*const c_char>())
            },
        };
        let list = |writer: &mut Writer, gap: Option<Lacking>, name: &[u8], first: &[u8]| {
            let rest = Self::rest(environment, gap);
            gap.map(|_| {
                let separator: &[u8] = if rest.is_some() { b":" } else { b"" };
                // SAFETY: `size` counted it.
                unsafe { writer.string(&[name, b"=", first, separator, rest.unwrap_or_default()]) }
            })
        };
        let pythonpath = list(&mut writer, self.pythonpath, PYTHONPATH, required.hook_dir);
        let preload = list(&mut writer, self.preload, LD_PRELOAD, required.library);
        // SAFETY (every push and string below): `size` counted each pointer and string.
        for index in 0..environment.len {
            let entry = match (self.pythonpath, self.preload, pythonpath, preload) {
                (Some(Lacking::At(at)), _, Some(rewritten), _) if at == index => rewritten,
                (_, Some(Lacking::At(at)), _, Some(rewritten)) if at == index => rewritten,
                _ => environment.pointer(index),
            };
            unsafe { writer.push(entry) };
        }
        for (gap, added) in [(self.pythonpath, pythonpath), (self.preload, preload)] {
            if let (Some(Lacking::Unset), Some(added)) = (gap, added) {
                unsafe { writer.push(added) };
            }
        }
        for (i, kept) in required.kept() {
            if self.kept & (1 << i) != 0 {
                unsafe {
                    let added = writer.string(&[kept]);
                    writer.push(added);
                }
            }
        }
        if tell {
            unsafe {
                let added = writer.string(&[TOLD]);
                writer.push(added);
            }
        }
        unsafe { writer.push(std::ptr::null()) };
        pointers.cast_const()
    }
}

/// Fills the memory `lay_out` was given: pointers from its start, strings after them.
struct Writer {
    pointers: *mut *const c_char,
    next: usize,
    cursor: *mut u8,
}

impl Writer {
    /// # Safety
    /// Room for one more pointer.
    unsafe fn push(&mut self, pointer: *const c_char) {
        unsafe { self.pointers.add(self.next).write(pointer) };
        self.next += 1;
    }

    /// `parts` joined, null-terminated.
    ///
    /// # Safety
    /// Room for the parts and their terminator.
    unsafe fn string(&mut self, parts: &[&[u8]]) -> *const c_char {
        let start = self.cursor;
        for part in parts {
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), self.cursor, part.len());
                self.cursor = self.cursor.add(part.len());
            }
        }
        unsafe {
            self.cursor.write(0);
            self.cursor = self.cursor.add(1);
        }
        start.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    const WANTED: Required = Required {
        hook_dir: b"/s/pyhook",
        library: b"/g/libgolow_exec.so",
        kept: &[
            b"GOLOW_EVENT_SOCKET=/s/events-0.sock",
            b"GOLOW_OPS_EVERY=50",
        ],
    };

    /// `entries` completed: the entries of the completed environment, or `None` where nothing lacked.
    fn completed(entries: &[&str], tell: bool) -> Option<Vec<String>> {
        let owned: Vec<CString> = entries.iter().map(|e| CString::new(*e).unwrap()).collect();
        let mut envp: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        envp.push(std::ptr::null());
        let environment = unsafe { Environment::new(envp.as_ptr()) };
        let missing = Missing::of(&environment, &WANTED);
        if missing.none() && !tell {
            return None;
        }
        let size = missing.size(&environment, &WANTED, tell);
        let mut memory = vec![0u64; size.div_ceil(8)];
        let base = memory.as_mut_ptr().cast::<u8>();
        let out = unsafe { missing.lay_out(base, &environment, &WANTED, tell) };
        let completed = unsafe { Environment::new(out) };
        let end = unsafe { base.add(size) };
        let mut result = Vec::new();
        for index in 0..completed.len {
            let pointer = completed.pointer(index).cast::<u8>();
            let within = pointer >= base.cast_const() && pointer < end.cast_const();
            let original = envp.contains(&pointer.cast());
            assert!(
                within || original,
                "an entry points outside what was laid out"
            );
            let entry = completed.entry(index);
            if within {
                assert!(unsafe { pointer.add(entry.len()) } < end.cast_const());
            }
            result.push(String::from_utf8(entry.to_vec()).unwrap());
        }
        Some(result)
    }

    #[test]
    fn a_replaced_pythonpath_gets_the_hook_first_and_dropped_variables_come_back() {
        let got = completed(&["HOME=/root", "PYTHONPATH=src:lib", "TERM=xterm"], false).unwrap();
        assert_eq!(
            got,
            [
                "HOME=/root",
                "PYTHONPATH=/s/pyhook:src:lib",
                "TERM=xterm",
                "LD_PRELOAD=/g/libgolow_exec.so",
                "GOLOW_EVENT_SOCKET=/s/events-0.sock",
                "GOLOW_OPS_EVERY=50",
            ]
        );
    }

    #[test]
    fn an_environment_that_has_everything_is_left_as_it_is() {
        let whole = [
            "PYTHONPATH=src:/s/pyhook",
            "LD_PRELOAD=/other.so /g/libgolow_exec.so",
            "GOLOW_OPS_EVERY=0",
            "GOLOW_EVENT_SOCKET=/s/events-0.sock",
        ];
        assert_eq!(completed(&whole, false), None);
    }

    #[test]
    fn an_entry_that_only_begins_like_the_hooks_does_not_count_and_an_empty_environment_is_completed()
     {
        let got = completed(&["PYTHONPATH=/s/pyhook2", "LD_PRELOAD=x.so"], false).unwrap();
        assert_eq!(got[0], "PYTHONPATH=/s/pyhook:/s/pyhook2");
        assert_eq!(got[1], "LD_PRELOAD=/g/libgolow_exec.so:x.so");
        let got = completed(&[], true).unwrap();
        assert_eq!(got.len(), 5);
        assert_eq!(got[0], "PYTHONPATH=/s/pyhook");
        assert_eq!(got[4], "GOLOW_EXEC_TOLD=1");
    }

    #[test]
    fn an_empty_pythonpath_gets_the_hook_alone_and_a_users_own_empty_entries_stay() {
        let got = completed(&["PYTHONPATH=", "LD_PRELOAD="], false).unwrap();
        assert_eq!(got[0], "PYTHONPATH=/s/pyhook", "no empty entry of golow's");
        assert_eq!(got[1], "LD_PRELOAD=/g/libgolow_exec.so");
        let got = completed(&["PYTHONPATH=:src:"], false).unwrap();
        assert_eq!(got[0], "PYTHONPATH=/s/pyhook::src:");
    }

    #[test]
    fn an_entry_without_equals_sign_is_passed_on() {
        let got = completed(&["ODD", "GOLOW_OPS_EVERY"], false).unwrap();
        assert_eq!(got[0], "ODD");
        assert_eq!(
            got[1], "GOLOW_OPS_EVERY",
            "a name alone is the variable, kept as it is"
        );
        assert!(!got.iter().any(|e| e == "GOLOW_OPS_EVERY=50"));
    }
}
