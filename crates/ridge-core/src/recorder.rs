//! Recording dispatches: batched into few command buffers, optionally timed.
//!
//! Ops call [`Context::dispatch`]; dispatches accumulate in one command encoder and are
//! submitted after 2, then 32, then every 256 dispatches, and when the host needs a result
//! ([`Context::flush`], read-backs), so a whole model forward pass is a handful of
//! submissions, not one per op, and the GPU works while the host records. Consecutive
//! dispatches share one compute pass (a pass per dispatch cost MiniLM's batch-1 forward
//! twice the host time: 14–22 µs per dispatch against 9 on the H200's host,
//! benches/NOTES.md). Each dispatch's uniform parameters go into one arena buffer (written
//! just before each submission: queue writes and submissions run in queue order, so the
//! arena is reused without waiting), not into a buffer of their own. Bind groups are cached
//! by pipeline, arena offset and bound buffers: a decode step repeats the last one's
//! dispatches on the same buffers, and creating ~180 bind groups a token was host time
//! spent for nothing.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::profiler::{Profile, ProfileState, TimingMethod};

/// Dispatches recorded before the encoder is submitted on its own: the GPU starts on them
/// while the host records the rest. Recording costs the host µs per dispatch (on the H200,
/// MiniLM's 53 dispatches took ≈ 3 ms of wall clock beyond their GPU time when submitted
/// together; benches/NOTES.md), so a forward pass submitted only at its end leaves the GPU
/// idle for that long.
const FLUSH_EVERY: u32 = 256;
/// The first submission after the host waited comes sooner (after 2 dispatches, then 32,
/// then [`FLUSH_EVERY`]): an idle GPU starts after two dispatches' recording. Each
/// submission costs the host tens of µs (a command buffer, the arena's staging copy, the
/// submit): on the H200 a decode step of SmolLM2 (153 dispatches) recorded in 0.66–0.78 ms
/// with three submissions against 1.04–1.37 ms with seven (2, 4, … 64; run 127), and time to
/// first token did not move.
const FLUSH_FIRST: u32 = 2;
/// How much sooner: the second submission after `FLUSH_FIRST` × this many dispatches.
const FLUSH_GROWTH: u32 = 16;
/// Bytes of uniform parameters per submission: [`FLUSH_EVERY`] dispatches' slots of 256
/// bytes and more (a full arena submits early).
const ARENA_BYTES: u64 = 128 << 10;
/// Bind groups cached at most: enough for a few decode steps' distinct ones; past it the
/// cache starts over.
const MAX_BIND_GROUPS: usize = 4096;

/// One compute dispatch.
pub struct Dispatch<'a> {
    /// Span name in profiles: the op's name.
    pub label: &'a str,
    /// The pipeline (its bind group 0 has the uniform parameters at binding 0).
    pub pipeline: &'a wgpu::ComputePipeline,
    /// The uniform parameters (binding 0), a multiple of 16 bytes.
    pub params: &'a [u8],
    /// The other bindings of group 0.
    pub bindings: &'a [(u32, wgpu::BindingResource<'a>)],
    /// Workgroup counts (x, y, z), each within `maxComputeWorkgroupsPerDimension`.
    pub workgroups: [u32; 3],
}

struct Arena {
    buffer: wgpu::Buffer,
    data: Vec<u8>,
}

/// A storage binding as the cache compares it: (binding, buffer, offset, size).
type BufferBinding<B> = (u32, B, u64, Option<std::num::NonZeroU64>);

/// A cached bind group and what it binds: its pipeline's layout, the uniform slot, the
/// storage buffers (compared in full on every hit: a hash collision must not bind the wrong
/// buffers).
struct Cached {
    pipeline: wgpu::ComputePipeline,
    uniform: (u64, u64),
    buffers: Vec<BufferBinding<wgpu::Buffer>>,
    group: wgpu::BindGroup,
}

