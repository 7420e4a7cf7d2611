//! Recording dispatches: batched into few command buffers, optionally timed.
//!
//! Ops call [`Context::dispatch`]; dispatches accumulate in one command encoder and are
//! submitted together when the host needs a result ([`Context::flush`], read-backs), so a
//! whole model forward pass is a handful of submissions, not one per op.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::profiler::{Profile, ProfileState, TimingMethod};

/// Dispatches recorded before the encoder is submitted on its own, to bound command-buffer
/// size (and latency) in long sequences.
const FLUSH_EVERY: u32 = 256;

/// One compute dispatch.
pub struct Dispatch<'a> {
    /// Span name in profiles: the op's name.
    pub label: &'a str,
    /// The pipeline.
    pub pipeline: &'a wgpu::ComputePipeline,
    /// Bind group 0.
    pub bind_group: &'a wgpu::BindGroup,
    /// Workgroup counts (x, y, z), each within `maxComputeWorkgroupsPerDimension`.
    pub workgroups: [u32; 3],
}

#[derive(Default)]
pub(crate) struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    recorded: u32,
    scope: String,
    pub(crate) profile: Option<ProfileState>,
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
        match method {
            Some(TimingMethod::WallClock) => return self.dispatch_timed_by_clock(d),
            Some(TimingMethod::GpuTimestamps) => {
                let mut rec = self.recorder();
                let rec = &mut *rec;
                let profile = rec.profile.as_mut().expect("profiling is on");
                let (query_set, first) = profile.next_timestamps(self, d.label, &rec.scope);
                let writes = wgpu::ComputePassTimestampWrites {
                    query_set: &query_set,
                    beginning_of_pass_write_index: Some(first),
                    end_of_pass_write_index: Some(first + 1),
                };
                let encoder = rec.encoder.get_or_insert_with(|| new_encoder(self));
                encode(encoder, &d, Some(&writes));
                rec.recorded += 1;
            }
            Some(TimingMethod::Unavailable) | None => {
                let mut rec = self.recorder();
                let rec = &mut *rec;
                if let Some(p) = rec.profile.as_mut() {
                    p.unavailable(d.label, &rec.scope);
                }
                let encoder = rec.encoder.get_or_insert_with(|| new_encoder(self));
                encode(encoder, &d, None);
                rec.recorded += 1;
            }
        }
        if self.recorder().recorded >= FLUSH_EVERY {
            self.flush();
        }
        Ok(())
    }

    /// Submits everything recorded so far. Call before `queue.write_buffer` to a buffer an
    /// earlier dispatch reads (queue writes run before the next submission's commands).
    pub fn flush(&self) {
        // Submit while holding the lock: another thread's flush must not return (and submit
        // its read-back copy) before the dispatches recorded so far are on the queue.
        let mut rec = self.recorder();
        rec.recorded = 0;
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

    /// Submits `encoder` in one submission right after everything recorded so far.
    pub fn submit(&self, encoder: wgpu::CommandEncoder) {
        let mut rec = self.recorder();
        rec.recorded = 0;
        let pending = rec.encoder.take().map(|e| e.finish());
        self.queue()
            .submit(pending.into_iter().chain([encoder.finish()]));
    }

    pub(crate) fn recorder(&self) -> std::sync::MutexGuard<'_, crate::recorder::Recorder> {
        self.recorder.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn dispatch_timed_by_clock(&self, d: Dispatch<'_>) -> Result<()> {
        self.flush();
        self.wait()?;
        let start = std::time::Instant::now();
        let mut encoder = new_encoder(self);
        encode(&mut encoder, &d, None);
        self.queue().submit([encoder.finish()]);
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

fn encode(
    encoder: &mut wgpu::CommandEncoder,
    d: &Dispatch<'_>,
    timestamps: Option<&wgpu::ComputePassTimestampWrites<'_>>,
) {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(d.label),
        timestamp_writes: timestamps.cloned(),
    });
    pass.set_pipeline(d.pipeline);
    pass.set_bind_group(0, d.bind_group, &[]);
    let [x, y, z] = d.workgroups;
    pass.dispatch_workgroups(x, y, z);
}
