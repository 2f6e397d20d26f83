//! Exported symbols of an ELF file and where the process that maps it has them: the dynamic symbol table (what
//! the dynamic linker itself resolves against, so it is there in every build that loads C extensions), read
//! through a cache of the parts read, never the whole file (a libpython is tens of megabytes).

use std::collections::HashMap;
use std::fs::File;

use object::ReadRef;
use object::elf;
use object::read::ReadCache;
use object::read::elf::{FileHeader, ProgramHeader, Sym};

/// The ELF machine golow runs on: a process of another is not one it calls functions in.
#[cfg(target_arch = "x86_64")]
const MACHINE: u16 = elf::EM_X86_64;
#[cfg(target_arch = "aarch64")]
const MACHINE: u16 = elf::EM_AARCH64;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const MACHINE: u16 = elf::EM_NONE;

/// A symbol's kind, as the dynamic table says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Function,
    Data,
}

/// What an ELF file exports, of the names asked for, and how its addresses move when it is mapped.
#[derive(Debug)]
pub(super) struct Exports {
    /// ET_DYN (a library or a position-independent executable) is mapped anywhere; ET_EXEC at its own addresses.
    relocatable: bool,
    /// The lowest loadable segment's address, page-aligned: where the file's first page goes, before relocation.
    first_page: u64,
    symbols: HashMap<Vec<u8>, (u64, Kind)>,
}

/// Why a file's symbols could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Unreadable {
    NotElf,
    /// 32-bit, big-endian or another machine's.
    ForeignMachine,
    Damaged(&'static str),
}

impl Exports {
    /// The exported functions and data of `file` whose names `wanted` accepts: defined, global or weak, under their
    /// default version (`mmap@@GLIBC_2.2.5`, never a hidden older one). An indirect function is left out, since
    /// calling its address runs its resolver.
    pub fn read(file: File, wanted: impl Fn(&[u8]) -> bool) -> Result<Exports, Unreadable> {
        let cache = ReadCache::new(file);
        let data = &cache;
        // e_ident: the magic, then the class (32- or 64-bit) and the byte order.
        let ident = data.read_bytes_at(0, 6).map_err(|()| Unreadable::NotElf)?;
        if ident[..4] != elf::ELFMAG {
            return Err(Unreadable::NotElf);
        }
        if ident[4] != elf::ELFCLASS64 || ident[5] != native_data() {
            return Err(Unreadable::ForeignMachine);
        }
        let header = elf::FileHeader64::<object::Endianness>::parse(data)
            .map_err(|_| Unreadable::Damaged("its header"))?;
        let endian = header
            .endian()
            .map_err(|_| Unreadable::Damaged("its header"))?;
        if header.e_machine(endian) != MACHINE {
            return Err(Unreadable::ForeignMachine);
        }
        let first_load = header
            .program_headers(endian, data)
            .map_err(|_| Unreadable::Damaged("its program headers"))?
            .iter()
            .filter(|segment| segment.p_type(endian) == elf::PT_LOAD)
            .map(|segment| segment.p_vaddr(endian))
            .min()
            .ok_or(Unreadable::Damaged("it has no loadable segment"))?;
        let sections = header
            .sections(endian, data)
            .map_err(|_| Unreadable::Damaged("its section headers"))?;
        let table = sections
            .symbols(endian, data, elf::SHT_DYNSYM)
            .map_err(|_| Unreadable::Damaged("its dynamic symbol table"))?;
        let versions = sections
            .versions(endian, data)
            .map_err(|_| Unreadable::Damaged("its symbol versions"))?;
        let mut symbols = HashMap::new();
        for (index, symbol) in table.enumerate() {
            let kind = match symbol.st_type() {
                elf::STT_FUNC => Kind::Function,
                elf::STT_OBJECT => Kind::Data,
                _ => continue,
            };
            let exported = matches!(symbol.st_bind(), elf::STB_GLOBAL | elf::STB_WEAK);
            let hidden = versions
                .as_ref()
                .is_some_and(|v| v.version_index(endian, index).is_hidden());
            // An absolute symbol (a version's name) is a number, not something in the process's memory.
            let absolute = symbol.st_shndx(endian) == elf::SHN_ABS;
            if symbol.is_undefined(endian) || absolute || !exported || hidden {
                continue;
            }
            let Ok(name) = symbol.name(endian, table.strings()) else {
                continue;
            };
            if wanted(name) {
                symbols.insert(name.to_vec(), (symbol.st_value(endian), kind));
            }
        }
        Ok(Exports {
            relocatable: header.e_type(endian) == elf::ET_DYN,
            first_page: first_load & !(page_size() - 1),
            symbols,
        })
    }

    /// Whether the file exports `name` as `kind`.
    pub fn has(&self, name: &str, kind: Kind) -> bool {
        self.symbols
            .get(name.as_bytes())
            .is_some_and(|&(_, k)| k == kind)
    }

    /// Where `name` lies in a process that maps this file's first page at `first_page_at`.
    pub fn address(&self, name: &str, kind: Kind, first_page_at: u64) -> Option<u64> {
        let &(value, k) = self.symbols.get(name.as_bytes())?;
        if k != kind {
            return None;
        }
        if !self.relocatable {
            return Some(value);
        }
        first_page_at
            .checked_sub(self.first_page)?
            .checked_add(value)
    }

    #[cfg(test)]
    pub fn names(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.symbols
            .iter()
            .map(|(name, &(value, _))| (name.as_slice(), value))
    }
}

