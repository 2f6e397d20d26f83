//! The text gdb writes into the target's fresh page, which `PyRun_SimpleString` runs there in `__main__`'s
//! namespace. It binds no name in `__main__` and reaches builtins through `__import__`, so a script's own `open` or
//! `exec` cannot break it, and no exception leaves it: on 3.11 one escaping a pending call reaches the script's code
//! as a SystemError, and a SystemExit would end the process. It runs the file only in the process it was queued
//! in: a fork between the queueing and the run copies the queue into the child, whose `os.getpid()` differs.

use std::path::Path;

use super::process::Process;
use super::{Refusal, one_line};

/// The page gdb maps for the text, which must hold it and its terminating NUL (the page comes zeroed).
pub(super) const PAGE: usize = 4096;

/// The loader, run in a namespace of its own: it reads the file with the target's own uid and mount namespace.
fn loader(file: &str) -> String {
    let file = python_literal(file);
    format!(
        "import io\n\
         with io.open_code({file}) as f:\n    code = compile(f.read(), {file}, 'exec')\n\
         exec(code, {{'__name__': '__golow_attach__', '__file__': {file}}})\n"
    )
}

/// The bootstrap that runs `file` if the process's own pid (inside its pid namespace) is still `pid_inside`.
pub(super) fn text(file: &Path, pid_inside: u32) -> Result<String, Refusal> {
    let path = file.to_str().ok_or_else(|| {
        Refusal(format!(
            "the file to run, {}, is not named in UTF-8",
            one_line(&file.to_string_lossy(), 160)
        ))
    })?;
    let loader = python_literal(&loader(path));
    let text = format!(
        "try:\n    if __import__('os').getpid() == {pid_inside}:\n        \
         __import__('builtins').exec({loader}, {{'__name__': '__golow_attach__'}})\n\
         except BaseException:\n    pass\n"
    );
    if text.len() >= PAGE {
        return Err(Refusal(format!(
            "the path of the file to run is too long ({} bytes); put it in a shorter one",
            path.len()
        )));
    }
    Ok(text)
}

/// Refuses a file the target cannot run: not absolute, or not a regular file in the target's root.
pub(super) fn check_file(target: &Process, file: &Path) -> Result<(), Refusal> {
    let shown = one_line(&file.to_string_lossy(), 160);
    if !file.is_absolute() {
        return Err(Refusal(format!(
            "the file to run in process {}, {shown}, must be an absolute path",
            target.pid
        )));
    }
    let mut in_root = b"root".to_vec();
    in_root.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(file.as_os_str()));
    target.open_file_bytes(&in_root).map(drop).map_err(|e| {
        Refusal(format!(
            "the file to run in process {}, {shown}, cannot be opened in its root: {e}",
            target.pid
        ))
    })
}

/// `text` as a Python string literal that evaluates to it: printable ASCII as itself, everything else escaped.
pub fn python_literal(text: &str) -> String {
    let mut literal = String::with_capacity(text.len() + 2);
    literal.push('\'');
    for c in text.chars() {
        match c {
            '\\' => literal.push_str("\\\\"),
            '\'' => literal.push_str("\\'"),
            '\n' => literal.push_str("\\n"),
            ' '..='~' => literal.push(c),
            c if (c as u32) < 0x100 => literal.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => literal.push_str(&format!("\\u{:04x}", c as u32)),
            c => literal.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    literal.push('\'');
    literal
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn python() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python")
    }

    /// What the venv's python writes running `code` with `argument`, which must succeed.
    fn python_says(code: &str, argument: &str) -> Vec<u8> {
        let out = Command::new(python())
            .args(["-c", code, argument])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    #[test]
    fn a_literal_is_read_back_by_python_as_the_text() {
        let text = "a'b\"c\\d\ne\tf\u{1b}g\u{e9}\u{202e}h\u{1f600}";
        let read_back = python_says(
            &format!(
                "import sys; sys.stdout.write(repr({}))",
                python_literal(text)
            ),
            "",
        );
        assert_eq!(
            read_back,
            python_says("import sys; sys.stdout.write(repr(sys.argv[1]))", text)
        );
        assert!(python_literal(text).is_ascii());
    }

    #[test]
    fn the_bootstrap_compiles_fits_its_page_and_refuses_what_does_not() {
        let text = text(Path::new("/tmp/golow-attach-1/hook's \"file\".py"), 42).unwrap();
        python_says("import sys; compile(sys.argv[1], 'boot', 'exec')", &text);
        assert!(text.len() < PAGE);
        let long = format!("/tmp/{}", "d/".repeat(2000));
        assert!(
            super::text(Path::new(&long), 42)
                .unwrap_err()
                .0
                .contains("too long")
        );
    }
}
