//! Ridge in the browser: the interface that `web/package/worker.js` drives through
//! `wasm-bindgen` (its page-side API is `web/package/ridge.js`), and the dashboard's web shell
//! (`start_dashboard`, `web/dashboard.html`).
//!
//! The page never runs Ridge on its main thread: a module worker owns the WebGPU device (the
//! browser's adapter through wgpu's `webgpu` backend), fetches the model files, and answers
//! the page's messages. Everything crossing the boundary is JSON text or plain arrays, so the
//! JavaScript side stays a thin relay.
//!
//! Natively this crate is empty; build it with
//! `cargo build -p ridge-web --target wasm32-unknown-unknown` (or `cargo xtask web`).

#![cfg(target_arch = "wasm32")]

mod generator;

pub use generator::Generator;

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::Promise;
use ridge_core::{Context, ContextOptions};
use ridge_nn::{ModelFiles, SentenceEmbedder};
use ridge_tune::autotune::{self, TuneOptions};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

/// Starts the dashboard (`ridge-app`) in the canvas `canvas_id` on the page's main thread;
/// its GPU work is asynchronous, so the page stays responsive. `adapter_name` is what
/// `GPUAdapter.info` says (wgpu's WebGPU backend reports no name). The dashboard publishes
/// its state as JSON in `window.ridgeDashboard`. Ridge computes on the device egui renders
/// with (one device per adapter in the browser).
///
/// Errors: no such canvas, or no WebGPU for egui's renderer.
#[wasm_bindgen]
pub async fn start_dashboard(canvas_id: String, adapter_name: String) -> Result<(), JsValue> {
    use wasm_bindgen::JsCast;
    console_error_panic_hook::set_once();
    let canvas = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(&canvas_id))
        .ok_or_else(|| js_err(format!("no element #{canvas_id}")))?
        .dyn_into::<web_sys::HtmlCanvasElement>()
        .map_err(|_| js_err(format!("#{canvas_id} is not a canvas")))?;
    // A WebGPU adapter gives one device: egui renders with it and Ridge computes on it, so
    // it is requested with what Ridge needs (the adapter's limits, timestamp queries).
    let setup = eframe::egui_wgpu::WgpuSetupCreateNew {
        device_descriptor: std::sync::Arc::new(|adapter| {
            ridge_core::context::device_descriptor(adapter, &ContextOptions::default())
        }),
        ..eframe::egui_wgpu::WgpuSetupCreateNew::without_display_handle()
    };
    let options = eframe::WebOptions {
        wgpu_options: eframe::egui_wgpu::WgpuConfiguration {
            wgpu_setup: eframe::egui_wgpu::WgpuSetup::CreateNew(setup),
            ..Default::default()
        },
        ..Default::default()
    };
    // The runner must outlive this call: dropping it tears the dashboard down.
    let runner = DASHBOARD.with(|d| d.clone());
    runner
        .start(
            canvas,
            options,
            Box::new(move |cc| {
                let rs = cc
                    .wgpu_render_state
                    .as_ref()
                    .ok_or("egui has no wgpu renderer")?;
                let ctx = Context::from_device(
                    rs.adapter.clone(),
                    rs.device.clone(),
                    rs.queue.clone(),
                    &ContextOptions {
                        adapter_name: Some(adapter_name),
                        ..Default::default()
                    },
                );
                let mut app = ridge_app::RidgeApp::with_context(ctx);
                // dashboard.html#transformer opens on that panel.
                let hash = web_sys::window().and_then(|w| w.location().hash().ok());
                if let Some(tab) = hash.and_then(|h| ridge_app::Tab::from_name(&h)) {
                    app.tab = tab;
                }
                Ok(Box::new(app))
            }),
        )
        .await
}

thread_local! {
    /// The page's dashboard runner, alive as long as the page.
    static DASHBOARD: eframe::WebRunner = eframe::WebRunner::new();
}

fn js_err(e: impl std::fmt::Display) -> JsValue {
    JsError::new(&e.to_string()).into()
}

