//! The dashboard under egui_kittest. Snapshot tests render every panel without a GPU — Teach
//! and Compare as they are, Adapter, Roofline and Kernels replaying the shipped H200
//! report, Transformer before a model is loaded — and compare them with the images in
//! `docs/screenshots/` (the README's screenshots; `UPDATE_SNAPSHOTS=1` rewrites them). The
//! GPU test drives the live panels on whatever adapter is present: ceilings measured, a
//! kernel run plotted, MiniLM embedded with a per-op breakdown.

use std::time::{Duration, Instant};

use egui_kittest::kittest::Queryable as _;
use egui_kittest::{Harness, SnapshotOptions};
use ridge_app::{RidgeApp, Tab};

fn harness(app: RidgeApp) -> Harness<'static, RidgeApp> {
    Harness::builder()
        .with_size([1280.0, 820.0])
        .wgpu()
        .build_ui_state(|ui, app: &mut RidgeApp| app.show(ui), app)
}

fn snapshot(h: &mut Harness<'_, RidgeApp>, name: &str) {
    // Rendering is exact on the lavapipe of this machine and CI (every snapshot matches with
    // 0 pixels off). A changed digit in a heading (1.718 → 1.719 ms) moved 15 pixels past the
    // threshold: the tolerance stays below that, so a stale number fails (at 2000 pixels, the
    // old tolerance, two snapshots had gone stale by 1,022 and 1,526 pixels unnoticed). On
    // another driver's anti-aliasing, regenerate with UPDATE_SNAPSHOTS=1 and compare by eye.
    let options = SnapshotOptions::new()
        .output_path("../docs/screenshots")
        .threshold(2.0)
        .max_failed_pixels(4);
    h.snapshot_options(name, &options);
}

/// LLMs: the default question (Llama 3 8B, Q4_K_M, RTX 4090) answered with the model's own
/// numbers, shown exactly, and the published rows with the model's median errors.
#[test]
fn llm_panel() {
    use ridge_model::decoder::predict::{self, Phase};
    use ridge_model::decoder::{DecoderShape, ModelWeights, Quant};
    let mut app = RidgeApp::offline();
    app.tab = Tab::Llms;
    let s = &app.llm;
    let shape = DecoderShape::preset(&s.model).unwrap();
    let w = ModelWeights::of(&shape, Quant::parse(&s.quant).unwrap());
    let gpu = ridge_model::hardware::find(&s.gpu).unwrap();
    let p = predict::predict(&shape, &w, &gpu, None, s.batch, s.prompt, s.generate);
    let checked = predict::check_published();
    let decode =
        predict::median_error(checked.iter().filter(|c| c.phase == Phase::Decode)).unwrap();
    let mut h = harness(app);
    h.run();
    h.get_by_label_contains(&format!("{:.1} tokens/s", p.decode.tokens_per_s));
    h.get_by_label_contains(&format!("{:.0} tokens/s", p.prefill.tokens_per_s));
    h.get_by_label_contains(&format!(
        "Predicted against {} published rates: median error decode {:.0} %",
        checked.len(),
        100.0 * decode
    ));
    h.get_by_label_contains("fits the");
    snapshot(&mut h, "llms");
}

#[test]
fn teach_panel() {
    let mut app = RidgeApp::offline();
    app.tab = Tab::Teach;
    let mut h = harness(app);
    h.run();
    // The op-by-op count and both quoted formulas are shown, and ops sit on the roofline.
    h.get_by_label("24·n·d² + 4·n²·d");
    h.get_by_label("8·n·d² + 4·n²·d");
    assert!(
        h.query_all_by_label_contains("ridge point")
            .next()
            .is_some()
    );
    // One layer's memory: its own weights (d = 384, FFN 1536, f32: 1,774,464 parameters,
    // 7.10 MB; the 47 MB embedding table belongs to no layer), no KV cache row for an
    // encoder.
    h.get_by_label("7.10 MB");
    assert!(h.query_by_label("KV cache").is_none());
    snapshot(&mut h, "teach");
}

