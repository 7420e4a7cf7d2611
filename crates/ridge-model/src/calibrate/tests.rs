//! The fits against known terms and against the shipped reports.

use super::*;

fn shipped(name: &str) -> BenchReport {
    let text = match name {
        "h200" => include_str!("../../../../benches/reports/h200.json"),
        "h200-decoder" => include_str!("../../../../benches/reports/h200-decoder.json"),
        "h100-decoder" => include_str!("../../../../benches/reports/h100-decoder.json"),
        "lavapipe" => include_str!("../../../../benches/reports/lavapipe.json"),
        "llvmpipe" => include_str!("../../../../benches/reports/llvmpipe.json"),
        "swiftshader" => include_str!("../../../../benches/reports/swiftshader.json"),
        other => panic!("no shipped report {other}"),
    };
    serde_json::from_str(text).unwrap()
}

/// Launches whose times do not grow with their bytes take a fixed cost, not a price in
/// proportion to the bytes: greedy's argmax over 32,000 to 256,000 logits on an H100
/// (2026-12-07, third session: 14.18–14.43 µs in no order of size), which the median
/// achieved fraction fitted 1.70× off and 1.15× held out.
#[test]
fn flat_launches_take_a_fixed_cost() {
    let mut r = shipped("h100-decoder");
    r.rows
        .retain(|row| row.op == "argmax" && row.dtype == "f32");
    let times_ms = [0.014208, 0.014304, 0.014432, 0.014176, 0.014176];
    assert_eq!(r.rows.len(), times_ms.len());
    assert!(r.rows.windows(2).all(|p| p[0].bytes < p[1].bytes));
    for (row, t) in r.rows.iter_mut().zip(times_ms) {
        row.measured_ms = Some(t);
    }
    let fit = Calibration::fit(&r);
    let k = &fit.kinds[0];
    assert_eq!(k.efficiency, NO_WORK_TERM, "{k:?}");
    assert!(
        k.fitted_error < 1.02 && k.held_out_error.unwrap() < 1.02,
        "{k:?}"
    );
}

/// Launches made from known terms are fitted back exactly: with a depth term on a
/// compute-bound kind, and without one where the launches carry no depth.
#[test]
fn known_terms_are_recovered() {
    for tau in [3e-9, 0.0] {
        let mut r = shipped("h200");
        let o = r.measured.dispatch_overhead_us.unwrap() * 1e-6;
        let (roof, _) = r.measured.roof_for("gemm", false);
        let (f, c) = (0.55, 7e-6);
        r.rows.retain(|row| row.op == "gemm" && row.dtype == "f32");
        for row in &mut r.rows {
            row.bound = Bound::Compute;
            if tau == 0.0 {
                row.depth = 0.0;
            }
            let t = o + c + row.flops / (roof.peak_flops * f) + tau * row.depth;
            row.measured_ms = Some(t * 1e3);
        }
        let fit = Calibration::fit(&r);
        let k = &fit.kinds[0];
        assert!(
            (k.efficiency - f).abs() < 1e-6
                && (k.latency_s - c).abs() < 1e-11
                && (k.depth_s - tau).abs() < 1e-14,
            "{k:?}"
        );
        assert!(k.fitted_error < 1.0 + 1e-6 && k.held_out_error.unwrap() < 1.0 + 1e-6);
        let row = &r.rows[2];
        let t = fit.predict(&r, "gemm", "f32", &row.cost()).unwrap();
        assert!((t * 1e3 / row.measured_ms.unwrap() - 1.0).abs() < 1e-6);
        assert_eq!(
            fit.predict(&r, "softmax", "f32", &OpCost::new(1.0, 1.0)),
            None
        );
    }
}

