//! The browser build and server: `ridge-web` compiled to wasm32 and bound with
//! `wasm-bindgen --target web` into `web/pkg/`, then `web/` served on 127.0.0.1 with the
//! local model cache under `/model/`. The browser tests drive the same server.

use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::{Result, apt_install, have, root, run};

const TARGET: &str = "wasm32-unknown-unknown";

/// The `wasm-bindgen` crate version in Cargo.lock; the CLI must be exactly this version.
fn bindgen_version() -> Result<String> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock"))
        .map_err(|e| format!("Cargo.lock: {e}"))?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == "name = \"wasm-bindgen\""
            && let Some(v) = lines.next().and_then(|l| l.strip_prefix("version = \""))
        {
            return Ok(v.trim_end_matches('"').to_string());
        }
    }
    Err("Cargo.lock has no wasm-bindgen entry".into())
}

/// The wasm target and the matching `wasm-bindgen` CLI, installed when missing.
fn ensure_wasm_tools() -> Result {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(TARGET))
        .unwrap_or(true); // no rustup: let cargo say what is missing
    if !installed {
        run("rustup", &["target", "add", TARGET])?;
    }
    let want = bindgen_version()?;
    let have_version = Command::new("wasm-bindgen")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if have_version != format!("wasm-bindgen {want}") {
        println!(
            "xtask: installing wasm-bindgen-cli {want} (it must match the wasm-bindgen crate)"
        );
        // `--locked` fails against this registry (its lockfile names a yanked version).
        run(
            "cargo",
            &["install", "wasm-bindgen-cli", "--version", &want],
        )?;
    }
    Ok(())
}

/// Builds `web/pkg/`, the npm-style package: the wasm module, its JS bindings and their
/// TypeScript declarations (wasm-bindgen), and `web/package/` (the API `ridge.js` with its
/// declarations, the worker, `package.json`, the README). Call [`ensure_wasm_tools`] first.
/// `optimise`: pass the module through `wasm-opt` ([`optimize_wasm`]); the browser tests
/// leave it out, a size optimisation that took 261 s of a cold CI run's two cores
/// (benches/NOTES.md, 2026-12-07, sixth session).
fn build(optimise: bool) -> Result {
    run(
        "cargo",
        &["build", "--release", "--target", TARGET, "-p", "ridge-web"],
    )?;
    let target_dir = crate::target_dir();
    let wasm = target_dir.join(format!("{TARGET}/release/ridge_web.wasm"));
    run(
        "wasm-bindgen",
        &[
            "--target",
            "web",
            "--out-dir",
            "web/pkg",
            wasm.to_str().ok_or("non-UTF-8 target path")?,
        ],
    )?;
    if optimise {
        optimize_wasm(&target_dir)?;
    } else {
        println!(
            "xtask: the wasm module stays unoptimised for the tests (`cargo xtask web` runs wasm-opt)"
        );
    }
    let package = root().join("web/package");
    for entry in std::fs::read_dir(&package).map_err(|e| format!("{}: {e}", package.display()))? {
        let from = entry.map_err(|e| e.to_string())?.path();
        let to = root()
            .join("web/pkg")
            .join(from.file_name().ok_or("a nameless file")?);
        std::fs::copy(&from, &to)
            .map_err(|e| format!("{} → {}: {e}", from.display(), to.display()))?;
    }
    println!(
        "xtask: the package is in web/pkg/ (ridge.js, ridge.d.ts, the worker and the wasm module)"
    );
    Ok(())
}

