//! What the `ridge` binary's tests share: running it as a user does.

use std::process::Command;

/// Runs `ridge` with `args` and extra environment `env`, its output captured.
pub fn ridge(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ridge"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("ridge runs")
}

/// Runs `ridge` with `args`, `input` written to its standard input, its output captured.
#[allow(dead_code)] // each test file compiles this module; predict.rs writes no input
pub fn ridge_with_stdin(args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ridge"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ridge runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("ridge ends")
}
