//! Ridge's dashboard: the performance model and the GPU side by side, as an egui library with
//! two thin shells — `ridge-dashboard` (native, eframe) and the web page (`ridge-web`'s
//! `start_dashboard`).
//!
//! Panels: **Adapter** (info, limits, spec-table and measured ceilings), **Roofline** (every
//! measured kernel run on log-log axes against both roofs), **Kernels** (drag a shape, watch
//! predicted vs measured time live), **Transformer** (MiniLM embeddings and a per-op,
//! per-layer breakdown against the model), **Compare** (`ridge bench --json` reports of
//! several machines overlaid) and **Teach** (what-if on any GPU of the spec table).
//! GPU work runs in the background ([`tasks`]), one task at a time, so the UI never waits.

// In the browser wgpu's handles are neither Send nor Sync (one thread); natively they are.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod panels;
pub mod plot;
pub mod tasks;

use std::sync::Arc;

use ridge_core::{Context, ContextOptions};
use ridge_model::hardware::{GpuSpec, Precision};
use ridge_model::report::{BenchReport, Measured};
use ridge_model::roofline::Ceilings;

use tasks::Task;

/// The dashboard's panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    /// Adapter info, limits, ceilings.
    Adapter,
    /// The roofline with every measured run.
    Roofline,
    /// One kernel, live.
    Kernels,
    /// MiniLM.
    Transformer,
    /// Reports of several machines.
    Compare,
    /// What-if on the spec table.
    Teach,
    /// Decoder LLMs on any GPU, and the model against published rates.
    Llms,
}

impl Tab {
    /// Every panel, in tab order.
    pub const ALL: [Tab; 7] = [
        Tab::Adapter,
        Tab::Roofline,
        Tab::Kernels,
        Tab::Transformer,
        Tab::Compare,
        Tab::Teach,
        Tab::Llms,
    ];

    /// The tab's title.
    pub fn name(self) -> &'static str {
        match self {
            Tab::Adapter => "Adapter",
            Tab::Roofline => "Roofline",
            Tab::Kernels => "Kernels, live",
            Tab::Transformer => "Transformer",
            Tab::Compare => "Compare",
            Tab::Teach => "Teach",
            Tab::Llms => "LLMs",
        }
    }

    /// The tab `name` names: a prefix of its title, letters and digits only, any case
    /// ("transformer", "kernels", "llms"); `None` for an empty or unknown name.
    pub fn from_name(name: &str) -> Option<Tab> {
        let key = |s: &str| {
            s.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase())
                .collect::<String>()
        };
        let want = key(name);
        Tab::ALL
            .into_iter()
            .find(|t| !want.is_empty() && key(t.name()).starts_with(&want))
    }
}

/// The GPU: its context, its spec-table entry and the ceilings Ridge measured on it.
pub struct Gpu {
    /// The context, once open.
    pub ctx: Option<Arc<Context>>,
    /// Why there is none.
    pub error: Option<String>,
    /// The adapter's row of the spec table, if it has one.
    pub spec: Option<GpuSpec>,
    /// Ceilings measured on this adapter (bandwidth curve, FMA peak, dispatch overhead).
    pub measured: Option<Measured>,
    /// Why measuring failed.
    pub measure_error: Option<String>,
    /// The `ridge bench --json` report shown instead of a GPU ([`RidgeApp::replay`]).
    pub replayed: Option<BenchReport>,
    adapter_name: Option<String>,
    offline: bool,
    measure_started: bool,
    opening: Option<Task<Result<Context, String>>>,
    measuring: Option<Task<Result<Measured, String>>>,
}

impl Gpu {
    fn new(adapter_name: Option<String>, offline: bool) -> Self {
        Self {
            ctx: None,
            error: None,
            spec: None,
            measured: None,
            measure_error: None,
            replayed: None,
            adapter_name,
            offline,
            measure_started: false,
            opening: None,
            measuring: None,
        }
    }

    fn set_context(&mut self, ctx: Context) {
        let fp = ctx.fingerprint();
        self.spec = ridge_model::hardware::lookup(fp.vendor_id, fp.device_id, &fp.name);
        self.ctx = Some(Arc::new(ctx));
    }

    /// Ceilings from the spec table (f32).
    pub fn spec_ceilings(&self) -> Option<Ceilings> {
        self.spec.as_ref().map(|s| s.ceilings(Precision::F32))
    }

    /// Ceilings measured here (f32).
    pub fn measured_ceilings(&self) -> Option<Ceilings> {
        self.measured.as_ref().map(|m| m.ceilings(false))
    }

    /// The ceilings predictions use: measured when available, else the spec table's.
    pub fn best_ceilings(&self) -> Option<Ceilings> {
        self.measured_ceilings().or_else(|| self.spec_ceilings())
    }

