//! The `ridge` binary as a user runs it: JSON for scripts, one clear line on bad input.
//! `ridge predict` has its own file (predict.rs).

mod common;

use common::{ridge, ridge_with_stdin};
use std::process::Command;

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
fn bench_smoke_runs_one_tiny_sweep_reports_json_and_draws_it() {
    let svg = std::env::temp_dir().join(format!("ridge-bench-{}.svg", std::process::id()));
    let out = ridge(
        &[
            "bench",
            "--op",
            "add,transpose",
            "--repeats",
            "1",
            "--json",
            "-",
            "--svg",
            svg.to_str().expect("utf-8 temp path"),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let rows = doc["rows"].as_array().expect("rows");
    let runs = |op: &str| rows.iter().filter(|r| r["op"] == op).count();
    assert!(
        runs("add") > 0 && runs("transpose") > 0 && runs("add") + runs("transpose") == rows.len()
    );
    assert!(doc["measured"]["bandwidth_gbps"].as_f64().unwrap() > 0.0);
    assert!(doc["adapter"].is_string() && doc["accuracy_measured"].is_object());
    // Ops with FLOPs go on the roofline, those without (a transpose) on the bandwidth
    // panel; each legend entry counts the op's runs.
    let drawn = std::fs::read_to_string(&svg).expect("the SVG was written");
    let _ = std::fs::remove_file(&svg);
    let runs_in = |op: &str, dtype: &str| {
        rows.iter()
            .filter(|r| r["op"] == op && r["dtype"] == dtype)
            .count()
    };
    // A named row op runs in f16 too where the adapter has `shader-f16`.
    assert!(runs_in("add", "f32") > 0);
    let mut want = vec![
        "Roofline".to_string(),
        "Bandwidth".to_string(),
        format!("add f32 ({})", runs_in("add", "f32")),
        format!("transpose f32 ({})", runs("transpose")),
    ];
    if runs_in("add", "f16") > 0 {
        want.push(format!("add f16 ({})", runs_in("add", "f16")));
    }
    for want in want {
        assert!(drawn.contains(&want), "no {want:?} in the SVG");
    }
}

/// Bad arguments are refused at once, one line, non-zero: unknown ops (bench and tune),
/// zero or negative counts, negative or zero tuning budgets, predictions too large to count
/// exactly, a GPU name that only part-matches the spec table, an output path that cannot be written (before the sweep runs, not after),
/// a sequence longer than the model's positions, a report to merge a sweep into that is
/// none or another adapter's, and f16 tuning where nothing can be tuned
/// in f16. A closed pipe ends the process quietly, as with any Unix tool.
#[test]
fn bad_arguments_fail_fast_with_one_line() {
    let cache = std::env::temp_dir().join(format!("ridge-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&cache).expect("temp folder");
    let cache = cache.to_str().expect("utf-8 temp path");
    let env = [("RIDGE_CACHE_DIR", cache)];
    let fails = |args: &[&str], says: &str| {
        let out = ridge(args, &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    };
    fails(&["bench", "--op", "nonsense"], "invalid value 'nonsense'");
    fails(
        &["tune", "--op", "gemm,nonsense"],
        "invalid value 'nonsense'",
    );
    fails(&["check", "--repeats", "0"], "must be at least 1");
    fails(&["tune", "--repeats", "0"], "must be at least 1");
    fails(
        &["bench", "--repeats", "4294967296"],
        "must be at most 1000",
    );
    fails(
        &[
            "check",
            "--repeats",
            "99999999999999999999999999999999999999999",
        ],
        "must be at most 1000",
    );
    fails(
        &["predict", "--model", "gpt-5"],
        "`--model list` names them",
    );
    fails(&["predict", "--seq", "513"], "512 positions");
    fails(
        &["predict", "--seq", "18446744073709551615"],
        "512 positions",
    );
    fails(&["tune", "--budget", "-5"], "not a time");
    fails(&["tune", "--budget", "0"], "more than zero");
    fails(&["tune", "--repeats", "-1"], "must be at least 1");
    fails(&["embed", "x", "--batch-size", "-1"], "must be 1 to 128");
    fails(
        &["embed", "x", "--batch-size", "99999999999999999999"],
        "must be 1 to 128",
    );
    fails(&["generate", "hi", "--top-k", "-1"], "invalid value '-1'");
    fails(&["predict", "--seq", "0"], "must be at least 1");
    // Counts that would wrap or lose exactness are refused, not printed wrong.
    fails(
        &["predict", "--batch", "18446744073709551615", "--seq", "512"],
        "too large to count exactly",
    );
    fails(
        &["predict", "--adapter", "nvidia"],
        "could be any of: NVIDIA H200",
    );
    let empty = std::path::Path::new(cache).join("empty.txt");
    std::fs::write(&empty, "").expect("temp file");
    let empty = empty.to_str().expect("utf-8 temp path");
    fails(&["embed", "--file", empty], "no texts (it is empty)");
    let started = std::time::Instant::now();
    fails(
        &["bench", "--op", "add", "--json", "/nonexistent/dir/r.json"],
        "/nonexistent/dir/r.json",
    );
    fails(&["bench", "--op", "add", "--svg", cache], cache); // a folder
    // A report to merge into that is none, or another adapter's (the H200's), and --onto
    // without --op: refused before the sweep, the output left as it was.
    let out = std::path::Path::new(cache).join("merged.json");
    let out = out.to_str().expect("utf-8 temp path");
    fails(
        &["bench", "--op", "add", "--json", out, "--onto", empty],
        "not a `ridge bench --json` report",
    );
    let h200 = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../benches/reports/h200.json"
    );
    fails(
        &["bench", "--op", "add", "--json", out, "--onto", h200],
        "not of this adapter",
    );
    fails(&["bench", "--json", out, "--onto", h200], "--op");
    assert!(!std::path::Path::new(out).exists());
    assert!(
        started.elapsed().as_secs() < 60,
        "refused only after the sweep"
    );
    // f16 on an adapter without shader-f16: nothing to tune, said so.
    let info = ridge(&["info", "--json"], &env);
    let doc: serde_json::Value = serde_json::from_slice(&info.stdout).expect("JSON");
    let selected = doc["adapters"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["selected"] == true))
        .expect("a selected adapter");
    let f16 = selected["features"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x.as_str() == Some("shader-f16")));
    if !f16 {
        fails(
            &[
                "tune", "--op", "softmax", "--dtype", "f16", "--budget", "1s",
            ],
            "nothing to tune",
        );
    }
    // `ridge … | head -1`: the reader goes away; no panic, no backtrace.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ridge"))
        .args(["predict", "--adapter", "Apple M1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ridge runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ridge ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(cache);
}

/// `embed --file -` reads texts from standard input, one per line, and says on stderr which
/// texts are longer than the model's token limit (all-MiniLM-L6-v2: 256), whose embeddings
/// cover only their beginning. Needs the model in the cache (`cargo xtask fetch-model`, which
/// the test command runs first).
/// Standard output that cannot be written (a full disk) is one error line and a failure for
/// every command, never a panic.
#[cfg(target_os = "linux")]
#[test]
fn a_full_standard_output_is_an_error_not_a_panic() {
    for args in [
        &["predict"][..],
        &["predict", "--validate"],
        &["tune", "--show"],
        &["fetch-model", "--print-dir"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = Command::new(env!("CARGO_BIN_EXE_ridge"))
            .args(args)
            .stdout(full)
            .output()
            .expect("ridge runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("cannot write to standard output") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}

/// A cached model that changed since it was fetched (one edited byte of config.json, one
/// flipped bit of the weights) is refused by name before it runs, never used silently.
#[test]
fn a_changed_cached_model_is_refused() {
    let cache = ridge_nn::fetch::cache_dir();
    let minilm = ridge_nn::fetch::minilm_dir();
    let copy = std::env::temp_dir().join(format!("ridge-changed-{}", std::process::id()));
    let dir = copy.join("models").join(ridge_nn::fetch::MINILM.name);
    std::fs::create_dir_all(&dir).expect("temp folder");
    for (name, _, _) in ridge_nn::fetch::MINILM.files {
        let to = dir.join(name);
        std::fs::create_dir_all(to.parent().expect("a folder")).expect("temp folder");
        std::fs::copy(minilm.join(name), &to).unwrap_or_else(|e| {
            panic!(
                "{name} in {} (run cargo xtask fetch-model): {e}",
                cache.display()
            )
        });
    }
    let env = [("RIDGE_CACHE_DIR", copy.to_str().expect("utf-8 temp path"))];
    let ok = ridge(&["similarity", "a cat", "a dog"], &env);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let config = dir.join("config.json");
    let text = std::fs::read_to_string(&config)
        .expect("config")
        .replace("\"num_attention_heads\": 12", "\"num_attention_heads\": 6");
    std::fs::write(&config, text).expect("edit");
    for args in [
        &["similarity", "a cat", "a dog"][..],
        &["embed", "a cat", "--json"],
    ] {
        let out = ridge(args, &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} ran on a changed model");
        assert!(
            err.contains("config.json is missing or differs from the SHA-256 digest"),
            "{err}"
        );
        assert!(err.contains("ridge fetch-model --model minilm"), "{err}");
        assert!(!err.contains("download"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&copy);
}

#[test]
fn embed_reads_standard_input_and_warns_of_cut_texts() {
    let long = "word ".repeat(300);
    let input = format!("a short text\n{long}\nanother\n");
    let out = ridge_with_stdin(&["embed", "--file", "-", "--json"], input.as_bytes());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2]["text"], "another");
    assert_eq!(lines[1]["embedding"].as_array().map(Vec::len), Some(384));
    let warning = err
        .lines()
        .find(|l| l.starts_with("warning:"))
        .unwrap_or_else(|| panic!("no warning for a 300-word text: {err}"));
    assert!(
        warning.contains("over 256 tokens") && warning.ends_with("1 of 3 (index 1)"),
        "{warning}"
    );
    // An empty file adds no texts to those given as arguments (refused only when it is all).
    let empty = std::env::temp_dir().join(format!("ridge-empty-{}.txt", std::process::id()));
    std::fs::write(&empty, "").expect("temp file");
    let out = ridge(
        &[
            "embed",
            "one text",
            "--file",
            empty.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    let _ = std::fs::remove_file(&empty);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

/// A `--max-tokens` past the context says at once where a reply will stop (the greedy reply
/// to "Hi" ends at its end-of-text token long before).
#[test]
fn max_tokens_past_the_context_is_named() {
    let out = ridge(&["generate", "Hi", "--max-tokens", "100000"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "--max-tokens 100000: the model's context of 8192 positions leaves room for 8162 tokens"
        ),
        "{err}"
    );
}

/// `ridge generate` streams a greedy reply of SmolLM2 (fetched by `cargo xtask test`) as
/// JSON Lines: the prompt's ids, one object per token, then the timings.
#[test]
fn generate_json_streams_prompt_ids_tokens_and_timings() {
    let out = ridge(
        &[
            "generate",
            "What is the capital of France?",
            "--max-tokens",
            "3",
            "--json",
            "--top-logits",
            "2",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(lines[0]["prompt_ids"].as_array().unwrap().len(), 37);
    // The reference's first greedy tokens: "The capital of".
    let ids: Vec<u64> = lines[1..4]
        .iter()
        .map(|l| l["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [504, 3575, 282]);
    assert_eq!(lines[1]["text"], "The");
    assert_eq!(lines[1]["top_logits"][0][0], 504);
    // Logits are f32, printed in their shortest exact form (never 17 f64 digits).
    let raw = String::from_utf8_lossy(&out.stdout);
    let logit = raw
        .lines()
        .nth(1)
        .unwrap()
        .split("],[")
        .next()
        .unwrap()
        .to_string();
    let digits = logit
        .rsplit(',')
        .next()
        .unwrap()
        .trim_matches(|c: char| !c.is_ascii_digit() && c != '.' && c != '-');
    assert!(digits.len() <= 12, "{logit}");
    let value: f32 = digits.parse().unwrap();
    assert_eq!(value.to_string(), digits, "{logit}");
    assert_eq!(lines[4]["timings"]["generated"], 3);
    assert_eq!(lines[4]["timings"]["finish"], "length");
}

/// The ids of a `--json` generation's tokens, and its prompt's.
fn generated_ids(args: &[&str], stdin: Option<&[u8]>) -> (Vec<u64>, Vec<u64>) {
    let out = ridge_with_stdin(args, stdin.unwrap_or_default());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let ids = |v: &serde_json::Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap())
            .collect()
    };
    let prompt = ids(&lines[0]["prompt_ids"]);
    let tokens = lines[1..lines.len() - 1]
        .iter()
        .map(|l| l["id"].as_u64().unwrap())
        .collect();
    (prompt, tokens)
}

/// What a user found (2026-12-06): `--top-logits` (logits read back, the pick on the host)
/// changed a seeded reply, the host drawing from another generator than the GPU sampler; a
/// prompt piped through `-` kept its trailing newline; a near-zero temperature or a penalty
/// far from 1 overflowed f32 and failed as "non-finite logits: the weights may be corrupt".
#[test]
fn generate_is_the_same_reply_however_it_is_asked() {
    let sampled = |extra: &[&str]| {
        let mut args = vec![
            "generate",
            "Tell me a story.",
            "--temperature",
            "1",
            "--top-p",
            "0.95",
            "--seed",
            "1",
            "--max-tokens",
            "4",
            "--json",
        ];
        args.extend_from_slice(extra);
        generated_ids(&args, None).1
    };
    assert_eq!(sampled(&[]), sampled(&["--top-logits", "1"]));
    let (piped, _) = generated_ids(
        &["generate", "-", "--max-tokens", "1", "--json"],
        Some(b"Hi\n"),
    );
    let (given, _) = generated_ids(&["generate", "Hi", "--max-tokens", "1", "--json"], None);
    assert_eq!(piped, given);
    // The limits: the largest logit ("The"), as greedy; the penalty's overflow clamped.
    for extreme in [
        ["--temperature", "1e-38"],
        ["--temperature", "1e-45"],
        ["--repetition-penalty", "3e38"],
    ] {
        let mut args = vec![
            "generate",
            "What is the capital of France?",
            "--max-tokens",
            "1",
            "--json",
        ];
        args.extend_from_slice(&extreme);
        let (_, tokens) = generated_ids(&args, None);
        assert_eq!(tokens, [504], "{extreme:?}");
    }
}

#[test]
fn generate_refuses_bad_input_in_one_line() {
    let missing = std::env::temp_dir().join("ridge-no-such-model.gguf");
    let bad_utf8 = std::env::temp_dir().join("ridge-bad-utf8.json");
    std::fs::write(&bad_utf8, b"[{\"role\": \"user\", \"content\": \"\xff\"}]").unwrap();
    let bare = std::env::temp_dir().join("ridge-bare-message.json");
    std::fs::write(&bare, br#"{"role": "user", "content": "hi"}"#).unwrap();
    let cut = std::env::temp_dir().join("ridge-cut-messages.json");
    std::fs::write(&cut, br#"[{"role": "user", "content": "hi"}"#).unwrap();
    let truncated = std::env::temp_dir().join("ridge-truncated.gguf");
    std::fs::write(&truncated, b"GGUF\x03\x00\x00\x00\x10").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["generate", "hi", "--temperature", "-1"], "temperature"),
        (vec!["generate", "hi", "--top-p", "2"], "top-p"),
        // Sampling settings are refused by name before the model loads.
        (
            vec!["generate", "hi", "--top-p", "0"],
            "'--top-p <TOP_P>': must be a finite number in (0, 1]",
        ),
        (
            vec!["generate", "hi", "--temperature", "nan"],
            "'--temperature",
        ),
        (
            vec!["generate", "hi", "--repetition-penalty", "0"],
            "more than 0",
        ),
        (vec!["generate", "hi", "--max-tokens", "0"], "at least 1"),
        (vec!["generate", "  "], "empty"),
        (vec!["generate", "", "--raw"], "empty"),
        (vec!["generate"], "give a prompt"),
        (
            vec!["generate", "--messages", bad_utf8.to_str().unwrap()],
            "UTF-8",
        ),
        (
            vec!["generate", "--messages", bare.to_str().unwrap()],
            "put the messages in a list",
        ),
        (
            vec!["generate", "--messages", cut.to_str().unwrap()],
            "EOF while parsing a list",
        ),
        (
            vec!["generate", "hi", "--model", missing.to_str().unwrap()],
            "ridge-no-such-model",
        ),
        (
            vec!["generate", "hi", "--model", truncated.to_str().unwrap()],
            "truncated",
        ),
    ];
    for (args, needle) in cases {
        let out = ridge(&args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// `ridge chat` with `args`, `input` piped to it.
fn chat(args: &[&str], input: &[u8]) -> std::process::Output {
    let args: Vec<&str> = std::iter::once("chat")
        .chain(args.iter().copied())
        .collect();
    ridge_with_stdin(&args, input)
}

/// A command is a line's first word: `/exit now` leaves without a reply (it went to the
/// model as a message); a reply ending its line is not followed by an empty one.
#[test]
fn chat_takes_a_command_with_words_after_it() {
    let out = chat(&["--max-tokens", "2"], b"/reset please\n/exit now\nHi\n");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("a new conversation"), "{stderr}");
    assert_eq!(stdout, "", "no reply after /exit: {stdout:?}");
}

/// A piped chat whose turn cannot be answered (its context too short) ends non-zero, so a
/// script learns of it; a terminal's user reads the refusal and goes on.
#[test]
fn a_piped_chat_with_a_refused_turn_fails() {
    let out = chat(&["--context", "5"], b"Hi\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 turn of the piped conversation"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `ridge chat` reads turns from stdin until /exit; a follow-up turn prefills only what is
/// new (the earlier turns stay in the KV cache); /reset starts over.
#[test]
fn chat_keeps_the_conversation_cached_and_resets() {
    let out = chat(
        &["--max-tokens", "8", "--context", "256"],
        b"What is the capital of France?\nAnd of Italy?\n/reset\nHi\n/exit\n",
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.lines().count(), 3, "three replies: {stdout:?}");
    assert!(stdout.lines().next().unwrap().contains("Paris"), "{stdout}");
    assert!(stderr.contains("a new conversation"), "{stderr}");
    // "(N prompt tokens, …": the whole first turn, the second's few new tokens, the third
    // from scratch (the default system prompt included).
    let prefilled: Vec<usize> = stderr
        .lines()
        .filter_map(|l| {
            l.split_once("(")?
                .1
                .split_once(" prompt tokens")?
                .0
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(prefilled.len(), 3, "{stderr}");
    assert!(
        prefilled[0] > 30 && prefilled[1] < 20 && prefilled[2] > 25,
        "{prefilled:?}"
    );
}
