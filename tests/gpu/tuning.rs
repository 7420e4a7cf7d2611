//! Tuning tables reach the kernels; bad entries fall back to heuristics; the autotuner
//! accepts only candidates that compute the right result.

use std::sync::Arc;
use std::time::Duration;

use ridge::core::{ContextOptions, DType, Error, Tensor};
use ridge::kernels::attention::{Attention, AttentionKernel, TiledConfig};
use ridge::kernels::{Gemm, GemmConfig, GemmKernel};
use ridge::tune::autotune::{self, Problem, TuneOptions};
use ridge::tune::{Entry, Origin, Table, TableSet};

use crate::harness::*;

fn table_with(op: &str, bucket: &[usize], params: &[(&str, u32)]) -> TableSet {
    let mut t = Table::new("test", None);
    t.insert(Entry {
        op: op.into(),
        bucket: bucket.to_vec(),
        dtype: "f32".into(),
        params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        shader_hash: "*".into(),
        ms: None,
        baseline_ms: None,
        origin: Origin::Heuristic,
    });
    TableSet {
        layers: vec![("test".into(), t)],
    }
}

#[test]
fn a_table_entry_picks_the_kernel_and_stays_correct() {
    on_every_adapter_with(
        "tuning_entry_used",
        |_| ContextOptions::default(),
        |ctx| {
            let cfg = GemmConfig {
                bm: 32,
                bn: 64,
                bk: 8,
                tm: 4,
                tn: 4,
                stages: 1,
                splits: 1,
            };
            let set = table_with(
                "gemm",
                &[128, 128, 128],
                &[
                    ("COOP", 0),
                    ("BM", 32),
                    ("BN", 64),
                    ("BK", 8),
                    ("TM", 4),
                    ("TN", 4),
                ],
            );
            ctx.set_tuning(Some(Arc::new(set)));
            let g = Gemm::new(100, 90, 80);
            assert_eq!(g.kernel(ctx, DType::F32), GemmKernel::Tiled(cfg));
            crate::gemm::check(ctx, g, DType::F32, true, 1, 1, 11)?;
            // An entry beyond the adapter's limits (2048 invocations) falls back to the heuristic.
            let set = table_with(
                "gemm",
                &[128, 128, 128],
                &[
                    ("COOP", 0),
                    ("BM", 256),
                    ("BN", 256),
                    ("BK", 8),
                    ("TM", 4),
                    ("TN", 8),
                ],
            );
            ctx.set_tuning(Some(Arc::new(set)));
            assert_eq!(
                g.kernel(ctx, DType::F32),
                GemmKernel::heuristic(ctx, DType::F32)
            );
            // So do entries no tiling could hold: a zero thread tile (a division by zero
            // once), sizes whose products overflow u32, a zero tensor-core tile.
            for params in [
                [
                    ("COOP", 0),
                    ("BM", 64),
                    ("BN", 64),
                    ("BK", 8),
                    ("TM", 0),
                    ("TN", 4),
                ],
                [
                    ("COOP", 0),
                    ("BM", 64),
                    ("BN", 64),
                    ("BK", 8),
                    ("TM", 4),
                    ("TN", 0),
                ],
                [
                    ("COOP", 0),
                    ("BM", 1 << 30),
                    ("BN", 1 << 30),
                    ("BK", 1 << 20),
                    ("TM", 4),
                    ("TN", 4),
                ],
                [
                    ("COOP", 1),
                    ("SG_M", 0),
                    ("SG_N", 1 << 31),
                    ("FM", 1 << 31),
                    ("FN", 2),
                    ("BK", 16),
                ],
            ] {
                ctx.set_tuning(Some(Arc::new(table_with(
                    "gemm",
                    &[128, 128, 128],
                    &params,
                ))));
                if g.kernel(ctx, DType::F32) != GemmKernel::heuristic(ctx, DType::F32) {
                    return Err(Error::invalid("tuning", format!("{params:?} was used")));
                }
            }
            // A row-op entry with a non-power-of-two workgroup is ignored too.
            let set = table_with("softmax", &[128, 128], &[("WG", 48)]);
            ctx.set_tuning(Some(Arc::new(set)));
            let x = Tensor::from_slice(ctx, &random(1, 128 * 100, -3.0, 3.0), &[100, 128])?;
            let y = poisoned(ctx, &[100, 128], DType::F32)?;
            ridge::kernels::Softmax::new(100, 128).run(ctx, &x, None, &y)?;
            let got = block(y.to_vec::<f32>(ctx))?;
            let want = ridge::kernels::Softmax::new(100, 128)
                .reference(&block(x.to_vec::<f32>(ctx))?, None);
            assert_close("softmax", &got, &want, |i| {
                ridge::kernels::Softmax::new(100, 128).error_bound(DType::F32, want[i])
            })
        },
    );
}