/// `r`'s rows made memory-bound launches timed from known terms: the report's dispatch
/// overhead, a fixed cost `c`, the bytes at a fraction `f` of its copy rate, and `per_unit`'s
/// time for the row's launch units.
fn remake_memory_bound(
    r: &mut BenchReport,
    f: f64,
    c: f64,
    per_unit: impl Fn(&crate::report::Row) -> f64,
) {
    let o = r.measured.dispatch_overhead_us.unwrap() * 1e-6;
    let bandwidth = r.measured.bandwidth_gbps * 1e9;
    for row in &mut r.rows {
        row.bound = Bound::Memory;
        let t = o + c + row.bytes / (bandwidth * f) + per_unit(row);
        row.measured_ms = Some(t * 1e3);
    }
}

/// A row kind's time per workgroup is fitted where its launches' times follow their rows
/// and not only their bytes, recovered exactly from the shipped lavapipe report's
/// layer-norm rows remade from known terms; where they follow the bytes alone, no
/// workgroup term is fitted; a cost without workgroups prices none.
#[test]
fn a_row_kinds_time_per_workgroup_is_recovered() {
    for omega in [30e-6, 0.0] {
        let mut r = shipped("lavapipe");
        let (f, c) = (0.8, 20e-6);
        r.rows
            .retain(|row| row.op == "layer_norm" && row.dtype == "f32");
        assert!(r.rows.len() >= 5 && r.rows.iter().all(|row| row.workgroups > 0.0));
        remake_memory_bound(&mut r, f, c, |row| omega * row.workgroups);
        let fit = Calibration::fit(&r);
        let k = &fit.kinds[0];
        assert!(
            (k.efficiency - f).abs() < 1e-6 && (k.workgroup_s - omega).abs() < 1e-12,
            "{k:?}"
        );
        assert!(k.held_out_error.unwrap() < 1.0 + 1e-6, "{k:?}");
        let row = &r.rows[1];
        let t = fit.predict(&r, "layer_norm", "f32", &row.cost()).unwrap();
        assert!((t * 1e3 / row.measured_ms.unwrap() - 1.0).abs() < 1e-6);
        let unstated = OpCost {
            workgroups: 0.0,
            ..row.cost()
        };
        let bare = fit.predict(&r, "layer_norm", "f32", &unstated).unwrap();
        assert!((t - bare - omega * row.workgroups).abs() < 1e-12);
    }
}

/// A compute-bound kind whose launches run in whole waves over the GPU is priced in waves:
/// the shipped H200 report's f32 GEMMs given workgroup counts from 40 to 1000 (1 to 4 waves
/// of 264) and times remade from known terms (each wave one tile's time at `S` workgroups
/// at once) are fitted back exactly, held out within 1 %, where the fit without waves is off
/// by more than 5 % held out. A cost that does not state its workgroups is priced without waves.
#[test]
fn a_compute_bound_kinds_waves_are_recovered() {
    let mut r = shipped("h200");
    let o = r.measured.dispatch_overhead_us.unwrap() * 1e-6;
    let (roof, _) = r.measured.roof_for("gemm", false);
    let (f, c, slots, tile) = (0.6, 4e-6, 264.0, 2.0 * 64.0 * 64.0 * 512.0);
    r.rows.retain(|row| row.op == "gemm" && row.dtype == "f32");
    let groups = [40.0, 132.0, 200.0, 300.0, 450.0, 700.0, 1000.0];
    assert_eq!(r.rows.len(), groups.len());
    for (row, g) in r.rows.iter_mut().zip(groups) {
        row.bound = Bound::Compute;
        row.depth = 0.0;
        row.workgroups = g;
        row.tiled_flops = g * tile;
        row.flops = row.tiled_flops;
        let t = o + c + (g / slots).ceil() * slots * tile / (roof.peak_flops * f);
        row.measured_ms = Some(t * 1e3);
    }
    let fit = Calibration::fit(&r);
    let k = &fit.kinds[0];
    assert!(k.concurrent_workgroups > 0.0, "{k:?}");
    assert!(k.fitted_error < 1.0 + 1e-6, "{k:?}");
    assert!(k.held_out_error.unwrap() < 1.01, "{k:?}");
    for row in &r.rows {
        let t = fit.predict(&r, "gemm", "f32", &row.cost()).unwrap();
        assert!((t * 1e3 / row.measured_ms.unwrap() - 1.0).abs() < 1e-6);
    }
    // Without workgroups the kind has no waves: the plain fit's error.
    let mut plain = r.clone();
    for row in &mut plain.rows {
        row.workgroups = 0.0;
    }
    let k = &Calibration::fit(&plain).kinds[0];
    assert_eq!(k.concurrent_workgroups, 0.0);
    assert!(k.held_out_error.unwrap() > 1.05, "{k:?}");
    let unstated = OpCost {
        workgroups: 0.0,
        ..r.rows[3].cost()
    };
    let t = fit.predict(&r, "gemm", "f32", &unstated).unwrap();
    assert!(t < r.rows[3].measured_ms.unwrap() * 1e-3, "{t}");
}

