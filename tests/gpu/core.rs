//! The runtime core: adapter selection, tensors, the pipeline cache, the profiler.

use half::f16;
use ridge::core::{Context, ContextOptions, DType, Error, Tensor, TimingMethod, wgpu};
use ridge::kernels::{Binary, Softmax, Unary, binary, unary};

use crate::harness::*;

#[test]
fn tensors_round_trip_every_length_and_dtype() {
    on_every_adapter("core_tensor_round_trip", |ctx| {
        for n in [0usize, 1, 2, 3, 5, 1023] {
            let data = random(n as u64, n, -10.0, 10.0);
            let t = Tensor::from_slice(ctx, &data, &[n])?;
            assert_close("f32", &block(t.to_vec::<f32>(ctx))?, &data, |_| 0.0)?;
            // Odd f16 lengths end mid-word: the padding must not leak or be lost.
            let h: Vec<f16> = data.iter().map(|&v| f16::from_f32(v)).collect();
            let t = Tensor::from_slice(ctx, &h, &[n])?;
            assert_eq!(block(t.to_vec::<f16>(ctx))?, h);
            let want: Vec<f32> = h.iter().map(|v| v.to_f32()).collect();
            assert_close("f16 as f32", &block(t.to_f32(ctx))?, &want, |_| 0.0)?;
        }
        Ok(())
    });
}

/// Read-backs in flight while more work is recorded: each sees the tensor as it was when it
/// started, whichever is waited for first; f32 and f16; a u32 tensor as u32 and only so.
#[test]
fn read_backs_overlap_later_work_and_keep_their_order() {
    on_every_adapter("core_read_back_in_flight", |ctx| {
        for dtype in dtypes(ctx) {
            let n = 1001;
            let (a, av) = upload(ctx, &random(1, n, -4.0, 4.0), &[n], dtype)?;
            let (b, bv) = upload(ctx, &random(2, n, -4.0, 4.0), &[n], dtype)?;
            let (t, tv) = upload(ctx, &random(3, n, -4.0, 4.0), &[n], dtype)?;
            let before = t.read_back(ctx)?;
            binary(ctx, Binary::Add, &a, &b, &t)?;
            let after = t.read_back(ctx)?;
            let sum: Vec<f32> = block(t.to_f32(ctx))?;
            let want = Binary::Add.reference(&av, &[n], &bv, &[n])?;
            assert_close("after", &block(after.to_f32(ctx))?, &sum, |_| 0.0)?;
            assert_close("sum", &sum, &want, |i| {
                Binary::Add.error_bound(dtype, 0.0, want[i])
            })?;
            assert_close("before", &block(before.to_f32(ctx))?, &tv, |_| 0.0)?;
        }
        // u32 tensors (token ids) read back as u32, and only so.
        let ids = Tensor::from_slice(ctx, &[1u32, 2, 3], &[3])?;
        let got = block(ids.read_back(ctx)?.to_u32(ctx))?;
        if got != [1, 2, 3] {
            return Err(Error::invalid("u32 read-back", format!("{got:?}")));
        }
        expect_err("u32 as f32", block(ids.read_back(ctx)?.to_f32(ctx)), |e| {
            matches!(e, Error::DType { .. })
        })
    });
}

#[test]
fn tensor_misuse_gives_typed_errors() {
    on_every_adapter("core_tensor_errors", |ctx| {
        let t = Tensor::empty(ctx, &[2, 3], DType::F32)?;
        expect_err("length", t.write(ctx, &[1.0f32; 5]), |e| {
            matches!(e, Error::Shape { .. })
        })?;
        expect_err("dtype", t.write(ctx, &[f16::ONE; 6]), |e| {
            matches!(e, Error::DType { .. })
        })?;
        expect_err("read dtype", block(t.to_vec::<f16>(ctx)), |e| {
            matches!(e, Error::DType { .. })
        })?;
        expect_err("reshape", t.reshape(&[4]), |e| {
            matches!(e, Error::Shape { .. })
        })?;
        expect_err(
            "overflow",
            Tensor::empty(ctx, &[usize::MAX, 2], DType::F32),
            |e| matches!(e, Error::Shape { .. }),
        )?;
        let too_big = (ctx.limits().max_buffer_size / 4 + 1) as usize;
        expect_err(
            "max buffer",
            Tensor::empty(ctx, &[too_big], DType::F32),
            |e| {
                matches!(
                    e,
                    Error::LimitExceeded {
                        limit: "maxBufferSize",
                        ..
                    }
                )
            },
        )?;
        let r = t.reshape(&[3, 2])?;
        assert_eq!((r.shape(), r.strides()), (&[3, 2][..], &[2, 1][..]));
        Ok(())
    });
}

