//! Transformer: all-MiniLM-L6-v2 on Ridge's kernels. Type sentences, get their embeddings'
//! cosine-similarity table, and the GPU time of the pass per op and per layer next to the
//! performance model's prediction for the same dispatches (`ridge_model::transformer::
//! encoder_ops`, priced with this adapter's ceilings), and where a `ridge bench` report of
//! this adapter is at hand (the replayed one, or one of Compare's whose adapter and backend
//! are this one's) the calibrated model's: each op priced by that report's fitted terms
//! (`ridge_model::calibrate`).

use std::sync::Arc;

use ridge_model::calibrate::Calibrated;
use ridge_model::report::BenchReport;
use ridge_model::transformer::{TransformerShape, encoder_ops, encoder_ops_split};
use ridge_nn::SentenceEmbedder;

use crate::Gpu;
use crate::tasks::{self, Sink, Stream, Task};

/// Sentences per pass: a pass at a time, so the canvas presents between passes (in the
/// browser a 32-sentence pass held the page for 8.8 s on SwiftShader) and Cancel can stop
/// between them.
pub const SENTENCES_PER_PASS: usize = 8;
/// Sentences one Embed takes.
pub const MAX_SENTENCES: usize = 128;

/// Embeddings of one pass and its profile.
pub struct Embedded {
    /// The sentences.
    pub texts: Vec<String>,
    /// One embedding per sentence.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens per sequence after padding (the longest sentence).
    pub seq: usize,
    /// Each pass's sentences and padded tokens per sentence.
    pub passes: Vec<(usize, usize)>,
    /// Measured GPU time per op: (name, dispatches, ms).
    pub by_name: Vec<(String, usize, Option<f64>)>,
    /// Measured GPU time per scope (embeddings, layer.0 … layer.5, pooling).
    pub by_scope: Vec<(String, usize, Option<f64>)>,
}

/// The panel's state.
pub struct State {
    /// The sentences, one per line.
    pub text: String,
    /// The loaded model.
    pub model: Option<Arc<SentenceEmbedder>>,
    /// The last pass.
    pub result: Option<Embedded>,
    /// Why loading or embedding failed.
    pub error: Option<String>,
    /// Sentences embedded so far of the running pass's, and their count.
    pub progress: (usize, usize),
    /// The last embedding was cancelled.
    pub cancelled: bool,
    loading: Option<Task<Result<SentenceEmbedder, String>>>,
    running: Option<Stream<Progress>>,
    /// The report whose terms price the calibrated column (a key naming it) and its fit.
    calibrated: Option<(String, Arc<Calibrated>)>,
    /// Where the panel's action button (Load, else Embed) and the sentences' field were
    /// drawn last (centres, points): published in the status for scripts that drive the
    /// page (the browser test).
    action_at: Option<egui::Pos2>,
    text_at: Option<egui::Pos2>,
}

/// What an embedding task reports: sentences done, then its result (`None` when cancelled).
pub enum Progress {
    /// Sentences embedded so far.
    Done(usize),
    /// The whole result.
    Finished(Result<Option<Embedded>, String>),
}

impl Default for State {
    fn default() -> Self {
        Self {
            text: "A man is playing a guitar.\nSomeone plays an instrument.\nThe stock market fell sharply today.\nShares dropped at the close of trading.".into(),
            model: None,
            result: None,
            error: None,
            progress: (0, 0),
            cancelled: false,
            loading: None,
            running: None,
            calibrated: None,
            action_at: None,
            text_at: None,
        }
    }
}

impl State {
    /// Whether the model is loading or a pass is running.
    pub fn busy(&self) -> bool {
        self.loading.is_some() || self.running.is_some()
    }

    /// The field's sentences: its non-empty lines, trimmed, at most [`MAX_SENTENCES`].
    pub fn sentences(&self) -> Vec<String> {
        self.text
            .lines()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .take(MAX_SENTENCES)
            .map(String::from)
            .collect()
    }

    /// The panel's state for scripts (the dashboard's status JSON): the model loaded, a
    /// task running, sentences embedded of the running or last pass, the last result's
    /// sentences, the field's, the error, and where the action button and the field are.
    pub fn status(&self) -> serde_json::Value {
        let at = |p: Option<egui::Pos2>| p.map(|p| [p.x, p.y]);
        serde_json::json!({
            "loaded": self.model.is_some(),
            "busy": self.busy(),
            "embedded": self.progress.0,
            "total": self.progress.1,
            "result": self.result.as_ref().map(|r| r.texts.len()),
            "sentences": self.sentences().len(),
            "error": self.error,
            "action_at": at(self.action_at),
            "text_at": at(self.text_at),
        })
    }