/// A kind's time per invocation is fitted where its launches' times follow their
/// invocations and not their workgroups: the shipped H200 decoder report's LM-head and
/// SwiGLU launches taken as one kind (GPU launch shapes: 64 to 256 invocations a workgroup,
/// the LM head 3,072 workgroups at every K), their times remade from known terms, give back
/// the time per invocation exactly, held out too. (The CPU drivers' one-row launches now put
/// 16 invocations in every workgroup, so their reports cannot tell the two units apart.)
#[test]
fn a_kinds_time_per_invocation_is_recovered() {
    let mut r = shipped("h200-decoder");
    let (f, c, omega) = (0.7, 5e-6, 1e-10);
    r.rows.retain(|row| {
        (row.op == "rms_qmatvec" || row.op == "rms_qmatvec_swiglu") && row.dtype == "f32"
    });
    r.rows
        .iter_mut()
        .for_each(|row| row.op = "rms_qmatvec".into());
    assert!(r.rows.len() >= 8);
    let per_group = |row: &crate::report::Row| row.invocations / row.workgroups;
    assert!(
        r.rows
            .iter()
            .any(|row| per_group(row) != per_group(&r.rows[0]))
    );
    remake_memory_bound(&mut r, f, c, |row| omega * row.invocations);
    let fit = Calibration::fit(&r);
    let k = &fit.kinds[0];
    assert!(
        k.per_invocation
            && (k.workgroup_s - omega).abs() < 1e-15
            && (k.efficiency - f).abs() < 1e-6,
        "{k:?}"
    );
    assert!(k.held_out_error.unwrap() < 1.0 + 1e-6, "{k:?}");
}

/// A memory-bound kind's model is chosen by its launches: the decode attention's rows of
/// the shipped decoder report, their times remade from known terms, give back a fit on
/// the keys alone (no work term) where time follows the keys, a fit on the bytes alone
/// where it follows the bytes, and both where it follows both, each exact held out (rows
/// at four head counts: bytes and keys vary apart). A report's JSON keeps a fit without
/// a work term.
#[test]
fn a_memory_bound_kinds_model_follows_its_launches() {
    let r = shipped("h200-decoder");
    let o = r.measured.dispatch_overhead_us.unwrap() * 1e-6;
    let bandwidth = r.measured.roof_for("kv_attention", false).0.bandwidth;
    let c = 4e-6;
    for (f, tau) in [(None, 16e-9), (Some(0.3), 0.0), (Some(0.05), 16e-9)] {
        let mut r = r.clone();
        r.rows
            .retain(|row| row.op == "kv_attention" && row.dtype == "f32");
        assert!(r.rows.len() >= 8);
        for row in &mut r.rows {
            let work = f.map_or(0.0, |f| row.bytes / (bandwidth * f));
            row.measured_ms = Some((o + c + work + tau * row.depth) * 1e3);
        }
        let fit = Calibration::fit(&r);
        let k = &fit.kinds[0];
        assert_eq!(k.bound, Bound::Memory);
        let efficiency = f.unwrap_or(NO_WORK_TERM);
        assert!(
            (k.efficiency / efficiency - 1.0).abs() < 1e-6
                && (k.latency_s - c).abs() < 1e-11
                && (k.depth_s - tau).abs() < 1e-14,
            "{f:?} {tau}: {k:?}"
        );
        assert!(k.held_out_error.unwrap() < 1.0 + 1e-6, "{k:?}");
        let text = serde_json::to_string(&fit).unwrap();
        let back: Calibration = serde_json::from_str(&text).unwrap();
        let e = back.kinds[0].efficiency;
        assert!(
            e.is_finite() && (e / efficiency - 1.0).abs() < 1e-12,
            "{text}"
        );
    }
}

