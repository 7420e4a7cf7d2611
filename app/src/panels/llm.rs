//! LLMs: a decoder on any GPU of the spec table — prefill and decode tokens/s, time to first
//! token and whether it fits; the roofline lesson (prefill's products are compute-bound,
//! decode's at batch 1 memory-bound, and a larger batch walks decode toward the ridge point);
//! and the model's predictions against every published measurement, with the y = x line
//! and a ±20 % band, vendors coloured.

use ridge_model::decoder::memory::{DecoderMemory, usable_bytes};
use ridge_model::decoder::phase::{Step, step_ops};
use ridge_model::decoder::predict::{self, Checked, Phase};
use ridge_model::decoder::{DecoderShape, ModelWeights, Quant};
use ridge_model::hardware::{self, Precision};

use crate::plot::{self, PALETTE, Roof, RunPoint, Series};

/// The what-if knobs.
pub struct State {
    /// Decoder preset.
    pub model: String,
    /// Weight format or mix.
    pub quant: String,
    /// The GPU, by spec-table name.
    pub gpu: String,
    /// llama.cpp's backend whose fitted terms price it, or `any` (the vendor's terms).
    pub backend: String,
    /// Prompt tokens.
    pub prompt: usize,
    /// Generated tokens.
    pub generate: usize,
    /// Sequences per batch.
    pub batch: usize,
    /// The published rows with their predictions (computed once, not every frame).
    published: Option<Vec<Checked>>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            model: "llama-3-8b".into(),
            quant: "Q4_K_M".into(),
            gpu: "NVIDIA GeForce RTX 4090".into(),
            backend: ANY_BACKEND.into(),
            prompt: 512,
            generate: 128,
            batch: 1,
            published: None,
        }
    }
}

/// The backend choice that prices a GPU by its vendor's terms over all backends.
const ANY_BACKEND: &str = "any backend";

/// Vendors' colours on the published-rows plot.
fn vendor_color(v: &str) -> egui::Color32 {
    match v {
        "NVIDIA" => PALETTE[2],
        "AMD" => PALETTE[1],
        "Apple" => PALETTE[5],
        "Intel" => PALETTE[0],
        _ => PALETTE[4],
    }
}