/// A panel's link name: any prefix of its title, in any case, punctuation ignored.
#[test]
fn panels_are_named_by_a_prefix_of_their_title() {
    for (name, tab) in [
        ("transformer", Tab::Transformer),
        ("#Transformer", Tab::Transformer),
        ("kernels", Tab::Kernels),
        ("kernelslive", Tab::Kernels),
        ("LLMs", Tab::Llms),
        ("comp", Tab::Compare),
    ] {
        assert_eq!(Tab::from_name(name), Some(tab), "{name}");
    }
    for name in ["", "#", "kernelz", "roof line extra"] {
        assert_eq!(Tab::from_name(name), None, "{name}");
    }
}

#[test]
fn compare_panel_with_the_shipped_reports() {
    let mut app = RidgeApp::offline();
    app.tab = Tab::Compare;
    assert_eq!(app.compare.reports.len(), 3, "{:?}", app.compare.error);
    let mut h = harness(app);
    h.run();
    assert!(
        h.query_all_by_label_contains("NVIDIA H200")
            .next()
            .is_some()
    );
    assert!(h.query_all_by_label_contains("llvmpipe").next().is_some());
    // Each report's row shows its own numbers: copy bandwidth, f32 peak, runs, and both
    // model errors (median |log2(measured ÷ predicted)| as a factor).
    for (_, r, _) in &h.state().compare.reports.clone() {
        let a = &r.accuracy_measured;
        for want in [
            format!("{:.1}", r.measured.bandwidth_gbps),
            format!("{:.2}", r.measured.f32_tflops),
            r.rows.len().to_string(),
            format!("{:.2}×", a.memory.unwrap().exp2()),
            format!("{:.2}×", a.compute.unwrap().exp2()),
            format!(
                "{:.2}× (median of op kinds)",
                r.calibration.as_ref().unwrap().median_held_out().unwrap()
            ),
        ] {
            assert!(
                h.query_all_by_label(&want).count() > 0,
                "{}: no {want:?}",
                r.adapter
            );
        }
    }
    snapshot(&mut h, "compare");
}

fn h200_report() -> ridge_model::report::BenchReport {
    serde_json::from_str(include_str!("../../benches/reports/h200.json")).unwrap()
}

/// Shows `tab` replaying the H200 report, checks it names the H200 and shows `expect`, and
/// compares it with its snapshot.
fn replayed_panel(tab: Tab, name: &str, expect: &str) {
    let report = h200_report();
    let timed = report
        .rows
        .iter()
        .filter(|r| r.measured_ms.is_some())
        .count();
    let mut app = RidgeApp::replay(&report);
    assert_eq!(app.roofline.points.len(), timed);
    app.tab = tab;
    let mut h = harness(app);
    h.run();
    for want in [expect, "NVIDIA H200"] {
        assert!(
            h.query_all_by_label_contains(want).next().is_some(),
            "{name}: no label with {want:?}"
        );
    }
    snapshot(&mut h, name);
}

#[test]
fn adapter_panel_replays_the_h200_report() {
    // Which point of the bandwidth curve is "the" bandwidth: the report's largest copy.
    let report = h200_report();
    let last = report.measured.bandwidth_curve.last().unwrap();
    replayed_panel(
        Tab::Adapter,
        "adapter",
        &format!(
            "the measured bandwidth is the copy of {} MiB (the largest, past every cache): {:.1} GB/s",
            last.bytes >> 20,
            report.measured.bandwidth_gbps
        ),
    );
}

#[test]
fn roofline_panel_replays_the_h200_report() {
    let report = h200_report();
    let timed = report.rows.iter().filter(|r| r.measured_ms.is_some());
    let drawable = timed.clone().filter(|r| r.flops > 0.0).count();
    let hidden = timed.count() - drawable;
    replayed_panel(
        Tab::Roofline,
        "roofline",
        &format!("{drawable} runs plotted ({hidden} without FLOPs not drawn)"),
    );
}