/// `wasm-opt -Oz` (binaryen's, from npm, run by Node) over `web/pkg/ridge_web_bg.wasm`, as
/// wasm-pack does after wasm-bindgen: 11.0 → 8.6 MB, 3.60 → 3.25 MB gzipped (binaryen 132,
/// ~100 s on two cores). The result is kept in `<target>/wasm-opt/` under the unoptimised
/// module's hash, so a rebuild that changed nothing copies it instead of optimising again.
/// Skipped with a note where Node or the npm packages cannot be had: the module works
/// unoptimised.
fn optimize_wasm(target_dir: &Path) -> Result {
    let skip = |why: String| {
        println!(
            "xtask: {why}: the wasm module stays unoptimised (wasm-opt comes from npm's binaryen)"
        );
        Ok(())
    };
    if !have("node") {
        return skip("Node.js is missing".into());
    }
    if let Err(e) = ensure_node_modules() {
        return skip(e);
    }
    let wasm = root().join("web/pkg/ridge_web_bg.wasm");
    let bytes = std::fs::read(&wasm).map_err(|e| format!("{}: {e}", wasm.display()))?;
    let key = {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        bytes.hash(&mut h);
        h.finish()
    };
    let cache = target_dir.join("wasm-opt");
    let optimised = cache.join(format!("ridge_web_bg.{key:016x}.wasm"));
    if !optimised.is_file() {
        // One module kept: the previous build's goes.
        let _ = std::fs::remove_dir_all(&cache);
        std::fs::create_dir_all(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
        println!("xtask: wasm-opt -Oz (binaryen) on web/pkg/ridge_web_bg.wasm, about two minutes");
        // Written aside and renamed once whole: a failed run leaves nothing to reuse.
        let partial = cache.join("partial.wasm");
        let (from, to) = (wasm.to_str(), partial.to_str());
        run(
            "node",
            &[
                "web/node_modules/binaryen/bin/wasm-opt",
                "-Oz",
                from.ok_or("non-UTF-8 path")?,
                "-o",
                to.ok_or("non-UTF-8 path")?,
            ],
        )?;
        std::fs::rename(&partial, &optimised)
            .map_err(|e| format!("{} → {}: {e}", partial.display(), optimised.display()))?;
    }
    std::fs::copy(&optimised, &wasm)
        .map(|_| ())
        .map_err(|e| format!("{} → {}: {e}", optimised.display(), wasm.display()))
}

/// `web/node_modules` (playwright-core, pngjs, binaryen) from `web/package-lock.json`,
/// installed with `npm ci` when one is missing.
fn ensure_node_modules() -> Result {
    let have_all = ["playwright-core", "pngjs", "binaryen"]
        .iter()
        .all(|m| root().join("web/node_modules").join(m).is_dir());
    if have_all {
        return Ok(());
    }
    if !have("npm") {
        return Err("npm is missing (install Node.js 20 or newer)".into());
    }
    println!("xtask: npm ci in web/ (playwright-core, pngjs, binaryen from web/package-lock.json)");
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(root().join("web"))
        .status()
        .map_err(|e| format!("could not start npm: {e}"))?;
    if !status.success() {
        return Err(format!("npm ci in web/ failed ({status})"));
    }
    Ok(())
}

/// The local folder of `model` (`minilm`, `smollm2`; fetched when missing), as the CLI
/// reports it.
pub fn model_dir(model: &str) -> Result<PathBuf> {
    let out = crate::ridge_output(&["fetch-model", "--model", model, "--print-dir"])?;
    Ok(PathBuf::from(out.trim()))
}

/// The model folders the server mounts: all-MiniLM-L6-v2 under `/model/`, SmolLM2's GGUF
/// under `/models/smollm2/`.
pub struct Models {
    /// all-MiniLM-L6-v2's folder.
    pub minilm: PathBuf,
    /// The folder holding SmolLM2-135M-Instruct's GGUF file.
    pub smollm2: PathBuf,
}

impl Models {
    /// Both, fetched when missing.
    pub fn fetch() -> Result<Self> {
        Ok(Self {
            minilm: model_dir("minilm")?,
            smollm2: model_dir("smollm2")?,
        })
    }
}

/// Serves `web/`, all-MiniLM-L6-v2 under `/model/` and SmolLM2 under `/models/smollm2/`;
/// returns the bound address and the thread. `/model-without/NAME/…` serves the MiniLM folder
/// without its file `NAME` (the browser tests' broken model).
pub fn serve(port: u16, models: Models) -> Result<(String, std::thread::JoinHandle<()>)> {
    let Models {
        minilm: model,
        smollm2,
    } = models;
    let server = tiny_http::Server::http(("127.0.0.1", port))
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
    let addr = server
        .server_addr()
        .to_ip()
        .ok_or("server has no IP address")?;
    let web = root().join("web");
    let handle = std::thread::spawn(move || {
        for request in server.incoming_requests() {
            let url = request
                .url()
                .split(['?', '#'])
                .next()
                .unwrap_or("/")
                .to_string();
            let without = url
                .strip_prefix("/model-without/")
                .and_then(|r| r.split_once('/'));
            let file = match (url.strip_prefix("/model/"), without) {
                _ if url.starts_with("/models/smollm2/") => {
                    safe_join(&smollm2, &url["/models/smollm2/".len()..])
                }
                (Some(rest), _) => safe_join(&model, rest),
                (_, Some((omitted, rest))) if rest != omitted => safe_join(&model, rest),
                (_, Some(_)) => None,
                _ => {
                    let rest = url.trim_start_matches('/');
                    safe_join(&web, if rest.is_empty() { "index.html" } else { rest })
                }
            };
            let response = file.and_then(|f| {
                let opened = std::fs::File::open(&f).ok().filter(|_| f.is_file())?;
                let header =
                    tiny_http::Header::from_bytes("Content-Type", content_type(&f)).ok()?;
                Some(tiny_http::Response::from_file(opened).with_header(header))
            });
            let _ = match response {
                Some(r) => request.respond(r),
                None => request
                    .respond(tiny_http::Response::from_string("not found").with_status_code(404)),
            };
        }
    });
    Ok((format!("http://{addr}/"), handle))
}

/// `base/rest`, refusing anything that could leave `base`.
fn safe_join(base: &Path, rest: &str) -> Option<PathBuf> {
    let rest = Path::new(rest);
    rest.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| base.join(rest))
}