/// The storage buffers of `d` as (binding, buffer, offset, size); `None` where a binding is
/// not a buffer (never cached).
fn buffer_bindings<'a>(d: &'a Dispatch<'a>) -> Option<Vec<BufferBinding<&'a wgpu::Buffer>>> {
    d.bindings
        .iter()
        .map(|(binding, resource)| match resource {
            wgpu::BindingResource::Buffer(b) => Some((*binding, b.buffer, b.offset, b.size)),
            _ => None,
        })
        .collect()
}

/// The cache key of `d`'s bind group with its parameters at `uniform` (offset, size).
fn bind_hash(
    d: &Dispatch<'_>,
    uniform: (u64, u64),
    buffers: &[BufferBinding<&wgpu::Buffer>],
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    d.pipeline.hash(&mut h);
    uniform.hash(&mut h);
    buffers.hash(&mut h);
    h.finish()
}

impl Cached {
    fn binds(
        &self,
        d: &Dispatch<'_>,
        uniform: (u64, u64),
        buffers: &[BufferBinding<&wgpu::Buffer>],
    ) -> bool {
        self.pipeline == *d.pipeline
            && self.uniform == uniform
            && self.buffers.len() == buffers.len()
            && self
                .buffers
                .iter()
                .zip(buffers)
                .all(|(a, b)| a.0 == b.0 && a.1 == *b.1 && a.2 == b.2 && a.3 == b.3)
    }
}

#[derive(Default)]
pub(crate) struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    /// The compute pass open on `encoder`: consecutive dispatches share one (wgpu still
    /// places a barrier between two dispatches where one writes what the other accesses);
    /// a pass of its own only for a dispatch timed with timestamps.
    pass: Option<wgpu::ComputePass<'static>>,
    arena: Option<Arena>,
    recorded: u32,
    /// Dispatches that trigger the next submission (0: [`FLUSH_FIRST`]).
    flush_at: u32,
    scope: String,
    pub(crate) profile: Option<ProfileState>,
    /// Bind groups by what they bind (they keep those buffers alive: emptied when a buffer
    /// is released for real, see [`crate::pool::releases`]).
    bind_groups: std::collections::HashMap<u64, Cached>,
    /// [`crate::pool::releases`] when `bind_groups` was last checked.
    releases_seen: u64,
}

impl Recorder {
    /// Empties the bind-group cache, letting go of the buffers its bind groups hold.
    pub(crate) fn forget_bind_groups(&mut self) {
        self.bind_groups.clear();
    }
}

impl Context {
    /// Records one dispatch (timed if profiling is on). A grid with a zero dimension records
    /// nothing.
    pub fn dispatch(&self, d: Dispatch<'_>) -> Result<()> {
        if d.workgroups.contains(&0) {
            return Ok(());
        }
        let max = self.limits().max_compute_workgroups_per_dimension;
        if let Some(&over) = d.workgroups.iter().find(|&&w| w > max) {
            return Err(Error::LimitExceeded {
                what: d.label.to_string(),
                limit: "maxComputeWorkgroupsPerDimension",
                requested: over as u64,
                allowed: max as u64,
            });
        }
        let method = self.recorder().profile.as_ref().map(|p| p.method);
        if method == Some(TimingMethod::WallClock) {
            return self.dispatch_timed_by_clock(d);
        }
        let mut rec = self.recorder();
        self.record(&mut rec, &d);
        let at = rec.flush_at.max(FLUSH_FIRST);
        if rec.recorded >= at {
            self.flush_locked(&mut rec);
            rec.flush_at = (FLUSH_GROWTH * at).min(FLUSH_EVERY);
        }
        Ok(())
    }

