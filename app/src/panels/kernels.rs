//! Kernels, live: pick an op, drag its shape: its FLOPs, bytes and predicted time (measured
//! roof and spec table) follow the controls; while "live" is on it runs on the GPU again and
//! again (median of 5 launches each time) and shows measured time and the fraction of the
//! roofline reached. Every shape measured also lands on the Roofline panel.

use egui_plot::{HLine, Line, Plot, PlotPoints};
use ridge_core::DType;
use ridge_kernels::sweep::CaseSpec;
use ridge_model::OpCost;

use super::roofline;
use crate::Gpu;
use crate::tasks::{self, Task};

/// Ops and the names of their shape dimensions.
pub const OPS: [(&str, &[&str]); 10] = [
    ("gemm", &["M", "N", "K"]),
    ("layer_norm", &["rows", "cols"]),
    ("rms_norm", &["rows", "cols"]),
    ("softmax", &["rows", "cols"]),
    ("gelu", &["elements"]),
    ("add", &["elements"]),
    ("transpose", &["rows", "cols"]),
    ("nchw_to_nhwc", &["N", "C", "H = W"]),
    ("attention", &["heads", "tokens", "head width"]),
    (
        "sparse_attention",
        &["heads", "tokens (BigBird blocks of 64)", "head width"],
    ),
];

type Run = Result<(String, OpCost, f64), String>;

/// The panel's state.
pub struct State {
    /// Index into [`OPS`].
    pub op: usize,
    /// Shape per op (up to three dimensions).
    pub dims: [[usize; 3]; 10],
    /// f16 storage (where the adapter has `shader-f16`).
    pub f16: bool,
    /// Measure continuously.
    pub live: bool,
    /// The last measurement: label, cost, median ms.
    pub last: Option<(String, OpCost, f64)>,
    /// Recent medians of the current shape, ms.
    pub history: Vec<f64>,
    /// Why the last run failed.
    pub error: Option<String>,
    running: Option<Task<Run>>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            op: 0,
            dims: [
                [256, 256, 256],
                [1024, 384, 1],
                [1024, 384, 1],
                [1024, 384, 1],
                [1 << 20, 1, 1],
                [1 << 20, 1, 1],
                [1024, 1024, 1],
                [8, 64, 56],
                [12, 512, 64],
                [12, 1024, 64],
            ],
            f16: false,
            live: false,
            last: None,
            history: Vec::new(),
            error: None,
            running: None,
        }
    }
}

impl State {
    /// The case the controls describe.
    pub fn case(&self) -> CaseSpec {
        let (op, _) = OPS[self.op];
        let d = self.dims[self.op];
        let shape = match op {
            "gemm" => d.to_vec(),
            "gelu" | "add" => vec![d[0]],
            "nchw_to_nhwc" => vec![d[0], d[1], d[2], d[2]],
            // [batch, heads, tokens, head width]
            "attention" | "sparse_attention" => vec![1, d[0], d[1], d[2]],
            _ => vec![d[0], d[1]],
        };
        CaseSpec {
            op: op.into(),
            shape,
            dtype: if self.f16 { DType::F16 } else { DType::F32 },
        }
    }

    /// Whether a measurement is in flight.
    pub fn busy(&self) -> bool {
        self.running.is_some()
    }

    /// Collects a finished measurement and records it on the roofline.
    pub fn poll(&mut self, gpu: &Gpu, roofline: &mut roofline::State) {
        let Some(result) = self.running.as_ref().and_then(Task::take) else {
            return;
        };
        self.running = None;
        match result {
            Ok((label, cost, ms)) => {
                if self.last.as_ref().is_none_or(|(l, _, _)| *l != label) {
                    self.history.clear();
                }
                self.history.push(ms);
                if self.history.len() > 120 {
                    self.history.remove(0);
                }
                let case = self.case();
                let roof = gpu.ceilings_for(&case.op, case.dtype == DType::F16);
                let p = super::run_point(&label, &cost, ms, roof);
                roofline.record(label.clone(), p);
                self.last = Some((label, cost, ms));
                self.error = None;
            }
            Err(e) => {
                self.error = Some(e);
                self.live = false;
            }
        }
    }

