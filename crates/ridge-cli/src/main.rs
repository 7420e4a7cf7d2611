//! `ridge`: Ridge's command-line interface.

mod check;
mod info;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Ridge: portable GPU compute on WebGPU, with a roofline model beside every kernel.
///
/// The adapter is chosen by RIDGE_ADAPTER (a backend name such as `vulkan` or `gl`, part of
/// the adapter's name, or an index from `ridge info`), otherwise the best one present.
#[derive(Parser)]
#[command(name = "ridge", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List GPU adapters with their limits, features and fingerprints.
    Info(info::Args),
    /// Run every kernel on seeded random data against its f64 CPU reference and print
    /// errors, measured time, GFLOP/s and GB/s.
    Check(check::Args),
}

/// What every subcommand returns; an error becomes one line on stderr and exit code 1.
pub type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info(args) => info::run(args),
        Command::Check(args) => check::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
