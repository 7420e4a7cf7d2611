//! GPU time per dispatch: timestamp queries where the adapter has them, a synchronised wall
//! clock otherwise. A time that could not be measured is `None`, never 0.

use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::Result;

/// Timestamp pairs per query set (WebGPU allows at most 4,096 queries per set).
const PAIRS_PER_SET: u32 = 1024;

/// How a profile's times were measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimingMethod {
    /// GPU timestamp queries written at the start and end of each compute pass.
    GpuTimestamps,
    /// Host clock around a submission that waits for the GPU: includes submission latency.
    WallClock,
    /// No way to time on this adapter and platform.
    Unavailable,
}

impl std::fmt::Display for TimingMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimingMethod::GpuTimestamps => "GPU timestamps",
            TimingMethod::WallClock => "wall clock (synchronised)",
            TimingMethod::Unavailable => "unavailable",
        })
    }
}

/// One timed dispatch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// The op's name.
    pub name: String,
    /// What the op was part of when recorded (see [`crate::Context::set_scope`]).
    pub scope: String,
    /// Milliseconds; `None` when it could not be measured.
    pub ms: Option<f64>,
    /// When it began, ms after the profile's first timestamp (GPU timestamps only).
    #[serde(default)]
    pub start_ms: Option<f64>,
}

/// The spans of one profile, in dispatch order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// How the times were measured.
    pub method: TimingMethod,
    /// One span per dispatch.
    pub spans: Vec<Span>,
}

impl Profile {
    pub(crate) fn empty() -> Self {
        Self {
            method: TimingMethod::Unavailable,
            spans: Vec::new(),
        }
    }

    /// Sum of all spans in ms; `None` if any span is unmeasured or there are none.
    pub fn total_ms(&self) -> Option<f64> {
        if self.spans.is_empty() {
            return None;
        }
        self.spans.iter().map(|s| s.ms).sum()
    }

    /// GPU time from the first dispatch's start to the last one's end, idle gaps included
    /// (what CUDA events around a forward measure); `None` without GPU timestamps.
    pub fn elapsed_ms(&self) -> Option<f64> {
        let ends = self.spans.iter().map(|s| Some(s.start_ms? + s.ms?));
        let end = ends
            .collect::<Option<Vec<f64>>>()?
            .into_iter()
            .reduce(f64::max)?;
        let start = self
            .spans
            .iter()
            .filter_map(|s| s.start_ms)
            .reduce(f64::min)?;
        Some(end - start)
    }

    /// Spans grouped by op name in first-seen order: (name, count, total ms or `None` if any
    /// of them is unmeasured).
    pub fn by_name(&self) -> Vec<(String, usize, Option<f64>)> {
        self.group_by(|s| &s.name)
    }

    /// Spans grouped by scope in first-seen order, as [`Profile::by_name`].
    pub fn by_scope(&self) -> Vec<(String, usize, Option<f64>)> {
        self.group_by(|s| &s.scope)
    }

    fn group_by(&self, key: impl Fn(&Span) -> &String) -> Vec<(String, usize, Option<f64>)> {
        let mut out: Vec<(String, usize, Option<f64>)> = Vec::new();
        for s in &self.spans {
            match out.iter_mut().find(|(n, _, _)| n == key(s)) {
                Some((_, count, total)) => {
                    *count += 1;
                    *total = total.zip(s.ms).map(|(a, b)| a + b);
                }
                None => out.push((key(s).clone(), 1, s.ms)),
            }
        }
        out
    }

    /// A text table of GPU time per op, largest first, with each op's share of the total.
    pub fn table(&self) -> String {
        let mut out = format!("GPU time per op ({}):\n", self.method);
        let total = self.total_ms();
        let mut ops = self.by_name();
        ops.sort_by(|a, b| b.2.unwrap_or(0.0).total_cmp(&a.2.unwrap_or(0.0)));
        // The name column fits the longest name (`linear_residual`, `kv_attention_prefill`).
        let w = ops.iter().map(|o| o.0.len()).max().unwrap_or(0).max(13);
        for (name, count, ms) in ops {
            let share = match (ms, total) {
                (Some(ms), Some(t)) if t > 0.0 => format!("{:5.1} %", 100.0 * ms / t),
                _ => "   n/a".into(),
            };
            let ms = ms.map_or("n/a".to_string(), |v| format!("{v:.3}"));
            out.push_str(&format!(
                "  {name:<w$} {} {ms:>12} ms {share}\n",
                dispatches(count)
            ));
        }
        match total {
            Some(t) => out.push_str(&format!(
                "  {:<w$} {} {t:>12.3} ms\n",
                "total",
                dispatches(self.spans.len())
            )),
            None => out.push_str("  total: unavailable (some dispatches could not be timed)\n"),
        }
        out
    }

    /// Median time of one launch, when the spans are `launches` equal runs of an op's
    /// dispatches (an op may dispatch more than once: split-KV attention's merge pass):
    /// each run's times summed. `None` when the spans do not split evenly or a run has an
    /// untimed dispatch.
    pub fn median_launch_ms(&self, launches: usize) -> Option<f64> {
        let n = self.spans.len();
        if launches == 0 || n == 0 || !n.is_multiple_of(launches) {
            return None;
        }
        let mut t: Vec<f64> = self
            .spans
            .chunks(n / launches)
            .map(|run| run.iter().map(|s| s.ms).sum::<Option<f64>>())
            .collect::<Option<_>>()?;
        t.sort_by(f64::total_cmp);
        Some(t[t.len() / 2])
    }
}

enum Pending {
    Timestamps {
        set: usize,
        pair: u32,
    },
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))] // no synchronous wall clock there
    Measured(f64),
    Unavailable,
}