    /// Collects finished work.
    pub fn poll(&mut self) {
        if let Some(r) = self.loading.as_ref().and_then(Task::take) {
            self.loading = None;
            match r {
                Ok(m) => self.model = Some(Arc::new(m)),
                Err(e) => self.error = Some(e),
            }
        }
        let Some(stream) = &self.running else { return };
        let finished = stream.finished();
        for event in stream.drain() {
            match event {
                Progress::Done(n) => self.progress.0 = n,
                Progress::Finished(Ok(Some(e))) => self.result = Some(e),
                Progress::Finished(Ok(None)) => self.cancelled = true,
                Progress::Finished(Err(e)) => self.error = Some(e),
            }
        }
        if finished {
            self.running = None;
        }
    }
}

/// The model files: the local cache natively, `model/` next to the page in the browser.
#[cfg(not(target_arch = "wasm32"))]
async fn load(ctx: &ridge_core::Context) -> Result<SentenceEmbedder, String> {
    let dir = ridge_nn::fetch::minilm_dir();
    SentenceEmbedder::load(ctx, &dir)
        .map_err(|e| format!("{e} (run `cargo xtask fetch-model` first)"))
}

#[cfg(target_arch = "wasm32")]
async fn load(ctx: &ridge_core::Context) -> Result<SentenceEmbedder, String> {
    let base = web_sys::window()
        .and_then(|w| w.location().href().ok())
        .and_then(|href| href.rsplit_once('/').map(|(b, _)| format!("{b}/model/")))
        .ok_or("no page location")?;
    let mut files = ridge_nn::ModelFiles {
        base: base.clone(),
        files: Default::default(),
    };
    for name in ridge_nn::source::MODEL_FILES {
        if let Some(bytes) = fetch(&format!("{base}{name}")).await? {
            files.files.insert(name.into(), bytes);
        }
    }
    SentenceEmbedder::from_source(ctx, &files).map_err(|e| e.to_string())
}

/// The bytes at `url`; `None` for a 404.
#[cfg(target_arch = "wasm32")]
async fn fetch(url: &str) -> Result<Option<Vec<u8>>, String> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let fail = |e: wasm_bindgen::JsValue| format!("{url}: {e:?}");
    let window = web_sys::window().ok_or("no window")?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str(url))
        .await
        .map_err(fail)?
        .dyn_into()
        .map_err(fail)?;
    if response.status() == 404 {
        return Ok(None);
    }
    if !response.ok() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(fail)?)
        .await
        .map_err(fail)?;
    Ok(Some(js_sys::Uint8Array::new(&buffer).to_vec()))
}

/// The fitted terms of a `ridge bench` report of this adapter: the replayed report, else
/// the first of `reports` (Compare's) whose adapter and backend are the live adapter's.
/// Fitted once per report (`cache`).
pub(super) fn calibration(
    gpu: &Gpu,
    reports: &[(String, BenchReport, bool)],
    cache: &mut Option<(String, Arc<Calibrated>)>,
) -> Option<Arc<Calibrated>> {
    let report = gpu.replayed.as_ref().or_else(|| {
        let info = gpu.ctx.as_ref()?.info();
        reports
            .iter()
            .map(|(_, r, _)| r)
            .find(|r| r.adapter == info.name && r.backend == info.backend.to_str())
    })?;
    let key = format!("{} {} {}", report.adapter, report.driver, report.rows.len());
    if cache.as_ref().is_none_or(|(k, _)| *k != key) {
        *cache = Some((key, Arc::new(Calibrated::new(report.clone()))));
    }
    cache.as_ref().map(|(_, c)| c.clone())
}

/// An f32 forward's `plan` ops picked by `pick`, priced by the calibrated model (ms; a GEMM
/// split along K as one launch of its kind; ops of a kind the report did not time at the
/// roofline `roof`).
fn calibrated_ms<'a>(
    cal: &Calibrated,
    roof: &ridge_model::Ceilings,
    ops: impl Iterator<Item = &'a ridge_model::transformer::PlannedOp>,
) -> f64 {
    ops.map(|op| cal.price_planned(op, "f32", roof).0 * 1e3)
        .sum()
}

/// What the calibrated column is priced by: the report's adapter and its runs.
pub(super) fn calibrated_source(cal: &Calibrated) -> String {
    format!(
        "calibrated: each op priced by the fitted terms of the {} report ({} runs)",
        cal.report.adapter,
        cal.report.rows.len()
    )
}