/// On the shipped H200 report (run 135: the encoder's kinds in f32 and f16, GEMMs square
/// and at MiniLM's shapes) every op kind is predicted within 1.2× held out (the issue asks
/// 1.15×: the f32 GEMM's 1.17× misses it), where the roofline alone was 2–3.5× off for
/// GEMM and attention.
/// A report's stored terms do not price anything: with every stored kind made 10× as
/// efficient, a GEMM is priced as its rows' fit prices it.
#[test]
fn stored_terms_are_not_trusted() {
    let r = shipped("h200");
    let honest = Calibrated::new(r.clone());
    let mut edited = r;
    let mut terms = Calibration::fit(&edited);
    for k in &mut terms.kinds {
        k.efficiency *= 10.0;
    }
    edited.calibration = Some(terms);
    let edited = Calibrated::new(edited);
    let n = 4096.0_f64;
    let cost = OpCost::new(2.0 * n.powi(3), 3.0 * n * n * 4.0).with_depth(n);
    let roof = edited.report.measured.ceilings(false);
    let (a, fitted) = honest.price("gemm", "f32", &cost, &roof);
    assert!(fitted);
    assert_eq!(edited.price("gemm", "f32", &cost, &roof), (a, true));
}

/// MiniLM's f32 batch-1 plan with its GEMMs split along K as the H200's kernel splits the
/// residual projections: each split pair priced once at its whole GEMM by a report that
/// fitted its kind (the reduce at 0), each dispatch by its own roofline by one that did
/// not; the unsplit plan's GEMMs priced the same way as the pair.
#[test]
fn a_split_gemm_is_one_launch_of_its_kind() {
    use crate::transformer::{TransformerShape, encoder_ops, encoder_ops_split};
    let s = TransformerShape::minilm_l6();
    let split = |_: usize, n: usize, _: usize| if n == s.hidden { 3 } else { 1 };
    let plan = encoder_ops_split(&s, 1, 128, true, 4, &split);
    let whole = encoder_ops(&s, 1, 128, true, 4);
    let fitted = Calibrated::new(shipped("h200"));
    let roof = fitted.report.measured.ceilings(false);
    let price = |ops: &[PlannedOp], name: &str| -> f64 {
        ops.iter()
            .filter(|o| o.name == name)
            .map(|o| fitted.price_planned(o, "f32", &roof).0)
            .sum()
    };
    let pairs = plan.iter().filter(|o| o.priced == Priced::Folded).count();
    assert_eq!(pairs, 2 * s.layers, "the two residual projections a layer");
    let (a, b) = (
        price(&plan, "linear_residual"),
        price(&whole, "linear_residual"),
    );
    assert!((a - b).abs() <= 1e-12 * b, "{a} vs {b}");
    for o in plan.iter().filter(|o| o.name.starts_with("linear")) {
        let (t, was_fitted) = fitted.price_planned(o, "f32", &roof);
        assert!(was_fitted, "{o:?}");
        assert_eq!(t == 0.0, o.priced == Priced::Folded, "{o:?}");
    }
    // A report without the kind: every dispatch at its own roofline, the reduce too.
    let mut bare = shipped("h200");
    bare.rows.retain(|r| r.op != "linear_residual");
    let bare = Calibrated::new(bare);
    assert!(!bare.fit.kinds.iter().any(|k| k.op == "linear_residual"));
    for o in plan.iter().filter(|o| o.name == "linear_residual") {
        let own = roof.predict(&o.cost).seconds;
        assert_eq!(bare.price_planned(o, "f32", &roof), (own, false));
    }
}