/// Module scripts and `WebAssembly.instantiateStreaming` need exact types.
fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("json") => "application/json",
        Some("css") => "text/css",
        _ => "application/octet-stream",
    }
}

/// `cargo xtask web [--port N]`: build, fetch the model, serve until interrupted.
pub fn web(args: &[String]) -> Result {
    let port = match args {
        [] => 8080,
        [flag, n] if flag == "--port" => n.parse().map_err(|_| format!("bad port {n:?}"))?,
        _ => return Err("usage: cargo xtask web [--port N]".into()),
    };
    ensure_wasm_tools()?;
    build(true)?;
    let (url, handle) = serve(port, Models::fetch()?)?;
    println!(
        "\nRidge's page is at {url}, the chat at {url}chat.html and the dashboard at \
         {url}dashboard.html\n(Chrome or Edge with WebGPU; Ctrl-C stops the server; the \
         JavaScript package is in web/pkg/)"
    );
    handle
        .join()
        .map_err(|_| "server thread panicked".to_string())
}

/// Chromium and playwright-core (the browser tests' driver), installed when missing.
fn ensure_browser() -> Result {
    if !have("chromium") {
        apt_install(
            &["chromium"],
            "Chromium (the browser tests run WebGPU in it)",
        )?;
    }
    ensure_node_modules()
}

/// `cargo xtask bench-browser [--size S] [--op LIST] [--out FILE]`: `ridge bench` in headless
/// Chromium (SwiftShader's WebGPU): `web/bench.html` runs the sweep (default `medium`; `--op`
/// keeps those ops, as `ridge bench --op`) and `web/tests/bench.mjs` writes its report
/// (default `benches/reports/swiftshader.json`).
pub fn bench_browser(args: &[String]) -> Result {
    let (mut size, mut out, mut ops) = (
        "medium".to_string(),
        "benches/reports/swiftshader.json".to_string(),
        String::new(),
    );
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match (flag.as_str(), it.next()) {
            ("--size", Some(s)) if ["quick", "medium", "full"].contains(&s.as_str()) => {
                size = s.clone()
            }
            ("--out", Some(f)) => out = f.clone(),
            ("--op", Some(list)) => ops = list.clone(),
            _ => {
                return Err(
                    "usage: cargo xtask bench-browser [--size quick|medium|full] [--op LIST] [--out FILE]"
                        .into(),
                );
            }
        }
    }
    ensure_browser()?;
    ensure_wasm_tools()?;
    build(true)?;
    let (url, _server) = serve(0, Models::fetch()?)?;
    run("node", &["web/tests/bench.mjs", &url, &size, &out, &ops])
}

/// The browser tests: headless Chromium (SwiftShader's WebGPU) loads the page from a server
/// on an ephemeral port; `web/tests/browser.mjs` checks the suite, MiniLM against the
/// fixture, and the error for a missing model.
pub fn browser_tests() -> Result {
    ensure_browser()?;
    ensure_wasm_tools()?;
    // The wasm-only code is invisible to the native clippy run.
    run(
        "cargo",
        &[
            "clippy",
            "--target",
            TARGET,
            "-p",
            "ridge-web",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    build(false)?;
    let (url, _server) = serve(0, Models::fetch()?)?;
    run("node", &["web/tests/browser.mjs", &url])
}