#[test]
fn no_pipeline_is_compiled_twice() {
    on_every_adapter_with(
        "core_pipeline_cache",
        |_| ContextOptions::default(),
        |ctx| {
            let x = Tensor::from_slice(ctx, &random(1, 64, -1.0, 1.0), &[8, 8])?;
            let y = Tensor::empty(ctx, &[8, 8], DType::F32)?;
            unary(ctx, Unary::Gelu, &x, &y)?;
            Softmax::new(8, 8).run(ctx, &x, None, &y)?;
            let compiled = ctx.pipelines().compiled();
            assert_eq!(compiled, 2);
            for _ in 0..3 {
                unary(ctx, Unary::Gelu, &x, &y)?;
                Softmax::new(8, 8).run(ctx, &x, None, &y)?;
            }
            unary(ctx, Unary::Scale(2.0), &x, &y)?; // a new entry point compiles once more
            assert_eq!(ctx.pipelines().compiled(), compiled + 1);
            // The source of each, in order, for tools that inspect the driver's code.
            let all = ctx.pipelines().sources(0);
            let names: Vec<_> = all.iter().map(|s| (s.shader, s.entry)).collect();
            assert_eq!(
                names,
                [
                    ("elementwise", "gelu_erf"),
                    ("softmax", "softmax"),
                    ("elementwise", "scale")
                ]
            );
            assert!(all[2].wgsl.contains("fn scale(") && all[2].wgsl.contains("alias T = f32;"));
            assert_eq!(ctx.pipelines().sources(compiled).len(), 1);
            assert!(ctx.pipelines().sources(compiled + 1).is_empty());
            block(y.to_vec::<f32>(ctx)).map(|_| ())
        },
    );
}

/// Consecutive dispatches share one compute pass: each must still see what the one before
/// wrote. A chain of 96 dependent adds ping-pongs between two buffers of 2²⁰ elements
/// (long enough for a real GPU to overlap neighbouring dispatches if nothing ordered them),
/// across the recorder's submissions and around a profiled stretch (a pass per dispatch);
/// integers keep the sums exact.
#[test]
fn dependent_dispatches_in_one_pass_see_each_others_writes() {
    on_every_adapter("core_shared_pass", |ctx| {
        let n = 1 << 20;
        let start: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
        let step: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
        let mut x = Tensor::from_slice(ctx, &start, &[n])?;
        let mut y = Tensor::empty(ctx, &[n], DType::F32)?;
        let b = Tensor::from_slice(ctx, &step, &[n])?;
        let links = 96;
        for i in 0..links {
            if i == 40 {
                ctx.start_profiling();
            }
            binary(ctx, Binary::Add, &x, &b, &y)?;
            if i == 50 {
                block(ctx.finish_profiling())?;
            }
            std::mem::swap(&mut x, &mut y);
        }
        let want: Vec<f32> = (0..n).map(|i| start[i] + links as f32 * step[i]).collect();
        assert_close("chain", &block(x.to_f32(ctx))?, &want, |_| 0.0)
    });
}

fn profile_three_ops(ctx: &Context) -> ridge::core::Result<ridge::core::Profile> {
    let x = Tensor::from_slice(ctx, &random(1, 1 << 16, -1.0, 1.0), &[256, 256])?;
    let y = Tensor::empty(ctx, &[256, 256], DType::F32)?;
    ctx.start_profiling();
    unary(ctx, Unary::Gelu, &x, &y)?;
    Softmax::new(256, 256).run(ctx, &x, None, &y)?;
    unary(ctx, Unary::Gelu, &x, &y)?;
    block(ctx.finish_profiling())
}

