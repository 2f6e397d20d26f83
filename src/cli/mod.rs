//! The command line: one file per subcommand, each parsing and validating its flags (shared ones in [`options`])
//! and handing the work to the part that does it. Bad input gets one line on stderr and exit code 2, before
//! anything is written.

/// `print!`, for what the commands print on stdout: a reader that went away (`golow doctor | head`) stops it
/// without a panic, and the command finishes its work (a session still writes its recording).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// `println!`, the same way.
macro_rules! sayln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod attach;
mod attach_list;
mod compare;
mod doctor;
mod export;
mod options;
mod replay;
mod report;
mod run;
mod sweep;

use std::io::Write;

use clap::{Parser, Subcommand};

use crate::session::keeper;

pub const EXIT_OK: i32 = 0;
pub const EXIT_WORKER_FAILED: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;

#[derive(Parser)]
#[command(
    name = "golow",
    // The commit too (build.rs), so that a report saying `golow --version` says which code ran.
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GOLOW_COMMIT"), ")"),
    about = "A terminal profiler and live monitor for deep-learning training: what each level of abstraction costs \
             (ResNet-50 in PyTorch, torch.compile, TorchScript, AOTInductor, LibTorch, ATen and cuDNN, side by side), \
             and where your own PyTorch script's time goes (golow run --cmd)",
    after_help = "Start with:\n  \
                  golow run                                  the built-in levels side by side, live\n  \
                  golow run --cmd 'python train.py'          your script, with no change to its code\n  \
                  golow replay recordings/FILE.golow         a run again, as it was seen\n\n\
                  Every run is recorded under recordings/; golow SUBCOMMAND --help says more."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run implementations side by side and report what each costs.
    Run(Box<run::RunArgs>),
    /// Watch running processes golow did not start (their trees, CPU, memory, GPU), live or headless; never signals them.
    Attach(attach::AttachArgs),
    /// Replay a recording in the TUI as it was seen (or a sweep directory in the sweep view); --headless prints its summary.
    Replay(replay::ReplayArgs),
    /// Write a recording as a Chrome trace (Perfetto), CSV or JSON.
    Export(export::ExportArgs),
    /// Compare two recordings (or two sweeps, cell by cell): per implementation, B against A; exit 1 on a regression.
    Compare(compare::CompareArgs),
    /// Run the same session over batch sizes and resolutions: a recording per cell, results.csv/json and figures.
    Sweep(Box<sweep::SweepArgs>),
    /// The figures of recordings as Markdown tables (sessions of one set-up: medians and ranges), or their kernels.
    Report(report::ReportArgs),
    /// Print what golow found on this machine: python and torch, libtorch, CUDA, cuDNN, NVML and GPUs.
    Doctor(doctor::DoctorArgs),
}

/// The command line as clap defines it: the user guide's flag tables are checked against its subcommands and flags.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// A problem with what the user asked for: one line, exit code 2.
struct BadInput(String);

/// Why a subcommand stopped: its one line and exit code.
struct Failure {
    code: i32,
    message: String,
}

impl From<BadInput> for Failure {
    fn from(BadInput(message): BadInput) -> Failure {
        Failure {
            code: EXIT_BAD_INPUT,
            message,
        }
    }
}

fn failed(message: String) -> Failure {
    Failure {
        code: EXIT_WORKER_FAILED,
        message,
    }
}

/// The exit code of a subcommand, its failure printed; 128 + the signal where SIGTERM or SIGHUP ended it (a replay
/// view closed by one, say), as a shell reports a process the signal ended.
fn exit_code(result: Result<i32, Failure>) -> i32 {
    let code = result.unwrap_or_else(|failure| {
        let _ = writeln!(
            std::io::stderr(),
            "golow: {}",
            golow_protocol::text::printable(&failure.message)
        );
        failure.code
    });
    crate::termination::exit_code().unwrap_or(code)
}

/// Clap's message on one line: the error and its hints, without the usage block.
fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .map(|l| l.trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The command line as the session's header records it: arguments that are not UTF-8 (paths are bytes on Linux)
/// with their odd bytes replaced.
pub fn command_line() -> Vec<String> {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Parses the command line (as bytes: a path need not be UTF-8) and runs; returns the process exit code.
pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == keeper::SUBCOMMAND) {
        let rest: Option<Vec<String>> = args[2..]
            .iter()
            .map(|a| a.to_str().map(str::to_owned))
            .collect();
        return match rest.as_deref().and_then(keeper::args) {
            Some((mark, dir)) => keeper::keep(&mark, &dir),
            None => EXIT_BAD_INPUT,
        };
    }
    if let Ok(program) = std::env::current_exe() {
        keeper::enable(program);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    EXIT_BAD_INPUT
                } else {
                    EXIT_OK
                };
            }
            eprintln!(
                "golow: {} (see golow --help)",
                one_line(&e.render().to_string())
            );
            return EXIT_BAD_INPUT;
        }
    };
    exit_code(match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Attach(args) => attach::attach(args),
        Command::Replay(args) => replay::replay(args),
        Command::Export(args) => export::export(args),
        Command::Compare(args) => compare::compare(args),
        Command::Sweep(args) => sweep::sweep(*args),
        Command::Report(args) => report::report(args),
        Command::Doctor(args) => doctor::doctor(args),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every flag and argument of every subcommand says in `--help` what it is for.
    #[test]
    fn every_argument_has_a_description() {
        fn walk(command: &clap::Command, path: &str, bare: &mut Vec<String>) {
            for arg in command.get_arguments() {
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    bare.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                if sub.get_about().is_none() {
                    bare.push(format!("{path} {} (the subcommand)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), bare);
            }
        }
        let mut command = Cli::command();
        command.build();
        let mut bare = Vec::new();
        walk(&command, "golow", &mut bare);
        assert!(bare.is_empty(), "no help text: {bare:?}");
    }
}
