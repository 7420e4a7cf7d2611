//! One greedy decode step seen from both sides: how long the host takes to record its
//! dispatches, and when each dispatch ran on the GPU, with the idle gaps between them. What
//! tells a decode bound by the host's recording from one bound by the GPU, and which op or
//! gap to attack next (issue 25); printed by the generation bench and drawn by the
//! dashboard's Transformer panel.
//!
//! A profile puts every dispatch in a compute pass of its own, its timestamps at the pass's
//! boundaries ([`ridge_core::Context::start_profiling`]), so the timeline shows each dispatch
//! as a lone one: its gaps include what a pass boundary costs. A pipelined decode (each step
//! recorded while the one before runs, no timestamps) runs its dispatches closer together:
//! `ridge bench`'s stream floor measures how close.

use ridge_core::{Context, DType, Profile, Tensor};
use web_time::Instant;

use super::{KvCache, Llama, PlannedOp};
use crate::error::Result;

/// One dispatch on the step's GPU timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedOp {
    /// The op (the profiler span's name: `qmatvec`, `kv_attention`, …).
    pub name: String,
    /// When it began, ms after the step's first dispatch began.
    pub start_ms: f64,
    /// Its GPU time, ms.
    pub ms: f64,
    /// The idle time between the end of the dispatch before it and its start, ms (0 for the
    /// first).
    pub gap_ms: f64,
}

/// One decode step's timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeTimeline {
    /// Keys in the KV cache before the profiled step.
    pub depth: usize,
    /// Activations and KV cache: f32 or f16.
    pub dtype: DType,
    /// The host's recording of one step (the forward's dispatches and the argmax, nothing
    /// waited for), ms, from an unprofiled step just before.
    pub host_ms: f64,
    /// The profiled step's dispatches in order; empty where the adapter has no GPU
    /// timestamps.
    pub ops: Vec<TimedOp>,
    /// The profiled step's profile (its spans' times, also where timestamps are missing).
    pub profile: Profile,
    /// Whether the whole step was recorded before the GPU reached it (queued behind a
    /// blocker, natively), so that its gaps are the GPU's own; else they include waits for
    /// the host's recording, slowed by the profile (in the browser, and where the recording
    /// outlasted the blocker).
    pub queued: bool,
    /// Ridge's plan of the step ([`Llama::plan`]), in the same order as `ops`.
    pub plan: Vec<PlannedOp>,
}

impl DecodeTimeline {
    /// Runs two greedy steps from token `id` at the cache's depth (the cache gains two
    /// positions): the first unprofiled, timing the host's recording, the second profiled.
    /// Returns the timeline and the second step's argmax.
    ///
    /// Errors: [`crate::Error::Input`] for a cache without two free positions or an id
    /// outside the vocabulary; GPU errors.
    pub async fn measure(
        ctx: &Context,
        model: &Llama,
        cache: &mut KvCache,
        id: u32,
    ) -> Result<(Self, u32)> {
        let depth = cache.len() + 1;
        let start = Instant::now();
        let next = record_step(ctx, model, cache, &[id])?;
        let host_ms = start.elapsed().as_secs_f64() * 1e3;
        let id = next.to_vec::<u32>(ctx).await?[0];
        let step = profiled_step(ctx, model, cache, id, host_ms);
        // Finished whatever happened: a profile left running would time every later dispatch.
        let profile = ctx.finish_profiling().await;
        let (next, queued) = step?;
        let profile = profile?;
        let id = next.to_vec::<u32>(ctx).await?[0];
        let timeline = Self {
            depth,
            dtype: model.dtype(),
            host_ms,
            ops: timed_ops(&profile),
            queued,
            profile,
            plan: model.plan(1, depth),
        };
        Ok((timeline, id))
    }

    /// GPU time from the first dispatch's start to the last one's end, ms (0 without
    /// timestamps).
    pub fn elapsed_ms(&self) -> f64 {
        self.ops
            .iter()
            .map(|o| o.start_ms + o.ms)
            .fold(0.0, f64::max)
    }

    /// The dispatches' GPU time, gaps left out, ms.
    pub fn busy_ms(&self) -> f64 {
        self.ops.iter().map(|o| o.ms).sum()
    }

    /// The idle time between dispatches, ms.
    pub fn gaps_ms(&self) -> f64 {
        self.ops.iter().map(|o| o.gap_ms).sum()
    }

    /// The longest gap and the op after it; `None` without a gap.
    pub fn longest_gap(&self) -> Option<(&str, f64)> {
        self.ops
            .iter()
            .filter(|o| o.gap_ms > 0.0)
            .max_by(|a, b| a.gap_ms.total_cmp(&b.gap_ms))
            .map(|o| (o.name.as_str(), o.gap_ms))
    }

    /// What bounds a step: `"host"` when recording it takes longer than the GPU runs it,
    /// else `"GPU"`; `None` without GPU timestamps, and where the step was not recorded
    /// ahead of the GPU (its elapsed time then holds waits for the host).
    pub fn bound(&self) -> Option<&'static str> {
        if self.ops.is_empty() || !self.queued {
            return None;
        }
        Some(if self.host_ms > self.elapsed_ms() {
            "host"
        } else {
            "GPU"
        })
    }

    /// Summed over the dispatches of each op, in first-seen order: (name, dispatches, GPU ms,
    /// gap ms before them).
    pub fn by_name(&self) -> Vec<(String, usize, f64, f64)> {
        let mut out: Vec<(String, usize, f64, f64)> = Vec::new();
        for o in &self.ops {
            match out.iter_mut().find(|r| r.0 == o.name) {
                Some(r) => {
                    r.1 += 1;
                    r.2 += o.ms;
                    r.3 += o.gap_ms;
                }
                None => out.push((o.name.clone(), 1, o.ms, o.gap_ms)),
            }
        }
        out
    }
}