/// The published rows as one series per vendor: x published, y predicted tokens/s.
pub fn published_series(checked: &[Checked]) -> Vec<Series> {
    let mut vendors: Vec<&str> = checked.iter().map(|c| c.vendor.as_str()).collect();
    vendors.sort();
    vendors.dedup();
    vendors
        .into_iter()
        .map(|v| Series {
            name: v.into(),
            color: vendor_color(v),
            points: checked
                .iter()
                .filter(|c| c.vendor == v)
                .map(|c| {
                    let r = &c.row;
                    RunPoint {
                        intensity: r.tokens_per_s,
                        gflops: c.predicted,
                        text: format!(
                            "{} ({})\n{} {} {}\npublished {:.1} tokens/s, predicted {:.1} ({:+.0} %)\n{}",
                            r.gpu,
                            r.backend,
                            r.model,
                            r.quant,
                            r.test,
                            r.tokens_per_s,
                            c.predicted,
                            100.0 * (c.ratio() - 1.0),
                            r.source
                        ),
                        times: None,
                    }
                })
                .collect(),
        })
        .collect()
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut State) {
    let table = hardware::table();
    ui.horizontal(|ui| {
        egui::ComboBox::from_label("model")
            .selected_text(&state.model)
            .show_ui(ui, |ui| {
                for p in DecoderShape::presets() {
                    ui.selectable_value(&mut state.model, p.name.clone(), &p.name);
                }
            });
        egui::ComboBox::from_label("weights")
            .selected_text(&state.quant)
            .show_ui(ui, |ui| {
                for q in Quant::names() {
                    ui.selectable_value(&mut state.quant, q.to_string(), q);
                }
            });
        egui::ComboBox::from_label("GPU")
            .selected_text(&state.gpu)
            .show_ui(ui, |ui| {
                for g in &table {
                    ui.selectable_value(&mut state.gpu, g.name.clone(), &g.name);
                }
            });
        egui::ComboBox::from_label("llama.cpp backend")
            .selected_text(&state.backend)
            .show_ui(ui, |ui| {
                for b in std::iter::once(ANY_BACKEND).chain(predict::BACKENDS) {
                    ui.selectable_value(&mut state.backend, b.to_string(), b);
                }
            });
    });
    let (Some(shape), Some(quant), Some(gpu)) = (
        DecoderShape::preset(&state.model),
        Quant::parse(&state.quant),
        table.iter().find(|g| g.name == state.gpu),
    ) else {
        ui.label("pick a model, a format and a GPU");
        return;
    };
    let most = shape.context;
    ui.add(
        egui::Slider::new(&mut state.prompt, 1..=most)
            .logarithmic(true)
            .text("prompt tokens"),
    );
    ui.add(
        egui::Slider::new(&mut state.generate, 1..=most)
            .logarithmic(true)
            .text("generated tokens"),
    );
    ui.add(
        egui::Slider::new(&mut state.batch, 1..=256)
            .logarithmic(true)
            .text("batch"),
    );
    state.generate = state.generate.min(most.saturating_sub(state.prompt).max(1));
    let w = ModelWeights::of(&shape, quant);
    let p = predict::predict(
        &shape,
        &w,
        gpu,
        Some(state.backend.as_str()).filter(|b| *b != ANY_BACKEND),
        state.batch,
        state.prompt,
        state.generate,
    );
    let context = state.prompt + state.generate;
    let mem = DecoderMemory::of(&shape, &w, state.batch, context);
    let budget = usable_bytes(gpu);
    egui::Grid::new("llm-figures").striped(true).show(ui, |ui| {
        for (k, v) in [
            (
                "prefill",
                format!(
                    "{:.0} tokens/s ({:.0} on the bare roofline)",
                    p.prefill.tokens_per_s, p.prefill.roofline_tokens_per_s
                ),
            ),
            (
                "decode",
                format!(
                    "{:.1} tokens/s ({:.1} on the bare roofline)",
                    p.decode.tokens_per_s, p.decode.roofline_tokens_per_s
                ),
            ),
            (
                "time to first token",
                format!("{:.1} ms", 1e3 * p.time_to_first_token_s),
            ),
            (
                "memory",
                format!(
                    "{:.2} GB weights + {:.2} GB KV cache + {:.2} GB activations = {:.2} GB{}",
                    mem.weights / 1e9,
                    mem.kv_cache / 1e9,
                    mem.activations / 1e9,
                    mem.total() / 1e9,
                    match budget {
                        Some(b) if mem.total() <= b =>
                            format!(": fits the {:.1} GB usable", b / 1e9),
                        Some(b) => format!(": does NOT fit the {:.1} GB usable", b / 1e9),
                        None => String::new(),
                    }
                ),
            ),
            ("efficiency terms", p.efficiency.to_string()),
        ] {
            ui.label(k);
            ui.label(v);
            ui.end_row();
        }
    });
    ui.columns(2, |cols| {
        let ui = &mut cols[0];
        ui.strong("One layer's ops: prefill and decode on the roofline");
        let ceilings = gpu.ceilings(Precision::F16);
        let layer = |tokens: usize, past: usize| -> Vec<RunPoint> {
            step_ops(
                &shape,
                &w,
                Step {
                    batch: state.batch,
                    tokens,
                    past,
                },
            )
            .into_iter()
            .filter(|o| o.scope == "layer 0" && o.cost.flops > 0.0)
            .map(|o| {
                let intensity = o.cost.flops / o.cost.bytes.max(1.0);
                RunPoint {
                    intensity,
                    gflops: ceilings.attainable(intensity) / 1e9,
                    text: format!(
                        "{}: {intensity:.2} FLOP/byte, {}-bound",
                        o.name,
                        ceilings.predict(&o.cost).bound
                    ),
                    times: None,
                }
            })
            .collect()
        };
        plot::roofline(
            ui,
            "llm-roofline",
            &[Roof {
                name: format!("{} f16", gpu.name),
                ceilings: ceilings.clone(),
                color: PALETTE[0],
            }],
            &[
                Series {
                    name: format!("prefill of {}", state.prompt),
                    color: PALETTE[3],
                    points: layer(state.prompt, 0),
                },
                Series {
                    name: format!("decode, batch {}", state.batch),
                    color: PALETTE[1],
                    points: layer(1, state.prompt),
                },
            ],
        );
        let ui = &mut cols[1];
        let checked = state.published.get_or_insert_with(predict::check_published);
        let median = |phase: Phase| {
            predict::median_error(checked.iter().filter(|c| c.phase == phase))
                .map_or("n/a".into(), |e| format!("{:.0} %", 100.0 * e))
        };
        ui.strong(format!(
            "Predicted against {} published rates: median error decode {}, prefill {}",
            checked.len(),
            median(Phase::Decode),
            median(Phase::Prefill)
        ));
        let (lo, hi) = (0.0, 5.0);
        let band = |f: f64| vec![[lo, lo + f.log10()], [hi, hi + f.log10()]];
        plot::scatter(
            ui,
            "llm-published",
            ["published tokens/s", "predicted tokens/s"],
            &[
                ("y = x".into(), egui::Color32::GRAY, band(1.0)),
                ("+20 %".into(), egui::Color32::DARK_GRAY, band(1.2)),
                ("−20 %".into(), egui::Color32::DARK_GRAY, band(0.8)),
            ],
            &published_series(checked),
        );
    });
}
