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
