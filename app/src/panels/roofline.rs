//! Roofline: log-log, the spec-table and the measured roofs with their ridge points, and
//! every kernel run measured in this session as a point (hover: op, shape, predicted and
//! measured time). A quick sweep fills it in one click: its runs appear as they are
//! measured, with how many are done, and Cancel stops it after the kernel in flight.

use ridge_kernels::sweep::{self, SweepSize};
use ridge_model::OpCost;

use crate::Gpu;
use crate::plot::{self, PALETTE, Roof, RunPoint, Series};
use crate::tasks::{self, Stream};

/// One measured run of a sweep: label, cost, measured ms, op, f16 storage; or why it failed.
type SweepRun = Result<(String, OpCost, f64, String, bool), String>;

/// Measured runs and the sweep in flight.
#[derive(Default)]
pub struct State {
    /// Every measured run: (label, point); a new measurement of a label replaces the old.
    pub points: Vec<(String, RunPoint)>,
    /// Why the last sweep failed.
    pub error: Option<String>,
    /// Show predicted against measured time instead of the roofline.
    pub predicted_vs_measured: bool,
    /// In that view, a replayed report's runs predicted by the calibrated model (each run by
    /// a fit on its op kind's other runs) instead of the roofline.
    pub calibrated: bool,
    /// The sweep in flight: its runs stream in as they are measured.
    sweep: Option<Stream<SweepRun>>,
    /// Runs of the sweep in flight measured so far, and its total.
    pub progress: (usize, usize),
}

impl State {
    /// Adds or replaces the run called `label`.
    pub fn record(&mut self, label: String, point: RunPoint) {
        match self.points.iter_mut().find(|(l, _)| *l == label) {
            Some(slot) => slot.1 = point,
            None => self.points.push((label, point)),
        }
    }

    /// Whether a sweep is running.
    pub fn busy(&self) -> bool {
        self.sweep.is_some()
    }

    /// Plots the sweep's runs measured since the last frame; forgets the sweep once it ends.
    pub fn poll(&mut self, gpu: &Gpu) {
        let Some(sweep) = &self.sweep else { return };
        // Read before draining: a run sent just before the end is then drained too.
        let finished = sweep.finished();
        for run in sweep.drain() {
            match run {
                Ok((label, cost, ms, op, f16)) => {
                    let roof = gpu.ceilings_for(&op, f16);
                    let p = super::run_point(&label, &cost, ms, roof);
                    self.record(label, p);
                    self.progress.0 += 1;
                }
                Err(e) => self.error = Some(e),
            }
        }
        if finished {
            self.sweep = None;
        }
    }

    /// Asks the sweep in flight to stop after the kernel it is measuring.
    pub fn cancel_sweep(&self) {
        if let Some(s) = &self.sweep {
            s.cancel();
        }
    }

    fn start_sweep(&mut self, gpu: &Gpu, egui: &egui::Context) {
        let Some(ctx) = gpu.ctx.clone() else { return };
        self.error = None;
        let cases = sweep::cases(&ctx, SweepSize::Quick, &[]);
        self.progress = (0, cases.len());
        self.sweep = Some(tasks::spawn_stream(egui, move |sink| async move {
            for case in cases {
                if sink.cancelled() {
                    return;
                }
                let run = super::measure_case(&ctx, &case).await;
                let failed = run.is_err();
                let f16 = case.dtype == ridge_core::DType::F16;
                sink.send(run.map(|(label, cost, ms)| (label, cost, ms, case.op.clone(), f16)));
                if failed {
                    return;
                }
            }
        }));
    }
}