/// Draws the panel. `reports`: Compare's, searched for one of this adapter.
pub fn show(
    ui: &mut egui::Ui,
    gpu: &Gpu,
    state: &mut State,
    reports: &[(String, BenchReport, bool)],
    busy: bool,
) {
    let cal = calibration(gpu, reports, &mut state.calibrated);
    let Some(ctx) = gpu.ctx.clone() else {
        ui.label("no adapter: the model's prediction only");
        predicted_breakdown(ui, gpu, cal.as_deref());
        return;
    };
    if let Some(e) = &state.error {
        ui.colored_label(egui::Color32::RED, e);
    }
    let Some(model) = state.model.clone() else {
        if state.loading.is_some() {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("loading all-MiniLM-L6-v2 and uploading its weights…");
            });
        } else {
            let button = ui.add_enabled(!busy, egui::Button::new("Load all-MiniLM-L6-v2"));
            state.action_at = Some(button.rect.center());
            if button.clicked() {
                state.error = None;
                state.loading = Some(tasks::spawn(
                    ui.ctx(),
                    move || async move { load(&ctx).await },
                ));
            }
        }
        predicted_breakdown(ui, gpu, cal.as_deref());
        return;
    };
    let label = ui.label(format!(
        "Sentences, one per line (at most {MAX_SENTENCES}):"
    ));
    let field = ui
        .text_edit_multiline(&mut state.text)
        .labelled_by(label.id);
    state.text_at = Some(field.rect.center());
    ui.horizontal(|ui| {
        let button = ui.add_enabled(!busy, egui::Button::new("Embed"));
        state.action_at = Some(button.rect.center());
        if button.clicked() {
            let texts = state.sentences();
            if !texts.is_empty() {
                state.error = None;
                state.cancelled = false;
                state.progress = (0, texts.len());
                state.running = Some(tasks::spawn_stream(ui.ctx(), move |sink| async move {
                    let r = embed(&ctx, &model, texts, &sink).await;
                    sink.send(Progress::Finished(r.map_err(|e| e.to_string())));
                }));
            }
        }
        if let Some(stream) = &state.running {
            ui.spinner();
            ui.label(format!(
                "{} of {} sentences embedded",
                state.progress.0, state.progress.1
            ));
            if stream.cancelling() {
                ui.label("stopping after this pass…");
            } else if ui.button("Cancel").clicked() {
                stream.cancel();
            }
        } else if state.cancelled {
            ui.label(format!(
                "cancelled after {} of {} sentences",
                state.progress.0, state.progress.1
            ));
        }
    });
    let Some(r) = &state.result else { return };
    egui::ScrollArea::vertical().show(ui, |ui| {
        ui.heading("Cosine similarity");
        egui::Grid::new("similarity").striped(true).show(ui, |ui| {
            ui.label("");
            for j in 0..r.texts.len() {
                ui.strong(format!("#{}", j + 1));
            }
            ui.end_row();
            for (i, a) in r.vectors.iter().enumerate() {
                ui.label(format!("#{} {}", i + 1, r.texts[i]));
                for b in &r.vectors {
                    ui.label(format!("{:.3}", ridge_nn::cosine(a, b)));
                }
                ui.end_row();
            }
        });
        // The prediction for the passes as they ran: each its own batch and padding, its
        // GEMMs split along K where this adapter's kernel splits them (two dispatches).
        let planned = gpu
            .ctx
            .as_deref()
            .map(|ctx| ridge_kernels::Gemm::planned_splits(ctx, ridge_core::DType::F32));
        let splits = |m, n, k| planned.as_ref().map_or(1, |f| f(m, n, k));
        let plan: Vec<_> = r
            .passes
            .iter()
            .flat_map(|&(batch, seq)| {
                encoder_ops_split(
                    &TransformerShape::minilm_l6(),
                    batch,
                    seq,
                    model_normalizes(state),
                    4,
                    &splits,
                )
            })
            .collect();
        let c = gpu.best_ceilings();
        type Pick<'a> = &'a dyn Fn(&ridge_model::transformer::PlannedOp) -> bool;
        let predicted = |pick: Pick| {
            c.as_ref().map(|c| {
                plan.iter()
                    .filter(|p| pick(p))
                    .map(|p| c.predict(&p.cost).seconds * 1e3)
                    .sum::<f64>()
            })
        };
        let calibrated = |pick: Pick| {
            cal.as_deref()
                .zip(c.as_ref())
                .map(|(cal, c)| calibrated_ms(cal, c, plan.iter().filter(|p| pick(p))))
        };
        for (title, rows, by_scope) in [
            ("GPU time per op", &r.by_name, false),
            ("GPU time per layer", &r.by_scope, true),
        ] {
            ui.heading(format!(
                "{title} ({} sentences of up to {} tokens, {} {})",
                r.texts.len(),
                r.seq,
                r.passes.len(),
                if r.passes.len() == 1 {
                    "pass"
                } else {
                    "passes"
                }
            ));
            let table: Vec<TimeRow> = rows
                .iter()
                .map(|(name, count, ms)| {
                    let mine = |op: &ridge_model::transformer::PlannedOp| {
                        if by_scope {
                            op.scope == *name
                        } else {
                            op.name == *name
                        }
                    };
                    (name, *count, *ms, predicted(&mine), calibrated(&mine))
                })
                .collect();
            let total =
                |f: &dyn Fn(&TimeRow) -> Option<f64>| table.iter().map(f).sum::<Option<f64>>();
            let (measured, predicted, calibrated) =
                (total(&|t| t.2), total(&|t| t.3), total(&|t| t.4));
            egui::Grid::new(title).striped(true).show(ui, |ui| {
                let heads = [
                    "",
                    "dispatches",
                    "measured",
                    "predicted",
                    "measured ÷ predicted",
                ];
                super::header_row(ui, &heads, cal.is_some());
                let count: usize = table.iter().map(|t| t.1).sum();
                for (name, count, ms, p, cp) in table
                    .iter()
                    .map(|&(n, c, m, p, cp)| (n.as_str(), c, m, p, cp))
                    .chain([("total", count, measured, predicted, calibrated)])
                {
                    ui.label(name);
                    ui.label(count.to_string());
                    ui.label(super::ms(ms));
                    ui.label(super::ms(p));
                    ratio_label(ui, ms, p);
                    if cal.is_some() {
                        ui.label(super::ms(cp));
                        ratio_label(ui, ms, cp);
                    }
                    ui.end_row();
                }
            });
            if by_scope && let Some(cal) = &cal {
                ui.label(format!(
                    "predicted: the roofline on this adapter's ceilings; {}",
                    calibrated_source(cal)
                ));
            }
            if !by_scope {
                if let Some(ms) = measured {
                    ui.label(format!(
                        "{} sentences in {ms:.3} ms of GPU time: {:.0} sentences/s",
                        r.texts.len(),
                        r.texts.len() as f64 / (ms * 1e-3)
                    ));
                }
                bars(ui, &table);
            }
        }
    });
}