    /// The roof a run of `op` in f16 or f32 storage is placed and scored against, and its
    /// name: the tensor cores' for an f16 GEMM where their peak was measured (Ridge runs f16
    /// GEMMs on them wherever they exist), else the FMA peak of the storage type; measured
    /// when available, else the spec table's (its f16 figure is the matrix engines').
    pub fn ceilings_for(&self, op: &str, f16: bool) -> Option<(Ceilings, &'static str)> {
        if let Some(m) = &self.measured {
            return Some(m.roof_for(op, f16));
        }
        let precision = if f16 { Precision::F16 } else { Precision::F32 };
        let name = if f16 { "spec f16" } else { "spec f32" };
        self.spec.as_ref().map(|s| (s.ceilings(precision), name))
    }

    /// Whether the context is being opened or the ceilings measured.
    pub fn busy(&self) -> bool {
        self.opening.is_some() || self.measuring.is_some()
    }

    /// Measures the ceilings again in the background.
    pub fn measure(&mut self, egui: &egui::Context) {
        let Some(ctx) = self.ctx.clone() else { return };
        let cpu = ctx.is_cpu_driver();
        // CPU drivers and the browser's SwiftShader: a short curve; real GPUs: past the caches.
        let max_bytes = if cpu { 8 << 20 } else { 512 << 20 };
        self.measure_error = None;
        self.measuring = Some(tasks::spawn(egui, move || async move {
            ridge_kernels::ceilings::measure(&ctx, max_bytes, 3)
                .await
                .map_err(|e| e.to_string())
        }));
    }

    fn poll(&mut self, egui: &egui::Context) {
        if self.offline {
            return;
        }
        if self.ctx.is_some() && !self.measure_started {
            self.measure_started = true;
            self.measure(egui);
        }
        if self.ctx.is_none() && self.error.is_none() && self.opening.is_none() {
            let adapter_name = self.adapter_name.clone();
            self.opening = Some(tasks::spawn(egui, move || async move {
                let options = ContextOptions {
                    adapter_name,
                    ..Default::default()
                };
                Context::with_options(options)
                    .await
                    .map_err(|e| e.to_string())
            }));
        }
        if let Some(result) = self.opening.as_ref().and_then(Task::take) {
            self.opening = None;
            match result {
                Ok(ctx) => self.set_context(ctx),
                Err(e) => self.error = Some(e),
            }
        }
        if let Some(result) = self.measuring.as_ref().and_then(Task::take) {
            self.measuring = None;
            match result {
                Ok(m) => self.measured = Some(m),
                Err(e) => self.measure_error = Some(e),
            }
        }
    }
}

/// Which model the Transformer panel shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransformerView {
    /// all-MiniLM-L6-v2's embeddings, GPU time per op and per layer.
    Encoder,
    /// SmolLM2-135M: one decode step's timeline.
    Decoder,
}

/// The dashboard.
pub struct RidgeApp {
    /// The panel shown.
    pub tab: Tab,
    /// The GPU.
    pub gpu: Gpu,
    /// Roofline panel state (it also holds every measured run).
    pub roofline: panels::roofline::State,
    /// Kernels panel state.
    pub kernels: panels::kernels::State,
    /// Which model the Transformer panel shows.
    pub transformer_view: TransformerView,
    /// Transformer panel state: the encoder (MiniLM).
    pub transformer: panels::transformer::State,
    /// Transformer panel state: the decoder's step timeline (SmolLM2).
    pub decode: panels::decode::State,
    /// Compare panel state.
    pub compare: panels::compare::State,
    /// Teach panel state.
    pub teach: panels::teach::State,
    /// LLMs panel state.
    pub llm: panels::llm::State,
}

impl RidgeApp {
    /// A dashboard that opens the GPU (`RIDGE_ADAPTER` natively; in the browser
    /// `adapter_name` names the adapter, as `GPUAdapter.info` gives it) and measures its
    /// ceilings on the first frame.
    pub fn new(adapter_name: Option<String>) -> Self {
        Self::build(adapter_name, false)
    }

    /// A dashboard on an existing context (in the browser, the device egui renders with:
    /// an adapter there gives one device).
    pub fn with_context(ctx: Context) -> Self {
        let mut app = Self::build(None, false);
        app.gpu.set_context(ctx);
        app
    }

    /// A dashboard that never touches a GPU: the model-only panels work, the GPU panels say
    /// there is no adapter (snapshot tests and screenshots).
    pub fn offline() -> Self {
        Self::build(None, true)
    }

    /// A dashboard that shows a `ridge bench --json` report as if it had just been measured,
    /// without opening a GPU: the report's adapter, spec-table row and measured ceilings on
    /// the Adapter panel, every timed case on the Roofline panel (hover: predicted and
    /// measured), predictions on the Kernels panel. For looking at another machine's run
    /// in the live panels, and for their snapshot tests.
    pub fn replay(report: &BenchReport) -> Self {
        let mut app = Self::offline();
        app.gpu.spec = report.spec.clone();
        app.gpu.measured = Some(report.measured.clone());
        app.gpu.replayed = Some(report.clone());
        for row in &report.rows {
            let roof = app.gpu.ceilings_for(&row.op, row.dtype == "f16");
            if let Some((label, point)) = panels::report_point("", row, roof) {
                app.roofline.record(label, point);
            }
        }
        app
    }