    fn start(&mut self, gpu: &Gpu, egui: &egui::Context) {
        let Some(ctx) = gpu.ctx.clone() else { return };
        let case = self.case();
        self.running = Some(tasks::spawn(egui, move || async move {
            super::measure_case(&ctx, &case).await
        }));
    }
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, gpu: &Gpu, state: &mut State, busy: bool) {
    let has_f16 = gpu.ctx.as_ref().is_some_and(|c| c.has_f16());
    ui.horizontal(|ui| {
        egui::ComboBox::from_label("op")
            .selected_text(OPS[state.op].0)
            .show_ui(ui, |ui| {
                for (i, (name, _)) in OPS.iter().enumerate() {
                    ui.selectable_value(&mut state.op, i, *name);
                }
            });
        ui.add_enabled(has_f16, egui::Checkbox::new(&mut state.f16, "f16 storage"));
        if !has_f16 {
            state.f16 = false;
        }
        ui.checkbox(&mut state.live, "live");
        if ui
            .add_enabled(!busy && gpu.ctx.is_some(), egui::Button::new("Run once"))
            .clicked()
        {
            state.start(gpu, ui.ctx());
        }
        if state.running.is_some() {
            ui.spinner();
        }
    });
    let (op, names) = OPS[state.op];
    let maxima: [usize; 3] = match op {
        "gemm" => [4096, 4096, 4096],
        "gelu" | "add" => [1 << 26, 1, 1],
        "nchw_to_nhwc" => [64, 512, 256],
        "attention" | "sparse_attention" => [64, 8192, 256],
        _ => [65536, 8192, 1],
    };
    for (i, name) in names.iter().enumerate() {
        ui.add(
            egui::Slider::new(&mut state.dims[state.op][i], 1..=maxima[i])
                .logarithmic(true)
                .text(*name),
        );
    }
    if state.live && !busy && gpu.ctx.is_some() {
        state.start(gpu, ui.ctx());
    }
    if let Some(e) = &state.error {
        ui.colored_label(egui::Color32::RED, e);
    }
    let case = state.case();
    let label = super::label(&case);
    // Scored against the roof of its storage type and unit (f16 FMA, tensor cores, f32).
    let f16 = case.dtype == DType::F16;
    let roof = gpu.ceilings_for(&case.op, f16);
    let spec = gpu.spec.as_ref().map(|s| {
        s.ceilings(if f16 {
            ridge_model::Precision::F16
        } else {
            ridge_model::Precision::F32
        })
    });
    // The cost and the predictions follow the controls, before any run (in replay too).
    let cost = ridge_kernels::sweep::cost(&case).ok();
    egui::Grid::new("kernel-live").striped(true).show(ui, |ui| {
        ui.label("shape");
        ui.label(&label);
        ui.end_row();
        if let Some(c) = &cost {
            ui.label("FLOPs / bytes / intensity");
            ui.label(format!(
                "{:.3e} / {:.3e} / {:.2} FLOP/byte",
                c.flops,
                c.bytes,
                c.flops / c.bytes.max(1.0)
            ));
            ui.end_row();
            let measured = roof
                .as_ref()
                .filter(|_| gpu.measured.is_some())
                .map(|(c, name)| (format!("predicted ({name} roof)"), c.clone()));
            let spec = spec
                .clone()
                .map(|c| ("predicted (spec table)".to_string(), c));
            for (name, ceilings) in [measured, spec]
                .into_iter()
                .flatten()
                .map(|(n, c)| (n, Some(c)))
            {
                if let Some(ceil) = ceilings {
                    ui.label(name);
                    ui.label(prediction_text(&ceil.predict(c)));
                    ui.end_row();
                }
            }
        }
        if let Some((label, cost, ms)) = &state.last {
            ui.label("measured (median of 5)");
            ui.label(format!("{ms:.4} ms — {label}"));
            ui.end_row();
            if let Some(f) = roof
                .as_ref()
                .and_then(|(c, _)| c.fraction_of_roofline(cost, ms * 1e-3))
            {
                ui.label("of the roofline");
                ui.label(format!("{:.1} %", f * 100.0));
                ui.end_row();
            }
        }
    });
    let predicted = cost.and_then(|c| {
        roof.as_ref()
            .map(|(ceil, _)| ceil.predict(&c).seconds * 1e3)
    });
    let history: Vec<[f64; 2]> = state
        .history
        .iter()
        .enumerate()
        .map(|(i, ms)| [i as f64, *ms])
        .collect();
    Plot::new("kernel-history")
        .legend(egui_plot::Legend::default())
        .height(220.0)
        .x_axis_label("measurement")
        .y_axis_label("ms")
        .include_y(0.0)
        .show(ui, |plot| {
            plot.line(Line::new("measured", PlotPoints::from(history)));
            if let Some(p) = predicted {
                plot.hline(HLine::new("predicted", p));
            }
        });
}

/// `0.0050 ms, compute-bound`, and where the roof carries a measured dispatch overhead, how
/// the time splits: `(0.0005 ms of compute + 4.5 µs of dispatch)`.
pub fn prediction_text(p: &ridge_model::Prediction) -> String {
    let mut t = format!("{:.4} ms, {}-bound", p.seconds * 1e3, p.bound);
    if p.overhead_s > 0.0 {
        t.push_str(&format!(
            " ({:.4} ms of {} + {:.1} µs of dispatch)",
            p.compute_s.max(p.memory_s) * 1e3,
            if p.compute_s >= p.memory_s {
                "compute"
            } else {
                "memory traffic"
            },
            p.overhead_s * 1e6
        ));
    }
    t
}
