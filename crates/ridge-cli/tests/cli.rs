//! The `ridge` binary as a user runs it: JSON for scripts, one clear line on bad input.

use std::process::Command;

fn ridge(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ridge"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("ridge runs")
}

#[test]
fn info_json_lists_adapters_with_limits_and_fingerprints() {
    let out = ridge(&["info", "--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let adapters = doc["adapters"].as_array().expect("adapters array");
    assert!(!adapters.is_empty());
    assert_eq!(adapters.iter().filter(|a| a["selected"] == true).count(), 1);
    let first = &adapters[0];
    assert!(first["fingerprint"]["backend"].is_string());
    assert!(first["limits"].as_array().is_some_and(|l| !l.is_empty()));
}

#[test]
fn an_unknown_adapter_is_one_line_and_a_failure() {
    let out = ridge(
        &["check", "--repeats", "1"],
        &[("RIDGE_ADAPTER", "no-such-gpu")],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .expect("an error line");
    assert!(line.contains("no-such-gpu"), "{err}");
}

#[test]
fn bench_smoke_runs_one_tiny_sweep_and_reports_json() {
    let out = ridge(
        &["bench", "--op", "add", "--repeats", "1", "--json", "-"],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let rows = doc["rows"].as_array().expect("rows");
    assert!(!rows.is_empty() && rows.iter().all(|r| r["op"] == "add"));
    assert!(doc["measured"]["bandwidth_gbps"].as_f64().unwrap() > 0.0);
    assert!(doc["adapter"].is_string() && doc["accuracy_measured"].is_object());
}

#[test]
fn predict_needs_no_gpu_and_refuses_unknown_gpus() {
    let out = ridge(
        &[
            "predict",
            "--model",
            "minilm",
            "--seq",
            "128",
            "--batch",
            "32",
            "--adapter",
            "NVIDIA H200",
            "--json",
        ],
        &[("WGPU_BACKEND", "none")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // Embeddings (4), seven ops per layer (the residual adds and GELU ride in the GEMMs),
    // pooling.
    assert_eq!(doc["ops"].as_array().unwrap().len(), 4 + 6 * 7 + 1);
    assert!(doc["sequences_per_second"].as_f64().unwrap() > 0.0);
    let bad = ridge(&["predict", "--adapter", "Voodoo 2"], &[]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no GPU named"));
}