/// Predicted against measured: one point per timed run, and the count within ±25 % is the
/// report's own (measured ÷ predicted of each row, under the roof it was scored against).
#[test]
fn predicted_vs_measured_view_replays_the_h200_report() {
    let report = h200_report();
    let mut app = RidgeApp::replay(&report);
    let timed: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.measured_ms.is_some())
        .collect();
    let within = app
        .roofline
        .points
        .iter()
        .filter_map(|(_, p)| p.times)
        .filter(|(p, m)| (m / p - 1.0).abs() <= 0.25)
        .count();
    assert_eq!(
        app.roofline
            .points
            .iter()
            .filter(|(_, p)| p.times.is_some())
            .count(),
        timed.len()
    );
    app.roofline.predicted_vs_measured = true;
    let mut h = harness(app);
    h.run();
    h.get_by_label_contains(&format!("{within} of {} runs within ±25 %", timed.len()));
    snapshot(&mut h, "predicted-vs-measured");

    // The calibrated model, each run predicted by a fit on its op kind's other runs: the
    // count is the held-out predictions' own, and far more runs fall inside the band.
    let held = ridge_model::calibrate::Calibration::held_out_ms(&report);
    let calibrated = report
        .rows
        .iter()
        .zip(&held)
        .filter_map(|(r, p)| Some((r.measured_ms?, (*p)?)))
        .collect::<Vec<_>>();
    let within_calibrated = calibrated
        .iter()
        .filter(|(m, p)| (m / p - 1.0).abs() <= 0.25)
        .count();
    assert!(
        within_calibrated > within + 10,
        "{within_calibrated} vs {within}"
    );
    h.get_by_label("the calibrated model (each run held out)")
        .click();
    h.run();
    h.get_by_label_contains(&format!(
        "{within_calibrated} of {} runs within ±25 %",
        calibrated.len()
    ));
    snapshot(&mut h, "predicted-vs-measured-calibrated");
}

/// Every replayed run is scored against the roof the bench scored it against (its storage
/// type's, the tensor cores' for f16 GEMMs): the hover text's percentage is the report's.
#[test]
fn replayed_runs_carry_the_reports_roofline_fractions() {
    let report = h200_report();
    let app = RidgeApp::replay(&report);
    let mut checked = 0;
    for row in &report.rows {
        let (Some(_), Some(f)) = (row.measured_ms, row.roofline_fraction) else {
            continue;
        };
        let label = format!("{} {:?} {}", row.op, row.shape, row.dtype);
        let (_, point) = app
            .roofline
            .points
            .iter()
            .find(|(l, _)| *l == label)
            .unwrap_or_else(|| panic!("no point {label}"));
        let want = format!("{:.0} % of it", 100.0 * f);
        assert!(
            point.text.contains(&want),
            "{label}: {} (report: {want})",
            point.text
        );
        if ridge_model::report::tensor_core_op(&row.op) && row.dtype == "f16" {
            assert!(point.text.contains("tensor cores roof"), "{}", point.text);
        }
        checked += 1;
    }
    assert!(checked > 20, "{checked}");
}

/// Kernels in replay: the chosen shape's cost and its predictions on the replayed GPU's
/// measured roof and its spec table, shown before any run, exactly as the model computes them.
#[test]
fn kernels_panel_predicts_on_the_h200_report() {
    let report = h200_report();
    let app = RidgeApp::replay(&report);
    let case = app.kernels.case();
    let cost = ridge_kernels::sweep::cost(&case).unwrap();
    let (roof, name) = app.gpu.ceilings_for(&case.op, false).unwrap();
    let p = roof.predict(&cost);
    let spec = report
        .spec
        .as_ref()
        .unwrap()
        .ceilings(ridge_model::Precision::F32)
        .predict(&cost);
    // The measured roof carries the report's dispatch overhead; the spec table none.
    assert!(p.overhead_s > 0.0 && spec.overhead_s == 0.0);
    let measured = ridge_app::panels::kernels::prediction_text(&p);
    let from_spec = ridge_app::panels::kernels::prediction_text(&spec);
    assert!(measured.contains("µs of dispatch)") && !from_spec.contains("dispatch"));
    let mut app = app;
    app.tab = Tab::Kernels;
    let mut h = harness(app);
    h.run();
    for want in [
        format!("predicted ({name} roof)"),
        measured,
        from_spec,
        format!("{:.3e} / {:.3e}", cost.flops, cost.bytes),
    ] {
        h.get_by_label_contains(&want);
    }
    replayed_panel(Tab::Kernels, "kernels", "gemm");
}