#[test]
fn the_h200_report_held_out() {
    let fit = Calibration::fit(&shipped("h200"));
    assert_eq!(fit.kinds.len(), 24);
    for k in &fit.kinds {
        let held = k.held_out_error.unwrap();
        println!(
            "{} {}: efficiency {:.3}, fixed {:.2} µs, roofline {:.2}×, fitted {:.2}×, held out {held:.2}×",
            k.op,
            k.dtype,
            k.efficiency,
            k.latency_s * 1e6,
            k.roofline_error,
            k.fitted_error
        );
        // Every kind within the 1.15× goal but the f32 dense attention (1.19×: MiniLM's
        // 32 sequences of 128 tokens and single sequences of 512–8192 under one fit).
        let bound = if k.op == "attention" && k.dtype == "f32" {
            1.2
        } else {
            1.15
        };
        assert!(held <= bound, "{} {}: {held:.3}× held out", k.op, k.dtype);
        assert!(k.efficiency > 0.0 && k.latency_s >= 0.0);
        // The Linear layers' kinds are held against the compute roof (most of their
        // time is in compute-bound launches) with the depth term.
        if k.op.starts_with("linear") {
            assert!(k.bound == Bound::Compute && k.depth_s > 0.0, "{k:?}");
        }
    }
    let gemm = |dtype: &str| {
        fit.kinds
            .iter()
            .find(|k| k.op == "gemm" && k.dtype == dtype)
    };
    let (f32, f16) = (gemm("f32").unwrap(), gemm("f16").unwrap());
    assert!(f32.roofline_error > 1.8 && f32.held_out_error.unwrap() < 1.2);
    assert!(f32.depth_s > 0.0 && f16.depth_s > 0.0, "{f32:?} {f16:?}");
    assert!(f16.roofline_error > 2.5 && f16.held_out_error.unwrap() < 1.15);
}