/// The roofs of this adapter: spec table, measured, and the tensor cores' where measured.
pub fn roofs(gpu: &Gpu) -> Vec<Roof> {
    let mut roofs = Vec::new();
    if let (Some(c), Some(s)) = (gpu.spec_ceilings(), &gpu.spec) {
        roofs.push(Roof {
            name: format!("{} (spec)", s.name),
            ceilings: c,
            color: PALETTE[0],
        });
    }
    if let Some(c) = gpu.measured_ceilings() {
        roofs.push(Roof {
            name: "measured".into(),
            ceilings: c,
            color: PALETTE[1],
        });
    }
    if let Some(m) = gpu.measured.as_ref().filter(|m| m.f16_tflops.is_some()) {
        roofs.push(Roof {
            name: "measured, f16".into(),
            ceilings: m.ceilings(true),
            color: PALETTE[4],
        });
    }
    if let Some(c) = gpu.measured.as_ref().and_then(|m| m.tensor_ceilings()) {
        roofs.push(Roof {
            name: "measured, tensor cores".into(),
            ceilings: c,
            color: PALETTE[3],
        });
    }
    roofs
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, gpu: &Gpu, state: &mut State, busy: bool) {
    ui.horizontal(|ui| {
        let ready = gpu.ctx.is_some() && !busy;
        if ui
            .add_enabled(ready, egui::Button::new("Run the quick sweep"))
            .clicked()
        {
            state.start_sweep(gpu, ui.ctx());
        }
        if let Some(sweep) = &state.sweep {
            ui.spinner();
            let (done, total) = state.progress;
            if sweep.cancelling() {
                ui.label(format!("stopping after {done} of {total} kernels…"));
            } else {
                ui.label(format!("measured {done} of {total} kernels"));
                if ui.button("Cancel").clicked() {
                    state.cancel_sweep();
                }
            }
        }
        // Runs without FLOPs (layout conversions) have no place on a log-log roofline.
        let drawable = state.points.iter().filter(|(_, p)| p.drawable()).count();
        let hidden = state.points.len() - drawable;
        ui.label(if hidden == 0 {
            format!("{drawable} runs plotted")
        } else {
            format!("{drawable} runs plotted ({hidden} without FLOPs not drawn)")
        });
        if let Some(c) = gpu.best_ceilings() {
            ui.label(format!("ridge point {:.1} FLOP/byte", c.ridge_point()));
        }
    });
    if let Some(e) = &state.error {
        ui.colored_label(egui::Color32::RED, e);
    }
    ui.horizontal(|ui| {
        ui.selectable_value(&mut state.predicted_vs_measured, false, "roofline");
        ui.selectable_value(
            &mut state.predicted_vs_measured,
            true,
            "predicted vs measured time",
        );
    });
    if state.predicted_vs_measured {
        let report = gpu.replayed.as_ref();
        if report.is_some() {
            ui.horizontal(|ui| {
                ui.label("predicted by");
                ui.selectable_value(&mut state.calibrated, false, "the roofline");
                ui.selectable_value(
                    &mut state.calibrated,
                    true,
                    "the calibrated model (each run held out)",
                );
            });
        }
        match report.filter(|_| state.calibrated) {
            Some(r) => predicted_vs_measured(ui, &calibrated_points(r)),
            None => predicted_vs_measured(ui, &state.points),
        }
        return;
    }
    let series = [Series {
        name: "kernel runs".into(),
        color: PALETTE[2],
        points: state.points.iter().map(|(_, p)| p.clone()).collect(),
    }];
    plot::roofline(ui, "roofline", &roofs(gpu), &series);
}

/// A report's timed runs with the calibrated model's held-out prediction as their predicted
/// time (`ridge_model::calibrate`).
fn calibrated_points(report: &ridge_model::report::BenchReport) -> Vec<(String, RunPoint)> {
    let held = ridge_model::calibrate::Calibration::held_out_ms(report);
    report
        .rows
        .iter()
        .zip(held)
        .filter_map(|(row, p)| {
            let (label, mut point) = super::report_point("", row, None)?;
            let (measured, predicted) = (row.measured_ms?, p?);
            point.text = format!(
                "{label}\nmeasured {measured:.4} ms\ncalibrated model, fitted without this run: \
                 {predicted:.4} ms"
            );
            point.times = Some((predicted, measured));
            Some((label, point))
        })
        .collect()
}

/// One point per measured run, predicted ms against measured ms, coloured by op (the sweep
/// kinds in `ridge_model::report::OP_COLOURS`, as in `ridge bench --svg`), with the
/// y = x line and a ±25 % band: how far to trust the model on this adapter.
fn predicted_vs_measured(ui: &mut egui::Ui, points: &[(String, RunPoint)]) {
    let op = |label: &str| label.split(' ').next().unwrap_or("").to_string();
    let mut ops: Vec<String> = points.iter().map(|(l, _)| op(l)).collect();
    ops.sort();
    ops.dedup();
    let series: Vec<Series> = ops
        .iter()
        .enumerate()
        .map(|(i, name)| Series {
            name: name.clone(),
            color: ridge_model::report::op_colour(name)
                .map_or(plot::OP_PALETTE[i % plot::OP_PALETTE.len()], |[r, g, b]| {
                    egui::Color32::from_rgb(r, g, b)
                }),
            points: points
                .iter()
                .filter(|(l, _)| op(l) == *name)
                .filter_map(|(_, p)| {
                    let (predicted, measured) = p.times?;
                    Some(RunPoint {
                        intensity: predicted,
                        gflops: measured,
                        text: p.text.clone(),
                        times: p.times,
                    })
                })
                .collect(),
        })
        .collect();
    let times: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().flat_map(|p| [p.intensity, p.gflops]))
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    let within = series
        .iter()
        .flat_map(|s| &s.points)
        .filter(|p| (p.gflops / p.intensity - 1.0).abs() <= 0.25)
        .count();
    let total: usize = series.iter().map(|s| s.points.len()).sum();
    ui.label(format!(
        "{within} of {total} runs within ±25 % of the prediction (above the line: slower than predicted)"
    ));
    let lo = times
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .log10()
        .floor();
    let hi = times
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max)
        .log10()
        .ceil();
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (-3.0, 1.0)
    };
    let band = |f: f64| vec![[lo, lo + f.log10()], [hi, hi + f.log10()]];
    plot::scatter(
        ui,
        "predicted-vs-measured",
        ["predicted ms", "measured ms"],
        &[
            ("y = x".into(), egui::Color32::GRAY, band(1.0)),
            ("+25 %".into(), egui::Color32::DARK_GRAY, band(1.25)),
            ("−25 %".into(), egui::Color32::DARK_GRAY, band(0.75)),
        ],
        &series,
    );
}