#[test]
fn transformer_panel_predicts_minilm_on_the_h200_before_a_run() {
    replayed_panel(Tab::Transformer, "transformer", "predicted");
    // The calibrated total is the report's fitted terms summed over the forward's ops (the
    // kinds the report did not time at the roofline), to the digit shown.
    use ridge_model::transformer::{TransformerShape, encoder_ops};
    let mut h = harness(RidgeApp::replay(&h200_report()));
    h.state_mut().tab = Tab::Transformer;
    h.run();
    let roof = h
        .state()
        .gpu
        .best_ceilings()
        .expect("the report's ceilings");
    let cal = ridge_model::calibrate::Calibrated::new(h200_report());
    let want: f64 = encoder_ops(&TransformerShape::minilm_l6(), 32, 128, true, 4)
        .iter()
        .map(|op| cal.price(&op.name, "f32", &op.cost, &roof).0 * 1e3)
        .sum();
    h.get_by_label_contains(&format!("{want:.3} ms calibrated"));
}

#[test]
fn a_bad_report_is_refused_with_a_message() {
    let mut app = RidgeApp::offline();
    app.compare.add("broken.json", b"{ \"adapter\": 3 }");
    assert_eq!(app.compare.reports.len(), 3);
    let e = app.compare.error.clone().unwrap_or_default();
    assert!(
        e.starts_with("broken.json: not a `ridge bench --json` report"),
        "{e}"
    );
    // Load with an empty field says what is missing.
    let mut app = RidgeApp::offline();
    app.tab = Tab::Compare;
    let mut h = harness(app);
    h.run();
    h.get_by_label("Load").click();
    h.run();
    let e = h.state().compare.error.clone().unwrap_or_default();
    assert!(
        e.starts_with("give the path of a `ridge bench --json` report"),
        "{e}"
    );
}