/// The decoder's kernels on the H200 (`ridge bench --op` of every decoder kind, run 154:
/// the integer matrix-vector kernel's kinds and a decode step's attention at four head
/// counts new, each case after up to 200 ms of warm-up): the median kind held out within
/// the 1.15×; every kind within 1.3× of its own launches and held out, the decode
/// products within 1.25× (the LM head's f16 kind 1.20×, the others 1.01–1.13×; run 152,
/// warmed by 2000 launches at most, had 6 of 30 kinds past 1.25×, up to 2.42×: whole
/// widths timed 2–3× slow at idle clocks); every fit better than its roofline; the f32
/// prompt kinds within 1.2×; the one-pass decode attention priced by its keys, without a
/// work term, within 1.1× (1.20–1.22× by its bytes in run 152); the tensor-core kinds
/// held against the tensor cores' roof. (The end-to-end check, decoders
/// priced against the wall clock of the same call, is the CLI's
/// `predict_prices_ridges_decoder_plan_with_the_h200_reports_terms`.)
#[test]
fn decoder_kinds_fit_their_launches() {
    let r = shipped("h200-decoder");
    let fit = Calibration::fit(&r);
    assert_eq!(fit.kinds.len(), 30, "15 decoder kinds × f32, f16");
    for k in &fit.kinds {
        println!(
            "{} {}: efficiency {:.3}, fixed {:.2} µs, {:.2} ns per depth, roofline {:.2}×, fitted {:.2}×, held out {:.2}×",
            k.op,
            k.dtype,
            k.efficiency,
            k.latency_s * 1e6,
            k.depth_s * 1e9,
            k.roofline_error,
            k.fitted_error,
            k.held_out_error.unwrap_or(f64::NAN)
        );
        let limit = if k.op.contains("qmatvec") { 1.25 } else { 1.3 };
        assert!(
            k.fitted_error <= limit,
            "{} {}: {:.3}×",
            k.op,
            k.dtype,
            k.fitted_error
        );
        assert!(k.roofline_error > k.fitted_error, "{k:?}");
        let held = k.held_out_error.unwrap();
        assert!(held <= limit, "{} {}: {held:.3}× held out", k.op, k.dtype);
        let prompt_kinds = [
            "qmatmul",
            "rms_qmatmul_swiglu",
            "kv_attention_prefill",
            "attention_causal",
        ];
        if k.dtype == "f32" && prompt_kinds.contains(&k.op.as_str()) {
            assert!(held <= 1.2, "{} {}: {held:.3}× held out", k.op, k.dtype);
        }
        if k.op == "kv_attention" {
            assert!(k.efficiency == NO_WORK_TERM && k.depth_s > 0.0, "{k:?}");
            assert!(held <= 1.1, "{} {}: {held:.3}× held out", k.op, k.dtype);
        }
    }
    let median = fit.median_held_out().unwrap();
    assert!(median <= 1.15, "median kind {median:.3}× held out");
    let (tensor, name) = r.measured.roof_for("rms_qmatmul_swiglu", true);
    assert_eq!(name, "measured tensor cores");
    assert!(tensor.peak_flops > 5e14);
    assert_eq!(
        r.measured.roof_for("rms_qmatvec_swiglu", true).1,
        "measured f16 FMA"
    );
}

/// The decoder's kinds on an H100 (80 GB HBM3; `calibration.sh`, benches/NOTES.md
/// 2026-12-07, fifth session): all 21 kinds in f32 and f16, the fused decode attention's and
/// the argmax's among them, every kind held out within the 1.15×, every fit better
/// than its roofline, the argmax within 1.05×. Its prompts of 3 to 4096 tokens make the
/// f32 prompt products' waves over the GPU plain (11.9 TFLOP/s at 1024 tokens, 10.8 at 2048,
/// 15.0 at 4096, the previous session's sweep): the waves term prices `qmatmul` and
/// `rms_qmatmul_rope` in f32, and without their workgroups (no waves) they hold out worse.
#[test]
fn h100_decoder_kinds_held_out() {
    let r = shipped("h100-decoder");
    let fit = Calibration::fit(&r);
    assert_eq!(fit.kinds.len(), 42, "21 decoder kinds × f32, f16");
    for k in &fit.kinds {
        assert!(k.roofline_error > k.fitted_error, "{k:?}");
        let held = k.held_out_error.unwrap();
        let limit = if k.op == "argmax" { 1.05 } else { 1.15 };
        assert!(held <= limit, "{} {}: {held:.3}× held out", k.op, k.dtype);
    }
    let mut plain = r.clone();
    for row in &mut plain.rows {
        row.workgroups *= f64::from(row.invocations > 0.0);
    }
    let without = Calibration::fit(&plain);
    for op in ["qmatmul", "rms_qmatmul_rope"] {
        let kind = |f: &Calibration| {
            f.kinds
                .iter()
                .find(|k| k.op == op && k.dtype == "f32")
                .cloned()
                .unwrap()
        };
        let (waves, flat) = (kind(&fit), kind(&without));
        eprintln!(
            "{op} f32: {} workgroups at once, held out {:.3}× (without waves {:.3}×)",
            waves.concurrent_workgroups,
            waves.held_out_error.unwrap(),
            flat.held_out_error.unwrap()
        );
        assert!(waves.concurrent_workgroups > 0.0, "{waves:?}");
        assert_eq!(flat.concurrent_workgroups, 0.0);
        assert!(
            waves.held_out_error.unwrap() * super::fit::BETTER_BY < flat.held_out_error.unwrap()
        );
    }
}