/// The ops of a comma-separated list (`"gemm, softmax"`), empty entries dropped.
fn op_list(ops: &str) -> Vec<String> {
    ops.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// `ops` (comma separated) when every one is in `known`, else an error naming the first that
/// is not and the choices.
fn known_ops(ops: &str, known: &[&str]) -> Result<Vec<String>, JsValue> {
    let ops = op_list(ops);
    match ops.iter().find(|o| !known.contains(&o.as_str())) {
        Some(bad) => Err(js_err(format!("op {bad:?}: one of {}", known.join(", ")))),
        None => Ok(ops),
    }
}

/// `repeats` when in 1..=1000 (`ridge check` and `ridge bench`'s range), else an error: a
/// negative number from JavaScript arrives as a huge one.
fn checked_repeats(repeats: f64) -> Result<usize, JsValue> {
    if repeats.fract() == 0.0 && (1.0..=1000.0).contains(&repeats) {
        Ok(repeats as usize)
    } else {
        Err(js_err(format!(
            "repeats {repeats}: a whole number from 1 to 1000"
        )))
    }
}

/// A Ridge context on the browser's WebGPU adapter, and the model once loaded.
#[wasm_bindgen]
pub struct Ridge {
    ctx: Rc<Context>,
    files: RefCell<ModelFiles>,
    model: Rc<RefCell<Option<Rc<SentenceEmbedder>>>>,
}

#[wasm_bindgen]
impl Ridge {
    /// Opens the browser's WebGPU adapter with its own limits and the features Ridge uses
    /// that it has (no `shader-f16` → every kernel takes its f32 path). `adapter_name` is
    /// what JavaScript reads from `GPUAdapter.info` (wgpu's WebGPU backend reports no name);
    /// it names the adapter and picks its shipped tuning table.
    ///
    /// Errors: no WebGPU, no adapter, or a device that cannot be created.
    pub async fn create(adapter_name: String) -> Result<Ridge, JsValue> {
        console_error_panic_hook::set_once();
        let options = ContextOptions {
            adapter_name: Some(adapter_name),
            ..Default::default()
        };
        let ctx = Context::with_options(options).await.map_err(js_err)?;
        Ok(Ridge {
            ctx: Rc::new(ctx),
            files: RefCell::new(ModelFiles::default()),
            model: Rc::new(RefCell::new(None)),
        })
    }

    /// The `localStorage` key of this adapter's user tuning table.
    pub fn tuning_key(&self) -> String {
        format!(
            "ridge/tuning/{}",
            ridge_tune::key::user_table_name(&self.ctx.fingerprint())
        )
    }

    /// Installs the tuning tables: `user_table` (the JSON stored under
    /// [`Ridge::tuning_key`], if any) over the shipped table of this adapter's family.
    /// Returns the warnings (a corrupt, stale or foreign user table is ignored, not fatal).
    pub fn install_tuning(&self, user_table: Option<String>) -> Vec<String> {
        let key = self.tuning_key();
        let user = user_table.map(|json| (format!("localStorage[{key}]"), json));
        let (_, warnings) = ridge_tune::install_tables(&self.ctx, &self.ctx.fingerprint(), user);
        warnings.iter().map(ToString::to_string).collect()
    }

    /// Runs the autotuner on `ops` (comma separated: `gemm`, `layer_norm`, `rms_norm`,
    /// `softmax`; empty tunes all) for at most `budget_s` seconds, every candidate checked
    /// against the reference first; installs the result over the shipped table and resolves
    /// to its JSON, which the page stores under [`Ridge::tuning_key`].
    /// `on_progress(done, total, problem)` is called for every candidate.
    pub fn tune(&self, ops: String, budget_s: f64, on_progress: js_sys::Function) -> Promise {
        let ctx = self.ctx.clone();
        let key = self.tuning_key();
        future_to_promise(async move {
            // An unknown op would tune nothing and overwrite the stored table with an empty one.
            let ops = known_ops(&ops, &autotune::OPS)?;
            if !(budget_s.is_finite() && budget_s > 0.0) {
                return Err(js_err(format!(
                    "budget {budget_s} s: a positive number of seconds"
                )));
            }
            let opts = TuneOptions {
                ops: ops.clone(),
                budget: std::time::Duration::from_secs_f64(budget_s.min(1e9)),
                repeats: 3,
                good_enough: 0.9,
            };
            let problems = autotune::problems(&ctx, &ops, &[]);
            let fp = ctx.fingerprint();
            let family = ridge_tune::shipped::family(&fp).unwrap_or("unknown");
            let report = |p: autotune::Progress| {
                let _ = on_progress.call3(
                    &JsValue::NULL,
                    &(p.done as f64).into(),
                    &(p.total as f64).into(),
                    &p.problem.into(),
                );
            };
            let (table, _) = autotune::autotune(&ctx, &problems, &opts, None, family, &report)
                .await
                .map_err(js_err)?;
            let json = table.to_json();
            let (_, warnings) = ridge_tune::install_tables(
                &ctx,
                &fp,
                Some((format!("localStorage[{key}]"), json.clone())),
            );
            if let Some(w) = warnings.first() {
                return Err(js_err(w));
            }
            Ok(json.into())
        })
    }

    /// Compiles every shader variant Ridge builds (`ridge_kernels::shaders::all_variants`)
    /// that this device's features allow (f16, subgroups; no cooperative matrices) with this browser's WGSL compiler, each in its own
    /// validation error scope, and resolves to a JSON array of `{shader, entry, error}` for
    /// those it refuses (empty: every one compiled). naga, which the CPU-only tests run,
    /// accepts WGSL that browsers refuse (Tint's uniformity analysis is stricter), and a
    /// variant no browser test launches would otherwise first fail in a user's page.
    pub fn check_shaders(&self) -> Promise {
        let ctx = self.ctx.clone();
        future_to_promise(async move {
            let mut refused = Vec::new();
            for (shader, entry, defines) in ridge_kernels::shaders::all_variants() {
                let source = defines.apply(shader);
                let lacks_f16 = source.contains("enable f16;") && !ctx.has_f16();
                let lacks_subgroups = source.contains("enable subgroups;") && !ctx.has_subgroups();
                if lacks_f16
                    || lacks_subgroups
                    || source.contains("enable wgpu_cooperative_matrix;")
                {
                    continue;
                }
                let scope = ctx
                    .device()
                    .push_error_scope(ridge_core::wgpu::ErrorFilter::Validation);
                let _ = ctx.pipelines().get(ctx.device(), shader, entry, &defines);
                if let Some(e) = scope.pop().await {
                    refused.push(serde_json::json!({
                        "shader": shader.name,
                        "entry": entry,
                        "error": e.to_string(),
                    }));
                }
            }
            Ok(serde_json::to_string(&refused).map_err(js_err)?.into())
        })
    }

    /// The adapter as JSON: name, backend, fingerprint, features, subgroup sizes, limits
    /// (the same object `ridge info --json` prints per adapter).
    pub fn adapter(&self) -> Result<String, JsValue> {
        serde_json::to_string(&self.ctx.report()).map_err(js_err)
    }

    /// Runs the kernel suite (every op on seeded random data against its f64 CPU reference,
    /// `repeats` timed launches each); resolves to a JSON array of case results (op, shape,
    /// dtype, max_abs_error, worst_ratio, passed, detail, ms, cost).
    /// `on_progress(done, total, step)` is called as each case is checked, then timed.
    pub fn run_suite(&self, repeats: f64, on_progress: js_sys::Function) -> Promise {
        let ctx = self.ctx.clone();
        future_to_promise(async move {
            let repeats = checked_repeats(repeats)?;
            let report = |p: ridge_kernels::suite::Progress| {
                let _ = on_progress.call3(
                    &JsValue::NULL,
                    &(p.done as f64).into(),
                    &(p.total as f64).into(),
                    &p.step.into(),
                );
            };
            let results = ridge_kernels::suite::run_with_progress(&ctx, repeats, &report)
                .await
                .map_err(js_err)?;
            Ok(serde_json::to_string(&results).map_err(js_err)?.into())
        })
    }

    /// `ridge bench` in the browser: measures this adapter's ceilings (copy bandwidth, FMA
    /// peaks, dispatch overhead), times every case of the `size` sweep (`quick`, `medium` or
    /// `full`; `ops`, comma separated, keeps those ops only, as `ridge bench --op`) in two
    /// passes of `repeats` launches, and resolves to the report as JSON: the file
    /// `ridge bench --json` writes, which `ridge predict --report` and the dashboard read,
    /// its per-op model fitted on these runs (`calibration`: each kind's error, held out).
    /// `on_progress(done, total, case)` is called as each case starts.
    ///
    /// Errors: an unknown size or op; GPU errors.
    pub fn bench(
        &self,
        size: String,
        ops: String,
        repeats: f64,
        on_progress: js_sys::Function,
    ) -> Promise {
        use ridge_kernels::{bench, ceilings, sweep};
        let ctx = self.ctx.clone();
        future_to_promise(async move {
            let Some(size) = sweep::SweepSize::parse(&size) else {
                let names: Vec<&str> = sweep::SweepSize::NAMES.iter().map(|(n, _)| *n).collect();
                return Err(js_err(format!(
                    "sweep size {size:?}: one of {}",
                    names.join(", ")
                )));
            };
            let ops = known_ops(&ops, &sweep::OPS)?;
            let repeats = checked_repeats(repeats)?;
            let m = ceilings::measure(&ctx, 64 << 20, repeats)
                .await
                .map_err(js_err)?;
            let cases = sweep::cases(&ctx, size, &ops);
            let total = 2 * cases.len();
            let mut done = 0;
            let timed = bench::time_cases(&ctx, cases, repeats, 2, |_, case| {
                done += 1;
                let _ = on_progress.call3(
                    &JsValue::NULL,
                    &(done as f64).into(),
                    &(total as f64).into(),
                    &format!("{} {:?} {}", case.op, case.shape, case.dtype).into(),
                );
            })
            .await
            .map_err(js_err)?;
            let spec = bench::spec(&ctx);
            let rows = timed
                .iter()
                .map(|t| bench::row(&ctx, t, &m, spec.as_ref()))
                .collect();
            let report = bench::report(&ctx, m, rows);
            Ok(serde_json::to_string_pretty(&report)
                .map_err(js_err)?
                .into())
        })
    }

    /// The files of a model folder to fetch (absent ones may be left out).
    pub fn model_files() -> Vec<String> {
        ridge_nn::source::MODEL_FILES.map(String::from).to_vec()
    }

    /// Adds one fetched file of the model folder (`name` relative to it, e.g.
    /// `1_Pooling/config.json`).
    pub fn add_model_file(&self, name: String, bytes: Vec<u8>) {
        self.files.borrow_mut().files.insert(name, bytes);
    }

    /// Builds the model from the files added so far and uploads its weights; the files are
    /// released either way. `base`, the folder's URL, names files in errors. Returns the
    /// embedding width.
    ///
    /// Errors name the file (by URL) and the problem: missing files, malformed JSON,
    /// unsupported models, corrupt weights.
    pub fn load_model(&self, base: String) -> Result<usize, JsValue> {
        let mut files = std::mem::take(&mut *self.files.borrow_mut());
        files.base = base;
        let model = SentenceEmbedder::from_source(&self.ctx, &files).map_err(js_err)?;
        let dim = model.dim();
        *self.model.borrow_mut() = Some(Rc::new(model));
        Ok(dim)
    }

    /// Drops the sentence-embedding model (its GPU buffers return to the pool;
    /// [`Ridge::release_memory`] gives them back to the device).
    pub fn unload_model(&self) {
        *self.model.borrow_mut() = None;
    }

    /// Whether `text` is longer than the model's `max_seq_length` tokens (it is then cut, as
    /// sentence-transformers cuts it).
    pub fn truncates(&self, text: String) -> Result<bool, JsValue> {
        self.model()?.truncates(&text).map_err(js_err)
    }

    /// Token ids of `text` ([CLS] … [SEP], truncated at the model's `max_seq_length`).
    pub fn token_ids(&self, text: String) -> Result<Vec<u32>, JsValue> {
        let model = self.model()?;
        model.tokenize(&text).map_err(js_err)
    }

    /// Embeds `texts`, `batch_size` at a time; resolves to one `Float32Array` of
    /// `texts.len() × dim` values, row-major.
    pub fn embed(&self, texts: Vec<String>, batch_size: usize) -> Promise {
        let ctx = self.ctx.clone();
        let model = self.model();
        future_to_promise(async move {
            let model = model?;
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = model.embed(&ctx, &refs, batch_size).await.map_err(js_err)?;
            let flat: Vec<f32> = vectors.concat();
            Ok(js_sys::Float32Array::from(flat.as_slice()).into())
        })
    }

    /// Loads a GGUF text model (a Llama-architecture file with Q8_0, Q4_0 or Q4_1 weights,
    /// such as SmolLM2-135M-Instruct) from its bytes; `url` names it in errors. `f16` runs
    /// activations and the KV cache in f16 (needs `shader-f16`); `context` is the positions a
    /// conversation may fill (at most the model's).
    ///
    /// Errors name the problem: not GGUF, truncated, another architecture, unsupported
    /// tensor types, shapes against the metadata, limits of this adapter.
    pub fn load_generator(
        &self,
        bytes: Vec<u8>,
        url: String,
        f16: bool,
        context: usize,
    ) -> Result<Generator, JsValue> {
        Generator::load(self.ctx.clone(), bytes, &url, f16, context)
    }

    /// Bytes of device memory in tensor buffers (in use and free).
    pub fn gpu_bytes(&self) -> f64 {
        self.ctx.allocated_bytes() as f64
    }

    /// Gives free tensor buffers back to the device (after a model is freed); returns the
    /// bytes released.
    pub fn release_memory(&self) -> f64 {
        self.ctx.release_free_buffers() as f64
    }

    fn model(&self) -> Result<Rc<SentenceEmbedder>, JsValue> {
        self.model
            .borrow()
            .clone()
            .ok_or_else(|| js_err("no model loaded"))
    }
}