/// Steps the harness until `done` or the deadline, with real time passing for the
/// background tasks.
fn step_until(
    h: &mut Harness<'_, RidgeApp>,
    what: &str,
    secs: u64,
    done: impl Fn(&RidgeApp) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done(h.state()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    h.step();
}

#[test]
fn live_panels_on_this_adapter() {
    let mut h = harness(RidgeApp::new(None));
    step_until(&mut h, "the adapter and its ceilings", 300, |a| {
        a.gpu.error.is_some() || (a.gpu.measured.is_some() || a.gpu.measure_error.is_some())
    });
    let app = h.state();
    assert!(app.gpu.error.is_none(), "{:?}", app.gpu.error);
    assert!(
        app.gpu.measure_error.is_none(),
        "{:?}",
        app.gpu.measure_error
    );
    let m = app.gpu.measured.as_ref().unwrap();
    assert!(m.bandwidth_gbps > 0.0 && m.f32_tflops > 0.0);
    let name = app.gpu.ctx.as_ref().unwrap().info().name.clone();

    h.state_mut().tab = Tab::Adapter;
    h.step();
    assert!(h.query_all_by_label_contains(&name).next().is_some());

    // One kernel run lands on the roofline with its prediction.
    h.state_mut().tab = Tab::Kernels;
    h.step();
    h.get_by_label("Run once").click();
    step_until(&mut h, "a kernel run", 120, |a| {
        !a.roofline.points.is_empty()
    });
    assert!(
        h.query_by_label_contains("measured (median of 5)")
            .is_some()
    );
    let (label, point) = &h.state().roofline.points[0];
    assert!(label.starts_with("gemm [256, 256, 256]"), "{label}");
    assert!(
        point.gflops > 0.0 && point.text.contains("predicted"),
        "{}",
        point.text
    );
    // Attention and BigBird are in the list, and run.
    for (i, op) in [(8, "attention"), (9, "sparse_attention")] {
        h.state_mut().kernels.op = i;
        h.state_mut().kernels.dims[i] = [2, 256, 64];
        h.step();
        h.get_by_label("Run once").click();
        step_until(&mut h, op, 120, |a| {
            a.roofline
                .points
                .iter()
                .any(|(l, _)| l.starts_with(&format!("{op} ")))
                || a.kernels.error.is_some()
        });
        assert!(
            h.state().kernels.error.is_none(),
            "{op}: {:?}",
            h.state().kernels.error
        );
    }

    // The quick sweep streams its runs onto the roofline as they are measured, says how far
    // it is, and stops on Cancel after the kernel in flight.
    h.state_mut().tab = Tab::Roofline;
    h.step();
    let before = h.state().roofline.points.len();
    h.get_by_label("Run the quick sweep").click();
    step_until(&mut h, "the sweep's first run", 300, |a| {
        a.roofline.progress.0 >= 1 || a.roofline.error.is_some()
    });
    assert!(
        h.state().roofline.error.is_none(),
        "{:?}",
        h.state().roofline.error
    );
    let total = h.state().roofline.progress.1;
    assert!(
        h.state().roofline.busy(),
        "the sweep ended after its first of {total} runs"
    );
    assert!(
        h.state().roofline.points.len() > before,
        "the first run is not plotted"
    );
    h.get_by_label_contains(&format!("of {total} kernels"));
    h.get_by_label("Cancel").click();
    step_until(&mut h, "the sweep to stop", 300, |a| !a.roofline.busy());
    let done = h.state().roofline.progress.0;
    assert!(
        done >= 1 && done < total,
        "{done} of {total} measured after Cancel"
    );

    // SmolLM2: one decode step's timeline after a prompt of 5 tokens (the cached weights,
    // else random ones of the same shape and formats): 5 dispatches a layer and 3 more, each
    // on the timeline where the adapter has timestamps, the host's recording beside them,
    // and the per-op table against the plan's prediction.
    h.state_mut().tab = Tab::Transformer;
    h.state_mut().transformer_view = ridge_app::TransformerView::Decoder;
    h.state_mut().decode.prompt = 5;
    h.step();
    h.get_by_label("Profile a decode step").click();
    step_until(&mut h, "a decode step's timeline", 600, |a| {
        a.decode.timeline.is_some() || a.decode.error.is_some()
    });
    assert!(
        h.state().decode.error.is_none(),
        "{:?}",
        h.state().decode.error
    );
    let t = h.state().decode.timeline.as_ref().unwrap();
    assert_eq!(
        t.depth, 7,
        "5 prompt tokens and a warm step and the step timed"
    );
    // Five a layer, the embedding, the logits and the argmax's two passes (its chunks of
    // the vocabulary and their merge).
    assert_eq!(t.profile.spans.len(), 30 * 5 + 4);
    assert_eq!(t.plan.len(), t.profile.spans.len());
    assert!(t.host_ms > 0.0);
    if !t.ops.is_empty() {
        assert_eq!(t.ops.len(), t.profile.spans.len());
        let (elapsed, busy, gaps) = (t.elapsed_ms(), t.busy_ms(), t.gaps_ms());
        assert!(busy > 0.0 && gaps >= 0.0, "{busy} {gaps}");
        assert!(
            (elapsed - busy - gaps).abs() <= 1e-6 * elapsed.max(1.0) + 1e-9,
            "GPU elapsed {elapsed} ms is not busy {busy} + gaps {gaps}"
        );
        h.get_by_label_contains("GPU elapsed");
    }
    h.get_by_label("GPU time per op");
    assert_eq!(h.query_all_by_label("measured ÷ predicted").count(), 1);
    assert!(h.query_all_by_label("total").count() >= 1);
    h.state_mut().transformer_view = ridge_app::TransformerView::Encoder;
    h.step();

    // MiniLM: loaded, two sentences embedded, the breakdown shown.
    if !ridge_nn::fetch::minilm_dir()
        .join("model.safetensors")
        .exists()
    {
        eprintln!("MiniLM files missing (cargo xtask fetch-model): Transformer panel not tested");
        return;
    }
    h.state_mut().tab = Tab::Transformer;
    h.step();
    h.get_by_label("Load all-MiniLM-L6-v2").click();
    step_until(&mut h, "the model", 300, |a| {
        a.transformer.model.is_some() || a.transformer.error.is_some()
    });
    assert!(
        h.state().transformer.error.is_none(),
        "{:?}",
        h.state().transformer.error
    );
    h.state_mut().transformer.text = "A cat sits on the mat.\nA kitten rests on a rug.".into();
    h.step();
    h.get_by_label("Embed").click();
    step_until(&mut h, "the embeddings", 600, |a| {
        a.transformer.result.is_some() || a.transformer.error.is_some()
    });
    let r = h.state().transformer.result.as_ref().expect("embedded");
    assert_eq!((r.vectors.len(), r.vectors[0].len()), (2, 384));
    let sim = ridge_nn::cosine(&r.vectors[0], &r.vectors[1]);
    assert!(sim > 0.5 && sim < 0.999, "cosine of two paraphrases {sim}");
    assert!(linear_dispatches(&r.by_name) == 24, "{:?}", r.by_name);
    assert!(
        h.query_all_by_label_contains("GPU time per layer")
            .next()
            .is_some()
    );
    // Predicted against measured: a ratio column, totals and the rate; calibrated against
    // measured where Compare holds a report of this adapter (the shipped lavapipe one here).
    assert_eq!(h.query_all_by_label("measured ÷ predicted").count(), 2);
    let info = h.state().gpu.ctx.as_ref().unwrap().info().clone();
    let reported = h
        .state()
        .compare
        .reports
        .iter()
        .any(|(_, r, _)| r.adapter == info.name && r.backend == info.backend.to_str());
    assert_eq!(
        h.query_all_by_label("measured ÷ calibrated").count(),
        if reported { 2 } else { 0 },
        "{} ({}): a report of it in Compare: {reported}",
        info.name,
        info.backend.to_str()
    );
    assert!(h.query_all_by_label("total").count() >= 2);
    h.get_by_label_contains("sentences/s");

    // Ten sentences run as two passes (8 + 2), each its own batch in the prediction.
    use ridge_app::panels::transformer::SENTENCES_PER_PASS;
    let ten: Vec<String> = (0..10)
        .map(|i| format!("Sentence number {i} is here."))
        .collect();
    h.state_mut().transformer.text = ten.join("\n");
    h.step();
    h.get_by_label("Embed").click();
    step_until(&mut h, "ten embeddings", 900, |a| {
        !a.transformer.busy()
            && (a
                .transformer
                .result
                .as_ref()
                .is_some_and(|r| r.texts.len() == 10)
                || a.transformer.error.is_some())
    });
    let r = h.state().transformer.result.as_ref().expect("embedded");
    assert_eq!(r.vectors.len(), 10);
    assert_eq!(
        r.passes,
        [(SENTENCES_PER_PASS, r.passes[0].1), (2, r.passes[1].1)]
    );
    assert!(linear_dispatches(&r.by_name) == 48, "{:?}", r.by_name);
    assert_eq!(h.query_all_by_label_contains("2 passes").count(), 2);

    // Cancel stops between passes: the old result stays, the progress says where it stopped.
    let many: Vec<String> = (0..40).map(|i| format!("Another sentence, {i}.")).collect();
    h.state_mut().transformer.text = many.join("\n");
    h.step();
    h.get_by_label("Embed").click();
    step_until(&mut h, "the first pass", 600, |a| {
        a.transformer.progress.0 > 0
    });
    h.get_by_label("Cancel").click();
    step_until(&mut h, "the cancel", 600, |a| !a.transformer.busy());
    let t = &h.state().transformer;
    assert!(t.cancelled, "{:?}", t.error);
    assert!(
        t.progress.0 < 40 && t.progress.0 % SENTENCES_PER_PASS == 0,
        "{:?}",
        t.progress
    );
    assert_eq!(t.result.as_ref().map(|r| r.texts.len()), Some(10));
    h.get_by_label_contains("cancelled after");
}

/// Dispatches of the encoder's Linear layers (kinds `linear`, `linear_residual`,
/// `linear_gelu`) in a profile's per-name summary: 4 a layer, twice that where GEMMs split K.
fn linear_dispatches(by_name: &[(String, usize, Option<f64>)]) -> usize {
    by_name
        .iter()
        .filter(|(n, _, _)| n.starts_with("linear"))
        .map(|(_, c, _)| c)
        .sum()
}