/// A 64³ f32 GEMM and the row op `row_op` on 64 × 384, tuned within `budget`, one launch
/// per candidate, with no early stop.
fn small_tuning(row_op: &str, budget: Duration) -> (Vec<Problem>, TuneOptions) {
    let problem = |op: &str, shape: Vec<usize>| Problem {
        op: op.into(),
        shape,
        dtype: DType::F32,
    };
    let opts = TuneOptions {
        ops: vec![],
        budget,
        repeats: 1,
        good_enough: 2.0,
    };
    (
        vec![
            problem("gemm", vec![64, 64, 64]),
            problem(row_op, vec![64, 384]),
        ],
        opts,
    )
}

#[test]
fn the_autotuner_measures_checked_candidates_within_its_budget() {
    on_every_adapter_with(
        "tuning_autotune",
        |_| ContextOptions::default(),
        |ctx| {
            let (problems, opts) = small_tuning("layer_norm", Duration::from_secs(60));
            let reports = std::cell::RefCell::new(Vec::new());
            let (table, trials) = block(autotune::autotune(
                ctx,
                &problems,
                &opts,
                None,
                "test",
                &|p| reports.borrow_mut().push((p.done, p.total)),
            ))?;
            let reports = reports.into_inner();
            // Progress counts candidates; each problem also times the choice in force first.
            let candidates = trials.iter().filter(|t| !t.in_force).count();
            assert_eq!(trials.iter().filter(|t| t.in_force).count(), problems.len());
            assert!(
                reports.windows(2).all(|w| w[0].0 < w[1].0)
                    && reports
                        .last()
                        .is_some_and(|&(done, total)| done == total && total == candidates),
                "progress {reports:?} for {candidates} candidates"
            );
            assert!(trials.iter().any(|t| t.result.is_ok()), "{trials:?}");
            // An entry where a candidate beat the choice in force (the heuristic here), never
            // one that is slower.
            assert!(table.entries.len() <= 2, "{table:?}");
            for e in &table.entries {
                assert!(
                    matches!(e.origin, Origin::Measured { .. })
                        && e.ms
                            .is_some_and(|ms| ms > 0.0 && ms < e.baseline_ms.unwrap()),
                    "{e:?}"
                );
            }
            // Every accepted GEMM entry is a kernel that fits the adapter.
            if let Some(gemm) = table.entries.iter().find(|e| e.op == "gemm") {
                let kernel = GemmKernel::from_params(&gemm.params)
                    .ok_or_else(|| Error::invalid("tune", "unparsable entry"))?;
                assert!(kernel.fits(ctx, DType::F32));
            }
            // The autotuner leaves the context without its temporary tuning.
            assert_eq!(
                Gemm::new(64, 64, 64).kernel(ctx, DType::F32),
                GemmKernel::heuristic(ctx, DType::F32)
            );
            Ok(())
        },
    );
}

/// A budget spent before the end starves no problem: each problem gets a share of what is
/// left, always times the choice in force and its first candidate (the last problems used to
/// get none), and an entry is written only for a candidate faster than what is in force (a
/// zero budget wrote its first, slow candidate and made Ridge slower).
#[test]
fn a_short_budget_never_writes_a_slower_choice() {
    on_every_adapter_with(
        "tuning_budget_shared",
        |_| ContextOptions::default(),
        |ctx| {
            let (problems, opts) = small_tuning("softmax", Duration::ZERO);
            let (table, trials) = block(autotune::autotune(
                ctx,
                &problems,
                &opts,
                None,
                "test",
                &|_| {},
            ))?;
            for pr in &problems {
                let mine: Vec<_> = trials.iter().filter(|t| t.problem == *pr).collect();
                // The choice in force first, then one candidate, then the budget is spent.
                assert!(mine[0].in_force && mine[0].result.is_ok(), "{:?}", mine[0]);
                assert!(!mine[1].in_force && mine[1].result.is_ok(), "{:?}", mine[1]);
                assert!(
                    mine[2..]
                        .iter()
                        .all(|t| t.result.as_ref().is_err_and(|e| e == "budget spent")),
                    "{mine:?}"
                );
            }
            // An entry only where the candidate beat the choice in force, and says by how much.
            for e in &table.entries {
                let (ms, before) = (e.ms.unwrap(), e.baseline_ms.unwrap());
                assert!(ms < before, "{e:?}");
            }
            assert!(table.entries.len() <= problems.len());
            Ok(())
        },
    );
}