/// One row of a time table: (name, dispatches, measured ms, predicted ms, calibrated ms).
type TimeRow<'a> = (&'a String, usize, Option<f64>, Option<f64>, Option<f64>);

/// measured ÷ predicted, red when the model is off by more than 2× either way.
pub(super) fn ratio_label(ui: &mut egui::Ui, measured: Option<f64>, predicted: Option<f64>) {
    match measured.zip(predicted).filter(|(_, p)| *p > 0.0) {
        Some((m, p)) => {
            let r = m / p;
            let text = format!("{r:.2}×");
            if !(0.5..=2.0).contains(&r) {
                ui.colored_label(egui::Color32::from_rgb(230, 80, 80), text)
                    .on_hover_text("the model is off by more than 2× here");
            } else {
                ui.label(text);
            }
        }
        None => {
            ui.label("n/a");
        }
    }
}

/// Predicted (the roofline's, and the calibrated model's where there is one) and measured
/// time per op, side by side.
fn bars(ui: &mut egui::Ui, table: &[TimeRow]) {
    use egui_plot::{Bar, BarChart, Legend, Plot};
    let series = |offset: f64, pick: fn(&TimeRow) -> Option<f64>| {
        table
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                pick(t).map(|ms| {
                    Bar::new(i as f64 + offset, ms)
                        .width(0.25)
                        .name(t.0.as_str())
                })
            })
            .collect::<Vec<_>>()
    };
    let names: Vec<String> = table.iter().map(|t| t.0.clone()).collect();
    Plot::new("transformer-bars")
        .legend(Legend::default())
        .height(220.0)
        .y_axis_label("GPU time, ms")
        .x_axis_formatter(move |m, _| {
            let i = m.value.round();
            if (m.value - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .show(ui, |plot| {
            plot.bar_chart(
                BarChart::new("predicted (roofline)", series(-0.27, |t| t.3))
                    .color(crate::plot::PALETTE[0]),
            );
            if table.iter().any(|t| t.4.is_some()) {
                plot.bar_chart(
                    BarChart::new("calibrated", series(0.0, |t| t.4))
                        .color(crate::plot::PALETTE[2]),
                );
            }
            plot.bar_chart(
                BarChart::new("measured", series(0.27, |t| t.2)).color(crate::plot::PALETTE[3]),
            );
        });
}

/// Sentences per batch and tokens per sentence of the prediction shown before anything is
/// measured: the batch of issue 10's benchmark.
const PREDICTED_SHAPE: (usize, usize) = (32, 128);

/// Before a run: the model's predicted time of an all-MiniLM-L6-v2 forward pass per op,
/// from the adapter's ceilings (measured, else the spec table's), and from `cal`'s fitted
/// terms where there is a report of this adapter.
fn predicted_breakdown(ui: &mut egui::Ui, gpu: &Gpu, cal: Option<&Calibrated>) {
    let Some(c) = gpu.best_ceilings() else { return };
    let (batch, seq) = PREDICTED_SHAPE;
    let plan = encoder_ops(&TransformerShape::minilm_l6(), batch, seq, true, 4);
    // (op, dispatches, roofline ms, calibrated ms)
    let mut rows: Vec<(String, usize, f64, f64)> = Vec::new();
    for op in &plan {
        let ms = c.predict(&op.cost).seconds * 1e3;
        let cms = cal.map_or(0.0, |cal| calibrated_ms(cal, &c, std::iter::once(op)));
        match rows.iter_mut().find(|r| r.0 == op.name) {
            Some(r) => {
                r.1 += 1;
                r.2 += ms;
                r.3 += cms;
            }
            None => rows.push((op.name.clone(), 1, ms, cms)),
        }
    }
    let total: f64 = rows.iter().map(|r| r.2).sum();
    let calibrated_total: f64 = rows.iter().map(|r| r.3).sum();
    ui.heading(format!(
        "all-MiniLM-L6-v2, {batch} sentences × {seq} tokens, f32: predicted {total:.3} ms{}",
        if cal.is_some() {
            format!(" (roofline), {calibrated_total:.3} ms calibrated")
        } else {
            String::new()
        }
    ));
    if let Some(cal) = cal {
        ui.label(calibrated_source(cal));
    }
    egui::Grid::new("predicted-minilm")
        .striped(true)
        .show(ui, |ui| {
            let mut heads = vec!["op", "dispatches", "predicted", "share"];
            if cal.is_some() {
                heads.extend(["calibrated", "share"]);
            }
            for h in heads {
                ui.strong(h);
            }
            ui.end_row();
            for (name, count, ms, cms) in &rows {
                ui.label(name);
                ui.label(count.to_string());
                ui.label(super::ms(Some(*ms)));
                ui.label(format!("{:.1} %", 100.0 * ms / total));
                if cal.is_some() {
                    ui.label(super::ms(Some(*cms)));
                    ui.label(format!("{:.1} %", 100.0 * cms / calibrated_total));
                }
                ui.end_row();
            }
        });
}

fn model_normalizes(state: &State) -> bool {
    state.model.as_ref().is_some_and(|m| m.pipeline().normalize)
}

/// Embeds `texts` [`SENTENCES_PER_PASS`] at a time, profiled, reporting each pass to `sink`
/// and stopping between passes when it is cancelled (`Ok(None)`).
async fn embed(
    ctx: &ridge_core::Context,
    model: &SentenceEmbedder,
    texts: Vec<String>,
    sink: &Sink<Progress>,
) -> ridge_nn::Result<Option<Embedded>> {
    let lengths = texts
        .iter()
        .map(|t| model.tokenize(t).map(|ids| ids.len()))
        .collect::<ridge_nn::Result<Vec<_>>>()?;
    let passes: Vec<(usize, usize)> = lengths
        .chunks(SENTENCES_PER_PASS)
        .map(|c| (c.len(), c.iter().copied().max().unwrap_or(0)))
        .collect();
    ctx.start_profiling();
    let mut vectors = Vec::with_capacity(texts.len());
    for pass in texts.chunks(SENTENCES_PER_PASS) {
        if sink.cancelled() {
            break;
        }
        let refs: Vec<&str> = pass.iter().map(String::as_str).collect();
        match model.embed(ctx, &refs, refs.len()).await {
            Ok(v) => vectors.extend(v),
            Err(e) => {
                // The profile ends with the work, whatever became of it.
                let _ = ctx.finish_profiling().await;
                return Err(e);
            }
        }
        sink.send(Progress::Done(vectors.len()));
    }
    let profile = ctx.finish_profiling().await?;
    if vectors.len() < texts.len() {
        return Ok(None);
    }
    Ok(Some(Embedded {
        vectors,
        seq: passes.iter().map(|p| p.1).max().unwrap_or(0),
        passes,
        by_name: profile.by_name(),
        by_scope: profile.by_scope(),
        texts,
    }))
}
