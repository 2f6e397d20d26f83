//! `golow-worker`: the command line the monitor starts the Rust workers with.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use golow_protocol::config::{Impl, read_worker_config};
use golow_worker::torch as workers;

#[derive(Parser)]
#[command(
    name = "golow-worker",
    version,
    about = "golow's Rust workers (started by `golow run`)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train or evaluate one implementation, reporting events on $GOLOW_EVENT_FD (stdout when unset).
    Run {
        #[arg(long = "impl", value_parser = Impl::parse)]
        implementation: Impl,
        #[arg(long)]
        config: PathBuf,
    },
    /// Write the session's initial weights (safetensors) to the path named in the config.
    InitWeights {
        #[arg(long)]
        config: PathBuf,
    },
    /// Print, as JSON, what this build of libtorch sees: version, CUDA devices, cuDNN.
    Probe,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run {
            implementation,
            config,
        } => match read_worker_config(&config) {
            Ok(config) => workers::run_worker(implementation, &config),
            Err(message) => {
                eprintln!("golow-worker: {message}");
                2
            }
        },
        Command::InitWeights { config } => {
            match read_worker_config(&config).and_then(|c| workers::write_initial_weights(&c)) {
                Ok(()) => 0,
                Err(message) => {
                    eprintln!("golow-worker: {message}");
                    1
                }
            }
        }
        Command::Probe => {
            println!("{}", workers::probe());
            0
        }
    };
    std::process::exit(code);
}