/// An f16 problem stops early against the f16 roof, not the f32 one: with an f32 roof any
/// candidate beats, the f32 GEMM stops after its first candidate, while the f16 GEMM,
/// against a roof none can reach, goes on to the next.
#[test]
fn each_storage_type_stops_early_against_its_own_roof() {
    use ridge::model::roofline::{CeilingSource, Ceilings};
    on_every_adapter_with(
        "tuning_roofs",
        |_| ContextOptions::default(),
        |ctx| {
            if !ctx.has_f16() {
                return Ok(());
            }
            let roof =
                |x: f64| Ceilings::new(x, x * 1e-3, 0.0, CeilingSource::Custom("test".into()));
            let roofs = autotune::Roofs {
                f32: roof(1e-12),
                f16: roof(1e18),
            };
            let problems: Vec<Problem> = [DType::F32, DType::F16]
                .into_iter()
                .map(|dtype| Problem {
                    op: "gemm".into(),
                    shape: vec![64, 64, 64],
                    dtype,
                })
                .collect();
            let opts = TuneOptions {
                ops: vec![],
                budget: Duration::from_secs(20),
                repeats: 1,
                good_enough: 0.9,
            };
            let (_, trials) = block(autotune::autotune(
                ctx,
                &problems,
                &opts,
                Some(&roofs),
                "test",
                &|_| {},
            ))?;
            let timed = |dtype| {
                trials
                    .iter()
                    .filter(|t| !t.in_force && t.problem.dtype == dtype && t.result.is_ok())
                    .count()
            };
            assert_eq!(timed(DType::F32), 1, "{trials:?}");
            assert!(timed(DType::F16) >= 2, "{trials:?}");
            Ok(())
        },
    );
}

/// Dense attention's tiling comes from the tuning table (op `attention`, [batch × heads, seq,
/// head_dim]) where the entry fits, and the result stays right; an entry that does not fit
/// the head width falls back to Ridge's choice; a tiling given explicitly wins over both. The
/// autotuner's attention entry is a tiling that fits.
#[test]
fn attention_tilings_come_from_the_table_and_the_autotuner() {
    on_every_adapter_with(
        "tuning_attention",
        |_| ContextOptions::default(),
        |ctx| {
            let att = Attention::new(2, 3, 45, 32);
            let default = att.kernel(ctx, DType::F32, None)?;
            let small = TiledConfig { bq: 16, bkv: 16 };
            let entry =
                |bq, bkv| table_with("attention", &[8, 64, 32], &[("BQ", bq), ("BKV", bkv)]);
            ctx.set_tuning(Some(Arc::new(entry(small.bq, small.bkv))));
            assert_eq!(
                att.kernel(ctx, DType::F32, None)?,
                AttentionKernel::Tiled(small)
            );
            crate::attention::check(ctx, att, DType::F32, Some(&[45, 20]), None, 3)?;
            let given = TiledConfig { bq: 32, bkv: 32 };
            let pinned = Attention {
                tiling: Some(given),
                ..att
            };
            assert_eq!(
                pinned.kernel(ctx, DType::F32, None)?,
                AttentionKernel::Tiled(given)
            );
            // 32 keys a tile cannot serve heads of 32 when 8 keys are asked for (4 tiles a head).
            ctx.set_tuning(Some(Arc::new(entry(64, 8))));
            assert_eq!(att.kernel(ctx, DType::F32, None)?, default);
            ctx.set_tuning(None);

            let problem = Problem {
                op: "attention".into(),
                shape: vec![6, 64, 32],
                dtype: DType::F32,
            };
            let opts = TuneOptions {
                ops: vec![],
                budget: Duration::from_secs(60),
                repeats: 1,
                good_enough: 2.0,
            };
            let (table, trials) = block(autotune::autotune(
                ctx,
                std::slice::from_ref(&problem),
                &opts,
                None,
                "test",
                &|_| {},
            ))?;
            assert!(trials.iter().all(|t| t.result.is_ok()), "{trials:?}");
            let tried = trials.iter().filter(|t| !t.in_force).count();
            assert_eq!(tried, TiledConfig::candidates(ctx, 32).len());
            // An entry only if a tiling beat the one in force.
            if let Some(e) = table.entries.first() {
                let tiled = TiledConfig::from_params(&e.params)
                    .ok_or_else(|| Error::invalid("tune", "unparsable attention entry"))?;
                assert!(tiled.fits(ctx, 32) && e.op == "attention", "{e:?}");
                assert!(autotune::usable(ctx, &problem, &e.params));
            }
            // `ridge tune --show` flags entries the launcher would ignore.
            let fit = TiledConfig::candidates(ctx, 32)[0].to_params();
            assert!(autotune::usable(ctx, &problem, &fit));
            let unfit = TiledConfig { bq: 64, bkv: 8 }.to_params();
            assert!(!autotune::usable(ctx, &problem, &unfit));
            Ok(())
        },
    );
}
