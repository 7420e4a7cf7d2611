//! Compare: `ridge bench --json` reports from several machines on one roofline, each with its
//! measured roof, and a table of their ceilings and model accuracy. The H200 and lavapipe
//! reports ship as examples; drop more files on the window (or give a path natively).

use ridge_model::report::BenchReport;

use crate::plot::{self, PALETTE, Roof, RunPoint, Series};

/// A dropped file's name and its bytes (or why they could not be read).
#[cfg(target_arch = "wasm32")]
type DroppedBytes = (String, Result<Vec<u8>, String>);

/// Loaded reports: (name, report, shown).
#[derive(Default)]
pub struct State {
    /// The reports.
    pub reports: Vec<(String, BenchReport, bool)>,
    /// A path to load (native).
    pub path: String,
    /// Why the last load failed.
    pub error: Option<String>,
    #[cfg(target_arch = "wasm32")]
    reading: Option<crate::tasks::Task<Vec<DroppedBytes>>>,
}

const EXAMPLES: [(&str, &str); 3] = [
    (
        "NVIDIA H200 (Vulkan)",
        include_str!("../../../benches/reports/h200.json"),
    ),
    (
        "lavapipe (Vulkan on the CPU)",
        include_str!("../../../benches/reports/lavapipe.json"),
    ),
    (
        "llvmpipe (OpenGL on the CPU)",
        include_str!("../../../benches/reports/llvmpipe.json"),
    ),
];

impl State {
    /// The shipped example reports, all shown.
    pub fn with_examples() -> Self {
        let mut s = Self::default();
        for (name, json) in EXAMPLES {
            s.add(name, json.as_bytes());
        }
        s
    }

    /// Parses and adds a report; a bad file sets [`State::error`].
    pub fn add(&mut self, name: &str, bytes: &[u8]) {
        match BenchReport::parse(bytes) {
            Ok(r) => {
                self.reports.push((name.to_string(), r, true));
                self.error = None;
            }
            Err(e) => self.error = Some(format!("{name}: {e}")),
        }
    }
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut State) {
    let dropped = ui.ctx().input(|i| i.raw.dropped_files.clone());
    #[cfg(not(target_arch = "wasm32"))]
    for file in dropped {
        let name = file.path().display().to_string();
        match file.bytes() {
            Ok(b) => state.add(&name, &b),
            Err(e) => state.error = Some(format!("{name}: {e}")),
        }
    }
    // Browsers read dropped files asynchronously.
    #[cfg(target_arch = "wasm32")]
    if !dropped.is_empty() {
        state.reading = Some(crate::tasks::spawn(ui.ctx(), move || async move {
            let mut out = Vec::new();
            for f in dropped {
                out.push((f.path().display().to_string(), f.bytes_async().await));
            }
            out
        }));
    }
    #[cfg(target_arch = "wasm32")]
    if let Some(files) = state.reading.as_ref().and_then(crate::tasks::Task::take) {
        state.reading = None;
        for (name, bytes) in files {
            match bytes {
                Ok(b) => state.add(&name, &b),
                Err(e) => state.error = Some(format!("{name}: {e}")),
            }
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    ui.horizontal(|ui| {
        let label = ui.label("report:");
        ui.text_edit_singleline(&mut state.path)
            .labelled_by(label.id);
        if ui.button("Load").clicked() {
            // An empty field names what is missing, not an OS error about "".
            let read = if state.path.trim().is_empty() {
                Err(
                    "give the path of a `ridge bench --json` report to load, or drop one on \
                     the window"
                        .to_string(),
                )
            } else {
                std::fs::read(&state.path).map_err(|e| format!("{}: {e}", state.path))
            };
            match read {
                Ok(b) => {
                    let name = state.path.clone();
                    state.add(&name, &b);
                }
                Err(e) => state.error = Some(e),
            }
        }
    });
    ui.small("Drop `ridge bench --json` files on the window to add them.");
    if let Some(e) = &state.error {
        ui.colored_label(egui::Color32::RED, e);
    }
    egui::Grid::new("reports").striped(true).show(ui, |ui| {
        for h in [
            "",
            "adapter",
            "copy GB/s",
            "f32 TFLOP/s",
            "runs",
            "model error (memory-bound)",
            "model error (compute-bound)",
            "calibrated, held out",
        ] {
            ui.strong(h);
        }
        ui.end_row();
        for (i, (name, r, shown)) in state.reports.iter_mut().enumerate() {
            ui.checkbox(shown, "").on_hover_text(name.as_str());
            ui.colored_label(
                PALETTE[i % PALETTE.len()],
                format!("{} ({})", r.adapter, r.backend),
            );
            ui.label(format!("{:.1}", r.measured.bandwidth_gbps));
            ui.label(format!("{:.2}", r.measured.f32_tflops));
            ui.label(r.rows.len().to_string());
            // Median |log2(measured ÷ predicted)| as a factor.
            for e in [r.accuracy_measured.memory, r.accuracy_measured.compute] {
                ui.label(e.map_or("—".into(), |e| format!("{:.2}×", e.exp2())));
            }
            ui.label(
                r.calibration
                    .as_ref()
                    .and_then(|c| c.median_held_out())
                    .map_or("—".into(), |e| format!("{e:.2}× (median of op kinds)")),
            )
            .on_hover_text(
                "Each run predicted by the roofline plus its op kind's fraction of the roof and \
                 fixed cost, fitted on the report's other runs (ridge bench prints them per kind)",
            );
            ui.end_row();
        }
    });
    let mut roofs = Vec::new();
    let mut series = Vec::new();
    for (i, (_, r, shown)) in state.reports.iter().enumerate() {
        if !*shown {
            continue;
        }
        let color = PALETTE[i % PALETTE.len()];
        // The backend too: one CPU driver answers as the same adapter on Vulkan and on GL, and
        // a legend merges series of one name.
        let label = format!("{} ({})", r.adapter, r.backend);
        roofs.push(Roof {
            name: format!("{label} roof"),
            ceilings: r.measured_ceilings.clone(),
            color,
        });
        // Its f16 GEMMs ran on the tensor cores: their roof, so they are not drawn above
        // the f32 one with no roof of their own.
        if let Some(c) = r.measured.tensor_ceilings() {
            roofs.push(Roof {
                name: format!("{label} tensor-core roof"),
                ceilings: c,
                color,
            });
        }
        let points = r
            .rows
            .iter()
            .filter_map(|row| {
                let prefix = format!("{label}: ");
                let roof = r.measured.roof_for(&row.op, row.dtype == "f16");
                super::report_point(&prefix, row, Some(roof)).map(|(_, p)| p)
            })
            .collect::<Vec<RunPoint>>();
        series.push(Series {
            name: label,
            color,
            points,
        });
    }
    plot::roofline(ui, "compare", &roofs, &series);
}