/// Starts a profile and records one greedy step from `id` into it: natively queued behind a
/// blocker sized from `host_ms` ([`ridge_kernels::ceilings::queued_gpu_ms`]), so that the
/// GPU runs the step's dispatches back to back; the id's tensor, and whether the recording
/// ended before the blocker did.
#[cfg(not(target_arch = "wasm32"))]
fn profiled_step(
    ctx: &Context,
    model: &Llama,
    cache: &mut KvCache,
    id: u32,
    host_ms: f64,
) -> Result<(Tensor, bool)> {
    let mut next = None;
    // A profiled recording is slower than `host_ms` (a pass and two timestamps a dispatch).
    let (_, queued) = ridge_kernels::ceilings::queued_gpu_ms(ctx, 4.0 * host_ms, || {
        ctx.start_profiling();
        next = Some(record_step(ctx, model, cache, &[id]));
        Ok(())
    })?;
    Ok((next.expect("recorded")?, queued))
}

/// In the browser (no blocking wait), the step profiled as it comes.
#[cfg(target_arch = "wasm32")]
fn profiled_step(
    ctx: &Context,
    model: &Llama,
    cache: &mut KvCache,
    id: u32,
    _host_ms: f64,
) -> Result<(Tensor, bool)> {
    ctx.start_profiling();
    Ok((record_step(ctx, model, cache, &[id])?, false))
}

/// One greedy step: the forward of `ids` (a prompt, or the last token), the argmax of the last
/// token's logits on the GPU, and that id read back (4 bytes).
///
/// Errors: as [`Llama::forward`]; GPU errors.
pub async fn greedy_step(
    ctx: &Context,
    model: &Llama,
    cache: &mut KvCache,
    ids: &[u32],
) -> Result<u32> {
    Ok(record_step(ctx, model, cache, ids)?
        .to_vec::<u32>(ctx)
        .await?[0])
}

/// Records one greedy step of `ids` (the forward and the argmax on the GPU, nothing waited
/// for); the id's tensor.
fn record_step(ctx: &Context, model: &Llama, cache: &mut KvCache, ids: &[u32]) -> Result<Tensor> {
    let fwd = model.forward(ctx, cache, ids, false)?;
    let next = Tensor::empty(ctx, &[1], DType::U32)?;
    ridge_kernels::argmax::argmax(ctx, &fwd.logits, &next)?;
    Ok(next)
}

/// `profile`'s spans on one clock from its first start, with the gap before each; none
/// where a span lacks a GPU timestamp.
fn timed_ops(profile: &Profile) -> Vec<TimedOp> {
    let spans: Option<Vec<(f64, f64)>> = profile
        .spans
        .iter()
        .map(|s| Some((s.start_ms?, s.ms?)))
        .collect();
    let Some(spans) = spans.filter(|s| !s.is_empty()) else {
        return Vec::new();
    };
    let t0 = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let mut end = t0;
    profile
        .spans
        .iter()
        .zip(spans)
        .map(|(s, (start, ms))| {
            let op = TimedOp {
                name: s.name.clone(),
                start_ms: start - t0,
                ms,
                gap_ms: (start - end).max(0.0),
            };
            end = end.max(start + ms);
            op
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ridge_core::{Span, TimingMethod};

    fn span(name: &str, start: Option<f64>, ms: Option<f64>) -> Span {
        Span {
            name: name.into(),
            scope: String::new(),
            ms,
            start_ms: start,
        }
    }

    /// Times from the first start; each gap from the latest end before it (never negative:
    /// overlapping dispatches have none); totals and the bound follow.
    #[test]
    fn gaps_are_measured_from_the_latest_end_before() {
        let profile = Profile {
            method: TimingMethod::GpuTimestamps,
            spans: vec![
                span("a", Some(10.0), Some(1.0)),
                span("b", Some(11.5), Some(2.0)),
                span("a", Some(13.0), Some(0.25)),
                span("c", Some(14.25), Some(0.5)),
            ],
        };
        let ops = timed_ops(&profile);
        let got: Vec<_> = ops.iter().map(|o| (o.start_ms, o.ms, o.gap_ms)).collect();
        assert_eq!(
            got,
            vec![
                (0.0, 1.0, 0.0),
                (1.5, 2.0, 0.5),
                (3.0, 0.25, 0.0),
                (4.25, 0.5, 0.75)
            ]
        );
        let t = DecodeTimeline {
            depth: 3,
            dtype: DType::F32,
            host_ms: 4.0,
            ops,
            queued: true,
            profile,
            plan: Vec::new(),
        };
        assert_eq!(
            (t.elapsed_ms(), t.busy_ms(), t.gaps_ms()),
            (4.75, 3.75, 1.25)
        );
        assert_eq!(t.bound(), Some("GPU"));
        assert_eq!(t.longest_gap(), Some(("c", 0.75)));
        let by_name = t.by_name();
        assert_eq!(by_name[0], ("a".into(), 2, 1.25, 0.0));
        assert_eq!(by_name[2], ("c".into(), 1, 0.5, 0.75));
        let host = DecodeTimeline { host_ms: 5.0, ..t };
        assert_eq!(host.bound(), Some("host"));
        let waited = DecodeTimeline {
            queued: false,
            ..host
        };
        assert_eq!(waited.bound(), None);
    }

    /// A span without a timestamp leaves no timeline (not one with holes).
    #[test]
    fn no_timeline_without_timestamps() {
        let profile = Profile {
            method: TimingMethod::WallClock,
            spans: vec![span("a", Some(0.0), Some(1.0)), span("b", None, Some(1.0))],
        };
        assert!(timed_ops(&profile).is_empty());
    }
}
