//! The Transformer panel's decoder view: SmolLM2-135M, one greedy decode step's timeline
//! (`ridge_nn::llama::DecodeTimeline`): the host's recording of the step beside each of its
//! dispatches on the GPU, the gaps between them, and what bounds the step; then the GPU time
//! per op against the roofline of this adapter's ceilings and, where a `ridge bench` report
//! of this adapter is at hand, the calibrated model (`ridge_nn::llama::price_ops`).
//!
//! Weights: the cached GGUF natively (`cargo xtask fetch-model`), else seeded random weights
//! of its shape and formats (Q4_1 products, Q8_0 embedding): a step's time does not depend on
//! the weights' values, and the browser need not fetch 98 MB for it.

use std::sync::Arc;

use egui_plot::{Bar, BarChart, Legend, Plot};
use ridge_core::{Context, DType};
use ridge_model::calibrate::Calibrated;
use ridge_model::report::BenchReport;
use ridge_nn::llama::timeline::greedy_step;
use ridge_nn::llama::{DecodeTimeline, price_ops, random};
use ridge_nn::{Llama, LlamaConfig};

use crate::Gpu;
use crate::plot::PALETTE;
use crate::tasks::{self, Task};

/// A loaded model and what its weights are.
type Loaded = (Arc<Llama>, String);

/// The view's state.
pub struct State {
    /// Prompt tokens in the KV cache before the decode steps (the profiled step's depth is
    /// two more).
    pub prompt: usize,
    /// f16 activations and KV cache (adapters with `shader-f16`).
    pub f16: bool,
    /// The last timeline.
    pub timeline: Option<DecodeTimeline>,
    /// Why loading or profiling failed.
    pub error: Option<String>,
    model: Option<Loaded>,
    /// The report whose terms price the calibrated column (a key naming it) and its fit.
    calibrated: Option<(String, Arc<Calibrated>)>,
    running: Option<Task<Result<(Loaded, DecodeTimeline), String>>>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            prompt: 126,
            f16: false,
            timeline: None,
            error: None,
            model: None,
            calibrated: None,
            running: None,
        }
    }
}

impl State {
    /// Whether a step is being profiled.
    pub fn busy(&self) -> bool {
        self.running.is_some()
    }