    /// Encodes `d` into the pending encoder, with timestamps when profiling with them.
    fn record(&self, rec: &mut Recorder, d: &Dispatch<'_>) {
        let align = self.limits().min_uniform_buffer_offset_alignment.max(16) as u64;
        let slot = (d.params.len() as u64).max(16).div_ceil(align) * align;
        if rec
            .arena
            .as_ref()
            .is_some_and(|a| a.data.len() as u64 + slot > ARENA_BYTES)
        {
            self.flush_locked(rec);
        }
        let arena = rec.arena.get_or_insert_with(|| Arena {
            buffer: self.device().create_buffer(&wgpu::BufferDescriptor {
                label: Some("ridge uniforms"),
                size: ARENA_BYTES,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            data: Vec::with_capacity(ARENA_BYTES as usize),
        });
        let offset = arena.data.len() as u64;
        arena.data.extend_from_slice(d.params);
        arena.data.resize((offset + slot) as usize, 0);
        let size = (d.params.len() as u64).max(16);
        let arena_buffer = arena.buffer.clone();
        let releases = crate::pool::releases();
        if releases != rec.releases_seen || rec.bind_groups.len() >= MAX_BIND_GROUPS {
            rec.bind_groups.clear();
            rec.releases_seen = releases;
        }
        let buffers = buffer_bindings(d);
        let key = buffers.as_ref().map(|b| bind_hash(d, (offset, size), b));
        let cached = match (key, &buffers) {
            (Some(k), Some(b)) => rec
                .bind_groups
                .get(&k)
                .filter(|c| c.binds(d, (offset, size), b))
                .map(|c| c.group.clone()),
            _ => None,
        };
        let bind_group = cached.unwrap_or_else(|| {
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &arena_buffer,
                    offset,
                    size: std::num::NonZeroU64::new(size),
                }),
            }];
            entries.extend(
                d.bindings
                    .iter()
                    .map(|(binding, resource)| wgpu::BindGroupEntry {
                        binding: *binding,
                        resource: resource.clone(),
                    }),
            );
            let group = self.device().create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(d.label),
                layout: &d.pipeline.get_bind_group_layout(0),
                entries: &entries,
            });
            if let (Some(k), Some(b)) = (key, buffers) {
                let cached = Cached {
                    pipeline: d.pipeline.clone(),
                    uniform: (offset, size),
                    buffers: b
                        .into_iter()
                        .map(|(i, buf, o, s)| (i, buf.clone(), o, s))
                        .collect(),
                    group: group.clone(),
                };
                rec.bind_groups.insert(k, cached);
            }
            group
        });
        let timestamps = match rec.profile.as_mut() {
            Some(p) if p.method == TimingMethod::GpuTimestamps => {
                Some(p.next_timestamps(self, d.label, &rec.scope))
            }
            Some(p) => {
                p.unavailable(d.label, &rec.scope);
                None
            }
            None => None,
        };
        let encoder = rec.encoder.get_or_insert_with(|| new_encoder(self));
        let record = |pass: &mut wgpu::ComputePass<'_>| {
            pass.set_pipeline(d.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            let [x, y, z] = d.workgroups;
            pass.dispatch_workgroups(x, y, z);
        };
        match timestamps {
            Some((set, first)) => {
                rec.pass = None; // ends the shared pass: the encoder is locked while it is open
                record(
                    &mut encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(d.label),
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: &set,
                            beginning_of_pass_write_index: Some(first),
                            end_of_pass_write_index: Some(first + 1),
                        }),
                    }),
                );
            }
            None => record(rec.pass.get_or_insert_with(|| {
                encoder
                    .begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("ridge"),
                        timestamp_writes: None,
                    })
                    .forget_lifetime()
            })),
        }
        rec.recorded += 1;
    }

    /// Submits everything recorded so far. Call before `queue.write_buffer` to a buffer an
    /// earlier dispatch reads (queue writes run before the next submission's commands).
    pub fn flush(&self) {
        let mut rec = self.recorder();
        self.flush_locked(&mut rec);
        rec.flush_at = FLUSH_FIRST;
    }

    /// Writes the uniform arena and submits the pending encoder, under the recorder's lock:
    /// another thread's flush must not return (and submit its read-back copy) before the
    /// dispatches recorded so far are on the queue.
    fn flush_locked(&self, rec: &mut Recorder) {
        rec.recorded = 0;
        rec.pass = None; // ends the open pass, unlocking the encoder
        if let Some(arena) = rec.arena.as_mut()
            && !arena.data.is_empty()
        {
            self.queue().write_buffer(&arena.buffer, 0, &arena.data);
            arena.data.clear();
        }
        if let Some(encoder) = rec.encoder.take() {
            self.queue().submit([encoder.finish()]);
        }
    }

    /// Names the part of a larger computation that the following dispatches belong to (e.g.
    /// `layer 3 · attention`); profiles carry it in [`crate::Span::scope`]. Empty clears it.
    pub fn set_scope(&self, scope: &str) {
        let mut rec = self.recorder();
        rec.scope.clear();
        rec.scope.push_str(scope);
    }

    /// [`Context::set_scope`] with a name built only while a profile is being taken: a decode
    /// step names 60 scopes, and formatting them when nothing reads them is host time spent
    /// for nothing. Outside a profile the scope is cleared.
    pub fn set_scope_with(&self, scope: impl FnOnce() -> String) {
        let mut rec = self.recorder();
        rec.scope.clear();
        if rec.profile.is_some() {
            rec.scope = scope();
        }
    }

    /// Starts a profile: every dispatch from now on becomes a span, timed with GPU timestamps
    /// where the adapter has them and with a synchronised wall clock otherwise (native only;
    /// in the browser without timestamps spans are marked unavailable).
    pub fn start_profiling(&self) {
        let method = if self.has_timestamps() {
            TimingMethod::GpuTimestamps
        } else if cfg!(target_arch = "wasm32") {
            TimingMethod::Unavailable
        } else {
            TimingMethod::WallClock
        };
        self.recorder().profile = Some(ProfileState::new(method));
    }

    /// Ends the profile started by [`Context::start_profiling`], waits for the GPU, and
    /// returns one span per dispatch. Without a started profile the result is empty.
    pub async fn finish_profiling(&self) -> Result<Profile> {
        let state = self.recorder().profile.take();
        self.flush();
        match state {
            Some(state) => state.finish(self).await,
            None => Ok(Profile::empty()),
        }
    }

    /// Creates a command encoder for work outside the dispatch path (copies, read-backs);
    /// hand it to [`Context::submit`] so that it runs after the dispatches recorded before.
    pub fn encoder(&self) -> wgpu::CommandEncoder {
        new_encoder(self)
    }

    /// Submits `encoder` right after everything recorded so far; returns its index for
    /// [`Context::wait_for`].
    pub fn submit(&self, encoder: wgpu::CommandEncoder) -> wgpu::SubmissionIndex {
        let mut rec = self.recorder();
        self.flush_locked(&mut rec);
        self.queue().submit([encoder.finish()])
    }

    pub(crate) fn recorder(&self) -> std::sync::MutexGuard<'_, crate::recorder::Recorder> {
        self.recorder.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn dispatch_timed_by_clock(&self, d: Dispatch<'_>) -> Result<()> {
        self.flush();
        self.wait()?;
        let start = std::time::Instant::now();
        {
            let mut rec = self.recorder();
            let profile = rec.profile.take();
            self.record(&mut rec, &d);
            self.flush_locked(&mut rec);
            rec.profile = profile;
        }
        self.wait()?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let mut rec = self.recorder();
        let rec = &mut *rec;
        if let Some(p) = rec.profile.as_mut() {
            p.measured(d.label, &rec.scope, ms);
        }
        Ok(())
    }

    #[cfg(target_arch = "wasm32")]
    fn dispatch_timed_by_clock(&self, _d: Dispatch<'_>) -> Result<()> {
        unreachable!("wall-clock profiling is never chosen in the browser")
    }
}

fn new_encoder(ctx: &Context) -> wgpu::CommandEncoder {
    ctx.device()
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("ridge"),
        })
}
