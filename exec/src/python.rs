//! Whether a program started is a Python that golow's step hook cannot reach, and why: the hook is loaded by a
//! `sitecustomize` on PYTHONPATH, which `-I` and `-E` ignore and `-S` never imports.

/// Why a python started with these arguments is out of the hook's reach, if it is.
pub fn unreachable(
    program: &[u8],
    args: impl Iterator<Item = impl AsRef<[u8]>>,
) -> Option<&'static str> {
    let name = program.rsplit(|&b| b == b'/').next().unwrap_or(program);
    if !name.starts_with(b"python") {
        return None;
    }
    let mut takes_value = false;
    for arg in args {
        let arg = arg.as_ref();
        if takes_value {
            takes_value = false;
            continue;
        }
        if arg == b"--" || arg == b"-" || !arg.starts_with(b"-") || arg.starts_with(b"--") {
            // The script (or stdin) begins: what follows is its own.
            if arg.starts_with(b"--") && arg != b"--" {
                continue; // --version, --help, --check-hash-based-pycs (whose value is taken as the script: harmless)
            }
            return None;
        }
        for (i, &flag) in arg.iter().enumerate().skip(1) {
            match flag {
                b'I' => {
                    return Some(
                        "-I (isolated mode) ignores PYTHONPATH, where golow's step hook is",
                    );
                }
                b'E' => return Some("-E ignores PYTHONPATH, where golow's step hook is"),
                b'S' => return Some("-S imports no sitecustomize, which loads golow's step hook"),
                b'c' | b'm' => return None, // what follows is the command or module's
                b'W' | b'X' => {
                    takes_value = i + 1 == arg.len();
                    break;
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::unreachable;

    fn why(program: &str, args: &[&str]) -> Option<&'static str> {
        unreachable(program.as_bytes(), args.iter().map(|a| a.as_bytes()))
    }

    #[test]
    fn isolated_and_environment_blind_pythons_are_out_of_reach_and_say_why() {
        assert!(
            why("/usr/bin/python3", &["-I", "train.py"])
                .unwrap()
                .starts_with("-I")
        );
        assert!(
            why("python3.11", &["-uE", "train.py"])
                .unwrap()
                .starts_with("-E")
        );
        assert!(
            why(".venv/bin/python", &["-W", "ignore", "-S", "t.py"])
                .unwrap()
                .starts_with("-S")
        );
        assert!(why("python", &["-Wignore", "-Bs", "-I", "t.py"]).is_some());
    }

    #[test]
    fn the_scripts_own_arguments_and_other_programs_are_not_taken_for_pythons_flags() {
        assert_eq!(why("python3", &["train.py", "-I"]), None);
        assert_eq!(why("python3", &["-m", "torch.distributed.run", "-E"]), None);
        assert_eq!(why("python3", &["-c", "print(1)", "-I"]), None);
        assert_eq!(
            why("python3", &["-W", "-I", "t.py"]),
            None,
            "-I is -W's value"
        );
        assert_eq!(why("/usr/bin/ruby", &["-I", "lib"]), None);
        assert_eq!(why("python3", &["-u", "-", "-E"]), None);
    }
}