    /// Collects finished work.
    pub fn poll(&mut self) {
        let Some(r) = self.running.as_ref().and_then(Task::take) else {
            return;
        };
        self.running = None;
        match r {
            Ok((model, timeline)) => {
                self.model = Some(model);
                self.timeline = Some(timeline);
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// The view's state for scripts: busy, the profiled step's depth and dispatches, the
    /// error.
    pub fn status(&self) -> serde_json::Value {
        serde_json::json!({
            "busy": self.busy(),
            "depth": self.timeline.as_ref().map(|t| t.depth),
            "dispatches": self.timeline.as_ref().map(|t| t.profile.spans.len()),
            "error": self.error,
        })
    }
}

/// SmolLM2-135M's weights in `dtype`: the cached GGUF natively where present, else seeded
/// random ones of its shape and formats.
fn load(ctx: &Context, dtype: DType) -> Result<Loaded, String> {
    use ridge_nn::file::FileBytes;
    use ridge_nn::gguf::Gguf;
    #[cfg(not(target_arch = "wasm32"))]
    {
        let path = ridge_nn::fetch::smollm2_path();
        if path.exists() {
            let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
            let file = FileBytes::open(&path).map_err(|e| fail(&e))?;
            let g = Gguf::parse(file).map_err(|e| fail(&e))?;
            let model = Llama::load(ctx, &g, dtype).map_err(|e| e.to_string())?;
            return Ok((Arc::new(model), format!("{}", path.display())));
        }
    }
    let bytes = random::smollm2_like(7);
    let g = Gguf::parse(FileBytes::from_bytes(std::path::Path::new("random"), bytes))
        .map_err(|e| e.to_string())?;
    let model = Llama::load(ctx, &g, dtype).map_err(|e| e.to_string())?;
    Ok((Arc::new(model), random::SMOLLM2_LIKE.into()))
}

/// Loads the model unless `loaded` holds it in `dtype`, runs a prompt of `prompt` tokens and
/// one warm decode step, then measures a step's timeline.
async fn profile(
    ctx: Arc<Context>,
    loaded: Option<Loaded>,
    dtype: DType,
    prompt: usize,
) -> Result<(Loaded, DecodeTimeline), String> {
    let loaded = match loaded.filter(|(m, _)| m.dtype() == dtype) {
        Some(l) => l,
        None => load(&ctx, dtype)?,
    };
    let model = &loaded.0;
    let s = |e: ridge_nn::Error| e.to_string();
    let mut cache = model.cache(&ctx, prompt + 3).map_err(s)?;
    let ids = random::prompt_ids(prompt, model.config().vocab);
    let id = greedy_step(&ctx, model, &mut cache, &ids)
        .await
        .map_err(s)?;
    let id = greedy_step(&ctx, model, &mut cache, &[id])
        .await
        .map_err(s)?;
    let (timeline, _) = DecodeTimeline::measure(&ctx, model, &mut cache, id)
        .await
        .map_err(s)?;
    Ok((loaded, timeline))
}

/// Draws the view. `reports`: Compare's, searched for one of this adapter.
pub fn show(
    ui: &mut egui::Ui,
    gpu: &Gpu,
    state: &mut State,
    reports: &[(String, BenchReport, bool)],
    busy: bool,
) {
    let cal = super::transformer::calibration(gpu, reports, &mut state.calibrated);
    let Some(ctx) = gpu.ctx.clone() else {
        ui.label("no adapter: a decode step's timeline needs one");
        return;
    };
    ui.label(
        "One greedy decode step of SmolLM2-135M: the host's recording of its dispatches beside \
         each dispatch on the GPU and the gaps between them (each dispatch timestamped in a \
         pass of its own; natively the step is recorded before the GPU reaches it, so the \
         gaps are the GPU's own).",
    );
    ui.horizontal(|ui| {
        let label = ui.label("prompt tokens before the step:");
        let context = LlamaConfig::smollm2_135m().context;
        ui.add(egui::DragValue::new(&mut state.prompt).range(1..=context - 3))
            .labelled_by(label.id);
        ui.add_enabled(
            ctx.has_f16(),
            egui::Checkbox::new(&mut state.f16, "f16 activations and KV cache"),
        );
        if state.running.is_some() {
            ui.spinner();
            ui.label("running the prompt and two decode steps…");
        } else if ui
            .add_enabled(!busy, egui::Button::new("Profile a decode step"))
            .clicked()
        {
            state.error = None;
            let dtype = if state.f16 && ctx.has_f16() {
                DType::F16
            } else {
                DType::F32
            };
            let (loaded, prompt) = (state.model.clone(), state.prompt);
            state.running = Some(tasks::spawn(ui.ctx(), move || {
                profile(ctx, loaded, dtype, prompt)
            }));
        }
    });
    if let Some(e) = &state.error {
        ui.colored_label(egui::Color32::RED, e);
    }
    let Some(t) = &state.timeline else { return };
    if let Some((_, w)) = &state.model {
        ui.label(format!("weights: {w}"));
    }
    let n = t.profile.spans.len();
    ui.strong(format!(
        "depth {}: {n} dispatches; the host records them in {:.3} ms ({:.1} µs a dispatch, unprofiled)",
        t.depth,
        t.host_ms,
        t.host_ms * 1e3 / n.max(1) as f64
    ));
    if t.ops.is_empty() {
        ui.label(format!(
            "no GPU timestamps on this adapter ({}): no timeline, op times only",
            t.profile.method
        ));
    } else {
        let (before, gap) = t.longest_gap().unwrap_or(("none", 0.0));
        ui.label(format!(
            "GPU elapsed {:.3} ms = busy {:.3} + gaps {:.3} (longest {:.1} µs, before {before}){}",
            t.elapsed_ms(),
            t.busy_ms(),
            t.gaps_ms(),
            gap * 1e3,
            match t.bound() {
                Some(bound) =>
                    format!(", the step recorded ahead of the GPU: the {bound} bounds this step"),
                None => ", the GPU waiting for the host's profiled recording".into(),
            }
        ));
        timeline_plot(ui, t);
    }
    op_table(ui, gpu, t, cal.as_deref());
}

/// The timeline: a row per op kind (the host's recording on the top row), each dispatch a
/// bar from its start to its end, ms from the step's first dispatch.
fn timeline_plot(ui: &mut egui::Ui, t: &DecodeTimeline) {
    let rows: Vec<String> = t.by_name().into_iter().map(|r| r.0).collect();
    let row_of =
        |name: &str| (rows.len() - rows.iter().position(|r| r == name).unwrap_or(0)) as f64;
    let names = rows.clone();
    let axis_names = move |y: f64| -> String {
        let i = names.len() as f64 - y;
        if y > names.len() as f64 + 0.5 {
            "host recording".into()
        } else if i >= -0.5 && (i.round() - i).abs() < 1e-6 && (i as usize) < names.len() {
            names[i as usize].clone()
        } else {
            String::new()
        }
    };
    let host = BarChart::new(
        "host recording (its own clock)",
        vec![Bar::new(rows.len() as f64 + 1.0, t.host_ms).width(0.6)],
    )
    .horizontal()
    .color(egui::Color32::GRAY);
    let charts: Vec<BarChart> = rows
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let bars = t
                .ops
                .iter()
                .filter(|o| &o.name == name)
                .map(|o| {
                    Bar::new(row_of(name), o.ms)
                        .base_offset(o.start_ms)
                        .width(0.6)
                        .name(format!(
                            "{name}: {:.1} µs at {:.3} ms, {:.1} µs idle before",
                            o.ms * 1e3,
                            o.start_ms,
                            o.gap_ms * 1e3
                        ))
                })
                .collect();
            BarChart::new(name.clone(), bars)
                .horizontal()
                .color(PALETTE[k % PALETTE.len()])
        })
        .collect();
    Plot::new("decode-timeline")
        .height(260.0)
        .legend(Legend::default())
        .x_axis_label("ms from the step's first dispatch")
        .y_axis_formatter(move |mark, _| axis_names(mark.value))
        .allow_scroll(false)
        .show(ui, |plot| {
            plot.bar_chart(host);
            for c in charts {
                plot.bar_chart(c);
            }
        });
}

/// GPU time and gaps per op against the roofline's prediction of Ridge's plan for the step
/// (this adapter's ceilings) and the calibrated model's (`cal`'s fitted terms).
fn op_table(ui: &mut egui::Ui, gpu: &Gpu, t: &DecodeTimeline, cal: Option<&Calibrated>) {
    let f16 = t.dtype == DType::F16;
    let roof = |kind: &str| gpu.ceilings_for(kind, f16).map(|c| c.0);
    let predicted: Vec<Option<f64>> = t
        .plan
        .iter()
        .map(|op| roof(op.kind()).map(|c| c.predict(&op.cost).seconds * 1e3))
        .collect();
    let calibrated = cal.zip(roof("qmatvec")).map(|(cal, fallback)| {
        price_ops(&t.plan, cal, &t.dtype.to_string(), |kind| {
            roof(kind).unwrap_or_else(|| fallback.clone())
        })
    });
    let gaps = t.by_name();
    ui.heading("GPU time per op");
    egui::Grid::new("decode-ops").striped(true).show(ui, |ui| {
        let heads = [
            "",
            "dispatches",
            "measured",
            "idle before",
            "predicted",
            "measured ÷ predicted",
        ];
        super::header_row(ui, &heads, calibrated.is_some());
        let rows = t.profile.by_name();
        let total_ms = rows.iter().map(|r| r.2).sum::<Option<f64>>();
        let all = |name: &str| name == "total";
        let mine = |name: &str| plan_ops(t, name).collect::<Vec<usize>>();
        for (name, count, ms) in rows.iter().map(|(n, c, m)| (n.as_str(), *c, *m)).chain([(
            "total",
            t.profile.spans.len(),
            total_ms,
        )]) {
            let p = mine(name)
                .into_iter()
                .map(|i| predicted[i])
                .sum::<Option<f64>>();
            let gap = if all(name) {
                Some(t.gaps_ms())
            } else {
                gaps.iter().find(|g| g.0 == name).map(|g| g.3)
            };
            ui.label(name);
            ui.label(count.to_string());
            ui.label(super::ms(ms));
            ui.label(super::ms(gap.filter(|_| !t.ops.is_empty())));
            ui.label(super::ms(p));
            super::transformer::ratio_label(ui, ms, p);
            if let Some(prices) = &calibrated {
                if !all(name) && mine(name).into_iter().all(|i| prices[i].folded) {
                    ui.label("with the split kernel");
                    ui.label("");
                } else {
                    let c: f64 = mine(name)
                        .into_iter()
                        .map(|i| prices[i].seconds * 1e3)
                        .sum();
                    let fitted = mine(name).into_iter().all(|i| prices[i].fitted);
                    ui.label(format!(
                        "{}{}",
                        super::ms(Some(c)),
                        if fitted { "" } else { " ~" }
                    ));
                    super::transformer::ratio_label(ui, ms, Some(c));
                }
            }
            ui.end_row();
        }
    });
    ui.label(match cal {
        Some(cal) => format!(
            "predicted: the roofline on this adapter's ceilings, each dispatch a lone one; {} (~: a kind its sweep lacks, priced by the roofline)",
            super::transformer::calibrated_source(cal)
        ),
        None => "predicted: the roofline on this adapter's ceilings, each dispatch a lone one".into(),
    });
}

/// The indices of `t`'s planned ops named `name` (every one for `total`).
fn plan_ops<'a>(t: &'a DecodeTimeline, name: &'a str) -> impl Iterator<Item = usize> + 'a {
    (0..t.plan.len()).filter(move |&i| name == "total" || t.plan[i].name == name)
}