/// The CPU drivers' reports (`ridge bench --size medium` on lavapipe, Vulkan, and on
/// llvmpipe, OpenGL, one 2-core machine; benches/NOTES.md, 2026-12-06 sixth session): every
/// kind of the full sweep in its storage types; the median kind held out within 1.2× (1.14×
/// and 1.16×; the goal is 1.15×) where the median kind's roofline is 5× off. That machine's
/// speed moves ~1.8× over minutes (its copy measured at 4 and at 7.5 GB/s; llvmpipe's LM head
/// at K = 576 took 18.5 ms in one sweep, 7.7–8.8 ms in three runs of that kind alone), so a
/// kind's held-out error moves by 0.1–0.4 from sweep to sweep (two llvmpipe sweeps of one
/// build: median kind 1.14× then 1.16×): no kind beyond 2×, four in five within 1.3×. The Linear
/// kinds are priced by the whole 128-row tiles the CPU kernel computes (a Linear layer of
/// 16, 64 or 128 rows took 7.8–8.0 ms alike), where their useful FLOPs fit them worse. The
/// one-row products take a row of W a lane (`measured.lane_rows`), and stream W at a
/// quarter or more of the copy rate: within 4× of their roofline, where the GPU shapes
/// (16–64 lanes a row, summed by shuffles) were 8.5–15.9× off on lavapipe.
#[test]
fn cpu_driver_reports_held_out() {
    for (name, kinds) in [("lavapipe", 54), ("llvmpipe", 29)] {
        let r = shipped(name);
        let fit = Calibration::fit(&r);
        assert_eq!(fit.kinds.len(), kinds, "{name}");
        let median = fit.median_held_out().unwrap();
        assert!(median <= 1.2, "{name}: median kind {median:.3}× held out");
        let mut roofline: Vec<f64> = fit.kinds.iter().map(|k| k.roofline_error).collect();
        roofline.sort_by(f64::total_cmp);
        assert!(roofline[roofline.len() / 2] > 3.0, "{name}: {roofline:?}");
        let mut within = 0;
        for k in &fit.kinds {
            let held = k.held_out_error.unwrap();
            println!(
                "{name} {} {}: roofline {:.2}×, held out {held:.2}×",
                k.op, k.dtype, k.roofline_error
            );
            assert!(held <= 2.0, "{name} {k:?}");
            within += usize::from(held <= 1.3);
            let one_row = k.op.contains("qmatvec") && !k.op.ends_with("_rows");
            if one_row {
                assert!(k.roofline_error <= 4.0, "{name} {k:?}");
            }
        }
        assert!(
            5 * within >= 4 * kinds,
            "{name}: {within} of {kinds} within 1.3×"
        );
        // Both swept with Mesa's llvmpipe's launches: a row of W a lane for one row of x and
        // for short prompts.
        assert!(
            r.measured.lane_rows && r.measured.prompt_lane_rows,
            "{name}"
        );
        // Priced by their useful FLOPs instead, the padded Linear launches fit worse.
        let mut useful = r.clone();
        useful.rows.iter_mut().for_each(|row| row.tiled_flops = 0.0);
        let linear = |f: &Calibration| {
            f.kinds
                .iter()
                .find(|k| k.op == "linear" && k.dtype == "f32")
                .and_then(|k| k.held_out_error)
                .unwrap()
        };
        let (tiles, flops) = (linear(&fit), linear(&Calibration::fit(&useful)));
        println!("{name}: linear f32 {tiles:.3}× on tiles against {flops:.3}× on useful FLOPs");
        assert!(
            tiles < 1.2 && tiles * 1.1 < flops,
            "{name}: {tiles:.3}× against {flops:.3}×"
        );
    }
}

