//! Teach: a Transformer layer on any GPU of the spec table. Drag sequence length, width,
//! batch and precision and watch each op's arithmetic intensity move across the ridge point;
//! the widely quoted per-layer formulas sit beside the exact op-by-op count, with what each
//! one leaves out.

use ridge_model::hardware::{self, Precision};
use ridge_model::transformer::{
    InferenceMemory, LayerFlops, TransformerShape, encoder_ops, quoted_attention_flops,
    quoted_layer_flops,
};

use crate::plot::{self, PALETTE, Roof, RunPoint, Series};

/// The what-if knobs.
pub struct State {
    /// Tokens per sequence.
    pub seq: usize,
    /// Model width d.
    pub hidden: usize,
    /// Sequences per batch.
    pub batch: usize,
    /// f16 storage and the f16 roof instead of f32.
    pub f16: bool,
    /// The GPU, by spec-table name.
    pub gpu: String,
}

impl Default for State {
    fn default() -> Self {
        Self {
            seq: 128,
            hidden: 384,
            batch: 32,
            f16: false,
            gpu: "NVIDIA H200 SXM".into(),
        }
    }
}

impl State {
    /// One encoder layer of width `hidden` (heads of 64, FFN 4d), MiniLM's vocabulary.
    pub fn shape(&self) -> TransformerShape {
        let heads = (self.hidden / 64).max(1);
        TransformerShape {
            layers: 1,
            hidden: heads * 64,
            heads,
            kv_heads: heads,
            intermediate: 4 * heads * 64,
            vocab: 30522,
            max_positions: self.seq,
        }
    }
}

fn si(v: f64, unit: &str) -> String {
    let (s, p) = match v.abs() {
        x if x >= 1e12 => (v / 1e12, "T"),
        x if x >= 1e9 => (v / 1e9, "G"),
        x if x >= 1e6 => (v / 1e6, "M"),
        x if x >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    format!("{s:.2} {p}{unit}")
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut State) {
    let table = hardware::table();
    ui.horizontal(|ui| {
        egui::ComboBox::from_label("GPU")
            .selected_text(&state.gpu)
            .show_ui(ui, |ui| {
                for g in &table {
                    ui.selectable_value(&mut state.gpu, g.name.clone(), &g.name);
                }
            });
        ui.checkbox(&mut state.f16, "f16 (2-byte storage, f16 roof)");
    });
    ui.add(
        egui::Slider::new(&mut state.seq, 16..=8192)
            .logarithmic(true)
            .text("sequence length n"),
    );
    // Heads of 64: the width moves in steps of 64, so the slider shows the width counted.
    ui.add(
        egui::Slider::new(&mut state.hidden, 64..=8192)
            .logarithmic(true)
            .step_by(64.0)
            .text("width d"),
    );
    state.hidden = state.shape().hidden;
    ui.add(
        egui::Slider::new(&mut state.batch, 1..=256)
            .logarithmic(true)
            .text("batch"),
    );
    let Some(spec) = table.iter().find(|g| g.name == state.gpu).or(table.first()) else {
        ui.label("the spec table is empty");
        return;
    };
    let (precision, bytes) = if state.f16 {
        (Precision::F16, 2)
    } else {
        (Precision::F32, 4)
    };
    let ceilings = spec.ceilings(precision);
    let shape = state.shape();
    let (n, d) = (state.seq, shape.hidden);
    let exact = LayerFlops::of(&shape, n);
    let b = state.batch as f64;
    ui.columns(2, |cols| {
        let ui = &mut cols[0];
        ui.heading("One layer's forward FLOPs");
        egui::Grid::new("formulas").striped(true).show(ui, |ui| {
            for (name, v, what) in [
                (
                    "op by op (all matmuls + softmax)",
                    exact.total() * b,
                    "every multiply-add as 2, softmax 5 per score",
                ),
                (
                    "op by op, matmuls only",
                    exact.matmul() * b,
                    "what the closed forms count",
                ),
                (
                    "24·n·d² + 4·n²·d",
                    quoted_layer_flops(n, d) * b,
                    "Megatron-LM §5.1: matmuls, FFN = 4d",
                ),
                (
                    "8·n·d² + 4·n²·d",
                    quoted_attention_flops(n, d) * b,
                    "attention sublayer only, no FFN",
                ),
            ] {
                ui.label(name);
                ui.label(si(v, "FLOP"));
                ui.small(what);
                ui.end_row();
            }
        });
        // One layer's own weights (the embedding tables belong to no layer), its live
        // activations; an encoder keeps no KV cache (a decoder's is in `ridge predict`).
        let mem = InferenceMemory::of(&shape, state.batch, n, bytes);
        let weights = (shape.layer_params() * bytes) as f64;
        ui.heading("Inference memory (one layer)");
        egui::Grid::new("memory").striped(true).show(ui, |ui| {
            for (k, v) in [
                ("weights", weights),
                ("activations", mem.activations),
                ("total", weights + mem.activations),
            ] {
                ui.label(k);
                ui.label(si(v, "B"));
                ui.end_row();
            }
        });
        ui.small("an encoder keeps no KV cache: it attends over its own tokens in one pass");
        ui.label(format!(
            "{}: ridge point {:.1} FLOP/byte ({:.0} TFLOP/s ÷ {:.0} GB/s)",
            spec.name,
            ceilings.ridge_point(),
            ceilings.peak_flops / 1e12,
            ceilings.bandwidth / 1e9
        ));
        ui.small(&spec.source);
    });
    // The layer's own ops: the embeddings and pooling are not part of it.
    let plan: Vec<_> = encoder_ops(&shape, state.batch, n, false, bytes)
        .into_iter()
        .filter(|p| p.scope.starts_with("layer 0"))
        .collect();
    let points: Vec<RunPoint> = plan
        .iter()
        .map(|p| {
            let pred = ceilings.predict(&p.cost);
            let intensity = p.cost.flops / p.cost.bytes.max(1.0);
            RunPoint {
                intensity,
                gflops: ceilings.attainable(intensity) / 1e9,
                text: format!(
                    "{} ({})\n{} · {}\n{:.2} FLOP/byte, {}-bound\npredicted {:.4} ms",
                    p.name,
                    p.scope,
                    si(p.cost.flops, "FLOP"),
                    si(p.cost.bytes, "B"),
                    intensity,
                    pred.bound,
                    pred.seconds * 1e3
                ),
                times: None,
            }
        })
        .collect();
    let total_ms: f64 = plan
        .iter()
        .map(|p| ceilings.predict(&p.cost).seconds * 1e3)
        .sum();
    ui.label(format!(
        "predicted time of one layer: {total_ms:.4} ms (each op on the roof)"
    ));
    plot::roofline(
        ui,
        "teach",
        &[Roof {
            name: spec.name.clone(),
            ceilings,
            color: PALETTE[0],
        }],
        &[Series {
            name: "ops of one layer".into(),
            color: PALETTE[3],
            points,
        }],
    );
}