pub(crate) struct ProfileState {
    pub(crate) method: TimingMethod,
    spans: Vec<(String, String, Pending)>,
    sets: Vec<wgpu::QuerySet>,
    used_in_last: u32,
}

impl ProfileState {
    pub(crate) fn new(method: TimingMethod) -> Self {
        Self {
            method,
            spans: Vec::new(),
            sets: Vec::new(),
            used_in_last: PAIRS_PER_SET,
        }
    }

    /// The query set and first query index for the next pass's begin/end timestamps.
    pub(crate) fn next_timestamps(
        &mut self,
        ctx: &Context,
        name: &str,
        scope: &str,
    ) -> (wgpu::QuerySet, u32) {
        if self.used_in_last == PAIRS_PER_SET {
            self.sets
                .push(ctx.device().create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("ridge profiler"),
                    ty: wgpu::QueryType::Timestamp,
                    count: 2 * PAIRS_PER_SET,
                }));
            self.used_in_last = 0;
        }
        let pair = self.used_in_last;
        self.used_in_last += 1;
        let set = self.sets.len() - 1;
        self.spans.push((
            name.to_string(),
            scope.to_string(),
            Pending::Timestamps { set, pair },
        ));
        (self.sets[set].clone(), 2 * pair)
    }

    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) fn measured(&mut self, name: &str, scope: &str, ms: f64) {
        self.spans
            .push((name.to_string(), scope.to_string(), Pending::Measured(ms)));
    }

    pub(crate) fn unavailable(&mut self, name: &str, scope: &str) {
        self.spans
            .push((name.to_string(), scope.to_string(), Pending::Unavailable));
    }

    pub(crate) async fn finish(self, ctx: &Context) -> Result<Profile> {
        let mut ticks: Vec<Vec<u64>> = Vec::with_capacity(self.sets.len());
        for (i, set) in self.sets.iter().enumerate() {
            let pairs = if i + 1 == self.sets.len() {
                self.used_in_last
            } else {
                PAIRS_PER_SET
            };
            let bytes = 2 * pairs as u64 * 8;
            let resolve = ctx.device().create_buffer(&wgpu::BufferDescriptor {
                label: Some("ridge timestamps"),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let mut encoder = ctx.encoder();
            encoder.resolve_query_set(set, 0..2 * pairs, &resolve, 0);
            ctx.submit(encoder);
            let raw = crate::tensor::read_buffer(ctx, &resolve, 0, bytes).await?;
            ticks.push(bytemuck::pod_collect_to_vec(&raw));
        }
        let period_ns = ctx.queue().get_timestamp_period() as f64;
        let to_ms = |ticks: u64| ticks as f64 * period_ns * 1e-6;
        let origin = ticks.iter().flatten().copied().filter(|&t| t > 0).min();
        let spans = self
            .spans
            .into_iter()
            .map(|(name, scope, p)| {
                let (ms, start_ms) = match p {
                    Pending::Timestamps { set, pair } => {
                        let t = &ticks[set];
                        let (begin, end) = (t[2 * pair as usize], t[2 * pair as usize + 1]);
                        // A zero or negative interval means the timer could not resolve it.
                        let ms = (end > begin).then(|| to_ms(end - begin));
                        (
                            ms,
                            origin
                                .filter(|&o| ms.is_some() && begin >= o)
                                .map(|o| to_ms(begin - o)),
                        )
                    }
                    Pending::Measured(ms) => (Some(ms), None),
                    Pending::Unavailable => (None, None),
                };
                Span {
                    name,
                    scope,
                    ms,
                    start_ms,
                }
            })
            .collect();
        Ok(Profile {
            method: self.method,
            spans,
        })
    }
}

/// `count` right-aligned in 5 columns, then "dispatch" or "dispatches" padded to one width, for
/// the columns of per-op tables.
pub fn dispatches(count: usize) -> String {
    let word = if count == 1 { "dispatch" } else { "dispatches" };
    format!("{count:>5} {word:<10}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(ms: &[Option<f64>]) -> Profile {
        Profile {
            method: TimingMethod::GpuTimestamps,
            spans: ms
                .iter()
                .map(|&ms| Span {
                    name: "op".into(),
                    scope: String::new(),
                    ms,
                    start_ms: None,
                })
                .collect(),
        }
    }

    #[test]
    fn a_launch_of_two_dispatches_is_timed_as_their_sum() {
        // Three launches of (main pass, merge pass): sums 3, 5, 4 → median 4.
        let p = profile(&[2.0, 1.0, 4.0, 1.0, 3.0, 1.0].map(Some));
        assert_eq!(p.median_launch_ms(3), Some(4.0));
        assert_eq!(p.median_launch_ms(6), Some(2.0));
        assert_eq!(p.median_launch_ms(4), None, "uneven runs");
        assert_eq!(p.median_launch_ms(0), None);
        assert_eq!(profile(&[Some(1.0), None]).median_launch_ms(1), None);
    }

    #[test]
    fn elapsed_time_spans_first_start_to_last_end_gaps_included() {
        let mut p = profile(&[Some(1.0), Some(2.0), Some(0.5)]);
        assert_eq!(p.elapsed_ms(), None, "no start times");
        // Dispatches at 0-1, 1.5-3.5 (a gap of 0.5) and 3.0-3.5 (overlapping the second).
        for (s, start) in p.spans.iter_mut().zip([0.0, 1.5, 3.0]) {
            s.start_ms = Some(start);
        }
        assert_eq!(p.elapsed_ms(), Some(3.5));
        assert_eq!(p.total_ms(), Some(3.5));
        p.spans[0].start_ms = Some(0.5);
        assert_eq!(p.elapsed_ms(), Some(3.0));
        p.spans[2].ms = None;
        assert_eq!(p.elapsed_ms(), None, "an untimed dispatch");
    }
}