    fn build(adapter_name: Option<String>, offline: bool) -> Self {
        Self {
            tab: Tab::Roofline,
            gpu: Gpu::new(adapter_name, offline),
            roofline: Default::default(),
            kernels: Default::default(),
            transformer_view: TransformerView::Encoder,
            transformer: Default::default(),
            decode: Default::default(),
            compare: panels::compare::State::with_examples(),
            teach: Default::default(),
            llm: Default::default(),
        }
    }

    /// Whether any GPU work is in flight (GPU tasks run one at a time: they share the
    /// context's profiler).
    pub fn gpu_busy(&self) -> bool {
        self.gpu.busy()
            || self.roofline.busy()
            || self.kernels.busy()
            || self.transformer.busy()
            || self.decode.busy()
    }

    /// Draws the whole dashboard into `ui`.
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let egui = ui.ctx().clone();
        self.gpu.poll(&egui);
        let busy = self.gpu_busy();
        egui::Panel::top("ridge-tabs").show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.strong("Ridge");
                ui.separator();
                for tab in Tab::ALL {
                    ui.selectable_value(&mut self.tab, tab, tab.name());
                }
                ui.separator();
                ui.label(status_line(&self.gpu, busy));
            });
        });
        egui::CentralPanel::default().show(ui, |ui| match self.tab {
            Tab::Adapter => panels::adapter::show(ui, &mut self.gpu, busy),
            Tab::Roofline => panels::roofline::show(ui, &self.gpu, &mut self.roofline, busy),
            Tab::Kernels => panels::kernels::show(ui, &self.gpu, &mut self.kernels, busy),
            Tab::Transformer => {
                ui.horizontal(|ui| {
                    let view = &mut self.transformer_view;
                    ui.selectable_value(
                        view,
                        TransformerView::Encoder,
                        "all-MiniLM-L6-v2: embeddings",
                    );
                    ui.selectable_value(
                        view,
                        TransformerView::Decoder,
                        "SmolLM2-135M: a decode step's timeline",
                    );
                });
                ui.separator();
                match self.transformer_view {
                    TransformerView::Encoder => panels::transformer::show(
                        ui,
                        &self.gpu,
                        &mut self.transformer,
                        &self.compare.reports,
                        busy,
                    ),
                    TransformerView::Decoder => panels::decode::show(
                        ui,
                        &self.gpu,
                        &mut self.decode,
                        &self.compare.reports,
                        busy,
                    ),
                }
            }
            Tab::Compare => panels::compare::show(ui, &mut self.compare),
            Tab::Teach => panels::teach::show(ui, &mut self.teach),
            Tab::Llms => panels::llm::show(ui, &mut self.llm),
        });
        // Results of background work arrive between frames.
        self.roofline.poll(&self.gpu);
        self.kernels.poll(&self.gpu, &mut self.roofline);
        self.transformer.poll();
        self.decode.poll();
        if self.gpu_busy() || self.kernels.live {
            egui.request_repaint_after(std::time::Duration::from_millis(100));
        }
        #[cfg(target_arch = "wasm32")]
        publish_status(self);
    }

    /// What the page's tests read: the adapter, the ceilings and the plotted runs.
    pub fn status_json(&self) -> String {
        let c = self.gpu.measured_ceilings();
        serde_json::json!({
            "adapter": self.gpu.ctx.as_ref().map(|c| c.info().name.clone()),
            "error": self.gpu.error,
            "measure_error": self.gpu.measure_error,
            "measured_gbps": c.as_ref().map(|c| c.bandwidth / 1e9),
            "measured_gflops": c.as_ref().map(|c| c.peak_flops / 1e9),
            "roofline_points": self.roofline.points.len(),
            "sweep_busy": self.roofline.busy(),
            "sweep_measured": self.roofline.progress.0,
            "sweep_total": self.roofline.progress.1,
            "sweep_error": self.roofline.error,
            "tab": self.tab.name(),
            "transformer": self.transformer.status(),
            "decode": self.decode.status(),
        })
        .to_string()
    }
}

fn status_line(gpu: &Gpu, busy: bool) -> String {
    match (&gpu.ctx, &gpu.error) {
        (Some(ctx), _) => format!(
            "{}{}",
            ridge_core::context::describe(ctx.info()),
            if busy { " — working…" } else { "" }
        ),
        (None, Some(e)) => format!("no GPU: {e}"),
        (None, None) if gpu.replayed.is_some() => format!(
            "{} — replayed from a ridge bench report (no GPU)",
            gpu.replayed.as_ref().map_or("", |r| r.adapter.as_str())
        ),
        (None, None) if gpu.offline => "offline (no GPU)".into(),
        (None, None) => "opening the GPU…".into(),
    }
}

#[cfg(target_arch = "wasm32")]
fn publish_status(app: &RidgeApp) {
    if let Some(window) = web_sys::window() {
        let _ = js_sys::Reflect::set(&window, &"ridgeDashboard".into(), &app.status_json().into());
    }
}

impl eframe::App for RidgeApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }
}
