//! Adapter: what the GPU is (info, features, limits, fingerprint) and its ceilings, from the
//! spec table (with its source) next to the ones Ridge measured; the bandwidth curve shows
//! the caches.

use egui_plot::{Line, Plot, PlotPoints};

use ridge_model::report::BenchReport;

use crate::Gpu;

/// The adapter's info, features and limits.
fn info(ui: &mut egui::Ui, report: &ridge_core::context::AdapterReport) {
    ui.heading(&report.name);
    egui::Grid::new("adapter-info")
        .striped(true)
        .show(ui, |ui| {
            let fp = &report.fingerprint;
            for (k, v) in [
                ("backend", report.backend.clone()),
                ("device type", report.device_type.clone()),
                (
                    "vendor / device id",
                    format!("0x{:04x} / 0x{:04x}", fp.vendor_id, fp.device_id),
                ),
                ("driver", fp.driver.clone()),
                ("features", report.features.join(", ")),
                (
                    "subgroup sizes",
                    format!("{}–{}", report.subgroup_size[0], report.subgroup_size[1]),
                ),
            ] {
                ui.label(k);
                ui.label(v);
                ui.end_row();
            }
            for (k, v) in &report.limits {
                ui.label(*k);
                ui.label(v.to_string());
                ui.end_row();
            }
        });
}

/// What a `ridge bench` report says about its adapter (it holds no limits or features).
fn replayed_info(ui: &mut egui::Ui, r: &BenchReport) {
    ui.heading(&r.adapter);
    ui.label("replayed from a ridge bench report: no GPU is open");
    egui::Grid::new("adapter-info")
        .striped(true)
        .show(ui, |ui| {
            for (k, v) in [
                ("backend", r.backend.clone()),
                (
                    "vendor / device id",
                    format!("0x{:04x} / 0x{:04x}", r.vendor_id, r.device_id),
                ),
                ("driver", r.driver.clone()),
                ("timing", r.timing.clone()),
                ("Ridge version", r.ridge_version.clone()),
            ] {
                ui.label(k);
                ui.label(v);
                ui.end_row();
            }
        });
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, gpu: &mut Gpu, busy: bool) {
    if gpu.ctx.is_none() && gpu.replayed.is_none() {
        ui.label(gpu.error.as_deref().unwrap_or("no adapter yet"));
        return;
    }
    egui::ScrollArea::vertical().show(ui, |ui| {
        match (&gpu.ctx, &gpu.replayed) {
            (Some(ctx), _) => info(ui, &ctx.report()),
            (None, Some(r)) => replayed_info(ui, r),
            (None, None) => {}
        }
        ui.separator();
        ui.heading("Ceilings");
        egui::Grid::new("adapter-ceilings")
            .striped(true)
            .show(ui, |ui| {
                ui.strong("");
                ui.strong("spec table");
                ui.strong("measured");
                ui.end_row();
                let spec = gpu.spec.as_ref();
                let m = gpu.measured.as_ref();
                ui.label("f32 peak, TFLOP/s");
                ui.label(spec.map_or("—".into(), |s| format!("{:.1}", s.f32_tflops)));
                ui.label(m.map_or("—".into(), |m| format!("{:.2}", m.f32_tflops)));
                ui.end_row();
                ui.label("f16 peak, TFLOP/s");
                ui.label(spec.map_or("—".into(), |s| format!("{:.1}", s.f16_tflops)));
                // The spec's f16 figure is the tensor cores' where a GPU has them; measured,
                // the FMA units' and the tensor cores' are told apart.
                let fma = m.and_then(|m| m.f16_tflops);
                let tensor = m.and_then(|m| m.tensor_tflops);
                ui.label(match (fma, tensor) {
                    (Some(f), Some(t)) => format!("{f:.2} FMA · {t:.1} tensor cores"),
                    (Some(f), None) => format!("{f:.2}"),
                    (None, _) => "—".into(),
                });
                ui.end_row();
                ui.label("memory bandwidth, GB/s");
                ui.label(spec.map_or("—".into(), |s| format!("{:.0}", s.bandwidth_gbps)));
                ui.label(m.map_or("—".into(), |m| format!("{:.1}", m.bandwidth_gbps)));
                ui.end_row();
                ui.label("per-dispatch overhead, µs");
                ui.label("—");
                ui.label(
                    m.and_then(|m| m.dispatch_overhead_us)
                        .map_or("—".into(), |t| format!("{t:.1}")),
                );
                ui.end_row();
            });
        match &gpu.spec {
            Some(s) => ui.small(format!("spec source: {}", s.source)),
            None => ui
                .small("this adapter is not in the spec table (crates/ridge-model/data/gpus.json)"),
        };
        if let Some(e) = &gpu.measure_error {
            ui.colored_label(egui::Color32::RED, e);
        }
        if ui
            .add_enabled(
                !busy && gpu.ctx.is_some(),
                egui::Button::new("Measure the ceilings again"),
            )
            .clicked()
        {
            gpu.measure(ui.ctx());
        }
        if let Some(m) = &gpu.measured {
            let pts: Vec<[f64; 2]> = m
                .bandwidth_curve
                .iter()
                .map(|p| [(p.bytes as f64).log2(), p.gbps])
                .collect();
            // Which point is "the" bandwidth: the largest copy, far past every cache.
            if let Some(last) = m.bandwidth_curve.last() {
                ui.small(format!(
                    "the measured bandwidth is the copy of {} MiB (the largest, past every cache): \
                     {:.1} GB/s; smaller copies can run from a cache and read higher",
                    last.bytes >> 20,
                    m.bandwidth_gbps
                ));
            }
            Plot::new("bandwidth-curve")
                .legend(egui_plot::Legend::default().position(egui_plot::Corner::RightBottom))
                .height(220.0)
                .x_axis_label("working set (log2 bytes)")
                .y_axis_label("copy GB/s")
                .show(ui, |plot| {
                    plot.line(Line::new("stream copy", PlotPoints::from(pts)));
                    plot.hline(egui_plot::HLine::new(
                        "the measured bandwidth",
                        m.bandwidth_gbps,
                    ));
                });
        }
    });
}