/// The browser's adapter (`cargo xtask bench-browser`: the medium sweep in headless
/// Chromium's WebGPU on SwiftShader, 2 cores, GPU timestamps; benches/NOTES.md, 2026-12-06
/// sixth session): 29 kinds in f32 (no `shader-f16`), the median kind held out within the
/// 1.15× goal where its roofline is 9× off. SwiftShader runs a workgroup on a CPU thread,
/// its invocations in turn: the row kinds need their workgroups (4096 rows of 1024 took
/// 1.2–1.4× the time of 4096 of 384 where their bytes are 2.7×; held out 1.5–1.75× without a
/// time per workgroup, within 1.2× with it, sweep to sweep). SwiftShader is a CPU driver
/// (a fallback adapter): its one-row products take a row of W a lane, as the report records.
#[test]
fn browser_adapter_report_held_out() {
    let r = shipped("swiftshader");
    assert!(r.adapter.contains("swiftshader"), "{}", r.adapter);
    // One-row products a row of W a lane; short prompts the GPU shape (slower there a lane a
    // row of W: benches/NOTES.md, 2026-12-06 seventh session).
    assert!(r.measured.lane_rows && !r.measured.prompt_lane_rows);
    let fit = Calibration::fit(&r);
    assert_eq!(fit.kinds.len(), 29);
    let median = fit.median_held_out().unwrap();
    assert!(median <= 1.15, "median kind {median:.3}× held out");
    let mut roofline: Vec<f64> = fit.kinds.iter().map(|k| k.roofline_error).collect();
    roofline.sort_by(f64::total_cmp);
    assert!(roofline[roofline.len() / 2] > 5.0, "{roofline:?}");
    // The same report with no launch units stated: its kinds fit on their other terms.
    let mut unitless = r.clone();
    unitless.rows.iter_mut().for_each(|row| {
        row.workgroups = 0.0;
        row.invocations = 0.0;
    });
    let without = Calibration::fit(&unitless);
    for (k, bare) in fit.kinds.iter().zip(&without.kinds) {
        let held = k.held_out_error.unwrap();
        let bare_held = bare.held_out_error.unwrap();
        println!(
            "swiftshader {} {}: roofline {:.2}×, held out {held:.2}× ({bare_held:.2}× \
             without units), {:.2} µs per {}",
            k.op,
            k.dtype,
            k.roofline_error,
            k.workgroup_s * 1e6,
            if k.per_invocation {
                "invocation"
            } else {
                "workgroup"
            }
        );
        let row_kind = k.op.ends_with("norm") || k.op == "softmax";
        if row_kind {
            // The row kinds' times follow their rows far more than their bytes.
            assert!(k.workgroup_s > 0.0 && !k.per_invocation, "{k:?}");
            assert!(
                held * 1.3 < bare_held,
                "{} {}: {held:.3}× against {bare_held:.3}×",
                k.op,
                k.dtype
            );
        }
        let bound = if row_kind { 1.25 } else { 1.45 };
        assert!(held <= bound, "{} {}: {held:.3}×", k.op, k.dtype);
        // Better than the roofline wherever it is off by more than a quarter (the add runs
        // at the copy's rate: 1.20× off, held out 1.22×).
        assert!(held < k.roofline_error || k.roofline_error < 1.25, "{k:?}");
    }
}

/// A kind with one launch has no held-out error; a report without timed launches, no kinds.
#[test]
fn thin_reports() {
    let mut one = shipped("h200");
    let first = one.rows.iter().position(|r| r.op == "transpose").unwrap();
    one.rows = vec![one.rows[first].clone()];
    let fit = Calibration::fit(&one);
    let t = fit.kinds.iter().find(|k| k.op == "transpose").unwrap();
    assert_eq!((t.rows, t.held_out_error), (1, None));
    let mut r = shipped("h200");
    r.rows.iter_mut().for_each(|row| row.measured_ms = None);
    assert!(Calibration::fit(&r).kinds.is_empty());
}