/// The driver's pipeline cache (where wgpu has one: Vulkan) is written when a context that
/// compiled kernels is dropped and found by the next context on the adapter; where there is
/// none, nothing is written.
#[test]
fn the_driver_pipeline_cache_is_kept_between_contexts() {
    on_every_adapter("core_driver_pipeline_cache", |shared| {
        let dir = std::env::temp_dir().join(format!(
            "ridge-test-pipelines-{}-{}",
            std::process::id(),
            shared.info().backend.to_str()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let options = ContextOptions {
            pipeline_cache_dir: Some(dir.clone()),
            ..Default::default()
        };
        let open = || block(Context::on_adapter(shared.adapter().clone(), &options));
        {
            let ctx = open()?;
            let loaded = ctx.pipelines().driver().map(|d| d.loaded());
            assert_ne!(loaded, Some(true), "an empty folder held a cache");
            let x = Tensor::from_slice(&ctx, &[0.5f32, -1.0, 2.0, 3.0], &[4])?;
            let y = Tensor::empty(&ctx, &[4], DType::F32)?;
            unary(&ctx, Unary::Gelu, &x, &y)?;
            block(y.to_f32(&ctx))?;
        }
        let files: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        let has_cache = shared.features().contains(wgpu::Features::PIPELINE_CACHE);
        let result = if has_cache {
            let second = open()?;
            match (files.as_slice(), second.pipelines().driver()) {
                ([file], Some(d))
                    if d.loaded() && std::fs::metadata(file).is_ok_and(|m| m.len() > 0) =>
                {
                    Ok(())
                }
                _ => Err(Error::invalid(
                    "pipeline cache",
                    format!("expected one saved cache, loaded again; found {files:?}"),
                )),
            }
        } else if files.is_empty() {
            Ok(())
        } else {
            Err(Error::invalid(
                "pipeline cache",
                format!("no pipeline cache on this adapter, yet {files:?} was written"),
            ))
        };
        let _ = std::fs::remove_dir_all(&dir);
        result
    });
}

#[test]
fn profiler_times_every_dispatch_and_says_how() {
    on_every_adapter_with(
        "core_profiler",
        |_| ContextOptions::default(),
        |ctx| {
            let p = profile_three_ops(ctx)?;
            let names: Vec<_> = p.spans.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(names, ["gelu", "softmax", "gelu"]);
            let expected = if ctx.has_timestamps() {
                TimingMethod::GpuTimestamps
            } else {
                TimingMethod::WallClock
            };
            assert_eq!(p.method, expected);
            for s in &p.spans {
                // Measured times are positive; an unmeasurable one is None, never 0.
                assert!(s.ms.is_none_or(|ms| ms > 0.0 && ms.is_finite()), "{s:?}");
            }
            assert_eq!(p.by_name()[0].1, 2);
            // The GPU's elapsed time covers the three dispatches, which run one after the
            // other (each pass sees the previous one's writes): at least their sum, less
            // the timer's rounding.
            if let (Some(elapsed), Some(total)) = (p.elapsed_ms(), p.total_ms()) {
                assert!(elapsed >= 0.99 * total && elapsed.is_finite(), "{p:?}");
            } else {
                assert_ne!(expected, TimingMethod::GpuTimestamps, "{p:?}");
            }
            // Without a profile nothing is recorded.
            assert!(block(ctx.finish_profiling())?.spans.is_empty());
            Ok(())
        },
    );
}

/// naga's run-time checks (clamped indices, bounded loops) compiled back in must not change
/// a result: a kernel that gave different answers with them would be reading or writing
/// outside its workgroup arrays, which Vulkan runs without the checks (`RuntimeChecks`).
#[test]
fn the_kernel_suite_passes_with_naga_checks_compiled_in() {
    on_every_adapter_with(
        "core_shader_checks",
        |_| ContextOptions {
            shader_checks: true,
            ..Default::default()
        },
        |ctx| {
            assert_eq!(ctx.pipelines().checks(), ridge::core::RuntimeChecks::Naga);
            for case in block(ridge::kernels::suite::run(ctx, 1))? {
                if !case.passed {
                    return Err(Error::invalid(
                        "suite with shader checks",
                        format!("{} {} {}: {}", case.op, case.shape, case.dtype, case.detail),
                    ));
                }
            }
            Ok(())
        },
    );
}

#[test]
fn profiler_falls_back_to_the_wall_clock_without_timestamps() {
    on_every_adapter_with(
        "core_profiler_wall_clock",
        |_| ContextOptions {
            without_features: wgpu::Features::TIMESTAMP_QUERY,
            ..Default::default()
        },
        |ctx| {
            let p = profile_three_ops(ctx)?;
            assert_eq!(p.method, TimingMethod::WallClock);
            assert!(
                p.spans.iter().all(|s| s.ms.is_some_and(|ms| ms > 0.0)),
                "{p:?}"
            );
            Ok(())
        },
    );
}

#[test]
fn adapters_are_selected_by_backend_name_or_index() {
    let all = block(ridge::core::context::adapters());
    assert!(!all.is_empty());
    let first = all[0].get_info();
    let by_index = ridge::core::context::select(all.clone(), "0");
    assert_eq!(by_index[0].get_info(), first);
    let by_backend = ridge::core::context::select(all.clone(), first.backend.to_str());
    assert!(
        by_backend
            .iter()
            .all(|a| a.get_info().backend == first.backend)
    );
    let by_name = ridge::core::context::select(all.clone(), &first.name.to_uppercase());
    assert!(!by_name.is_empty());
    let none = block(Context::with_options(ContextOptions {
        adapter: Some("no such gpu".into()),
        ..Default::default()
    }));
    match none {
        Err(Error::NoAdapter { wanted, present }) => {
            assert_eq!(wanted.as_deref(), Some("no such gpu"));
            assert_eq!(present.len(), all.len());
        }
        other => panic!("expected NoAdapter, got {other:?}"),
    }
}

#[test]
fn contexts_use_the_adapters_own_limits_and_features() {
    on_every_adapter("core_limits", |ctx| {
        let own = ctx.adapter().limits();
        assert_eq!(
            ctx.limits().max_storage_buffer_binding_size,
            own.max_storage_buffer_binding_size
        );
        assert_eq!(
            ctx.limits().max_compute_workgroup_storage_size,
            own.max_compute_workgroup_storage_size
        );
        assert_eq!(ctx.limits().max_buffer_size, own.max_buffer_size);
        let wanted = ridge::core::context::wanted_features() & ctx.adapter().features();
        assert_eq!(ctx.features() & wanted, wanted);
        let fp = ctx.fingerprint();
        assert!(!fp.name.is_empty() && !fp.backend.is_empty());
        Ok(())
    });
}

/// The copy the transpose bench sets transposes against copies exactly and refuses what it
/// cannot copy; the tensor-core peak is measured where there are tensor cores and refused
/// with a typed error elsewhere.
#[test]
fn stream_copy_and_the_tensor_core_peak() {
    use ridge::kernels::ceilings;
    on_every_adapter("core_ceilings", |ctx| {
        let data = random(7, 4 * 1031, -3.0, 3.0);
        let src = Tensor::from_slice(ctx, &data, &[1031, 4])?;
        let dst = Tensor::empty(ctx, &[4 * 1031], DType::F32)?;
        dst.poison(ctx);
        ceilings::stream_copy(ctx, &src, &dst)?;
        assert_eq!(block(dst.to_vec::<f32>(ctx))?, data);
        let odd = Tensor::empty(ctx, &[4 * 1031 - 1], DType::F32)?;
        let invalid = |e: &Error| matches!(e, Error::InvalidArgument { .. });
        expect_err("copy", ceilings::stream_copy(ctx, &src, &odd), invalid)?;
        expect_err("copy", ceilings::stream_copy(ctx, &odd, &odd), invalid)?;
        if ctx.has_f16() {
            let h = Tensor::empty(ctx, &[4 * 1031], DType::F16)?;
            expect_err("copy", ceilings::stream_copy(ctx, &h, &dst), invalid)?;
        }
        for feed in ceilings::TensorFeed::ALL {
            let peak = block(ceilings::tensor_peak(ctx, feed, 1));
            if ctx.has_coop_f16() {
                let tflops = peak?;
                assert!(tflops.is_finite() && tflops > 0.0, "{tflops} TFLOP/s");
            } else {
                expect_err("tensor_peak", peak, invalid)?;
            }
        }
        Ok(())
    });
}