fn native_data() -> u8 {
    if cfg!(target_endian = "little") {
        elf::ELFDATA2LSB
    } else {
        elf::ELFDATA2MSB
    }
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::process::Command;

    /// What `nm -D --defined-only` lists as exported functions and data: each name, its value, and whether it is
    /// under its default version (`name@@V`, or no version), rather than a hidden older one or one the file
    /// defines for a library it needs (`name@V`: a copy-relocated `stderr@GLIBC_2.2.5`).
    fn nm_exports(path: &Path) -> Vec<(Vec<u8>, u64, bool)> {
        let out = Command::new("nm")
            .args(["-D", "--defined-only", "--format=sysv"])
            .arg(path)
            .output()
            .expect("nm runs (binutils)");
        assert!(out.status.success(), "nm failed on {}", path.display());
        out.stdout
            .split(|&b| b == b'\n')
            .filter_map(|line| {
                let fields: Vec<&[u8]> =
                    line.split(|&b| b == b'|').map(<[u8]>::trim_ascii).collect();
                let [name, value, class, kind, ..] = fields[..] else {
                    return None;
                };
                // Global or weak functions and data: not absolute version names, indirect functions, unique
                // globals or untyped markers (`_end`).
                if !matches!(kind, b"FUNC" | b"OBJECT")
                    || !matches!(class, b"T" | b"D" | b"B" | b"R" | b"W" | b"V")
                {
                    return None;
                }
                let (name, default) = match name.iter().position(|&b| b == b'@') {
                    Some(at) => (&name[..at], name.get(at + 1) == Some(&b'@')),
                    None => (name, true),
                };
                let value = u64::from_str_radix(std::str::from_utf8(value).ok()?, 16).ok()?;
                Some((name.to_vec(), value, default))
            })
            .collect()
    }

    fn nm_value(path: &Path, name: &str) -> u64 {
        nm_exports(path)
            .into_iter()
            .find(|(n, _, _)| n == name.as_bytes())
            .map(|(_, value, _)| value)
            .expect("nm lists it")
    }

    fn venv_libpython() -> std::path::PathBuf {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
        let real = std::fs::canonicalize(&python).expect("the venv's python");
        let lib = real.parent().unwrap().parent().unwrap().join("lib");
        std::fs::read_dir(&lib)
            .expect("the python's lib directory")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with("libpython3") && name.contains(".so")
            })
            .expect("the venv's python links a libpython3")
    }

    #[test]
    fn exports_are_what_nm_lists_for_real_binaries() {
        let mut files = vec![venv_libpython()];
        files.extend(
            ["/usr/bin/python3.11", "/lib/x86_64-linux-gnu/libc.so.6"]
                .iter()
                .map(std::path::PathBuf::from)
                .filter(|p| p.is_file()),
        );
        for path in files {
            let exports = Exports::read(File::open(&path).unwrap(), |_| true)
                .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
            let ours: BTreeMap<Vec<u8>, u64> = exports
                .names()
                .map(|(name, value)| (name.to_vec(), value))
                .collect();
            let nm = nm_exports(&path);
            let shown =
                |name: &[u8], value: u64| format!("{} {value:#x}", String::from_utf8_lossy(name));
            // Each default-version export, at nm's value: a hidden older version never stands in for it.
            let defaults: Vec<_> = nm.iter().filter(|(_, _, default)| *default).collect();
            assert!(
                defaults.len() > 100,
                "{}: nm lists {}",
                path.display(),
                defaults.len()
            );
            let missed: Vec<String> = defaults
                .iter()
                .filter(|(name, value, _)| ours.get(name) != Some(value))
                .map(|(name, value, _)| shown(name, *value))
                .take(10)
                .collect();
            assert_eq!(
                missed,
                Vec::<String>::new(),
                "{}: nm's, not ours",
                path.display()
            );
            // And nothing nm does not list under that name and value.
            let extra: Vec<String> = ours
                .iter()
                .filter(|(name, value)| !nm.iter().any(|(n, v, _)| n == *name && v == *value))
                .map(|(name, value)| shown(name, *value))
                .take(10)
                .collect();
            assert_eq!(
                extra,
                Vec::<String>::new(),
                "{}: ours, not nm's",
                path.display()
            );
        }
    }

    #[test]
    fn addresses_move_with_the_mapping_of_a_library_and_not_of_a_fixed_executable() {
        let library = Exports::read(File::open(venv_libpython()).unwrap(), |n| {
            n == b"Py_AddPendingCall"
        })
        .unwrap();
        let value = nm_value(&venv_libpython(), "Py_AddPendingCall");
        assert_eq!(
            library.address("Py_AddPendingCall", Kind::Function, 0x7f00_0000_0000),
            Some(0x7f00_0000_0000 - library.first_page + value)
        );
        assert_eq!(
            library.address("Py_AddPendingCall", Kind::Data, 0x7f00_0000_0000),
            None
        );
        let fixed = Path::new("/usr/bin/python3.11");
        if fixed.is_file() {
            let exe =
                Exports::read(File::open(fixed).unwrap(), |n| n == b"Py_AddPendingCall").unwrap();
            assert!(
                !exe.relocatable,
                "Debian's python is not position-independent"
            );
            let value = nm_value(fixed, "Py_AddPendingCall");
            assert_eq!(
                exe.address("Py_AddPendingCall", Kind::Function, 0x400000),
                Some(value)
            );
        }
    }

    #[test]
    fn a_file_that_is_no_elf_is_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("script.py");
        std::fs::write(&text, "print('hello')\n").unwrap();
        assert_eq!(
            Exports::read(File::open(&text).unwrap(), |_| true).unwrap_err(),
            Unreadable::NotElf
        );
        let short = dir.path().join("short");
        std::fs::write(&short, b"\x7fELF").unwrap();
        assert_eq!(
            Exports::read(File::open(&short).unwrap(), |_| true).unwrap_err(),
            Unreadable::NotElf
        );
    }
}
