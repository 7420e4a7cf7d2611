//! What every launcher shares: dtype defines, uniform packing, binding checks, dispatch.

use ridge_core::wgpu;
use ridge_core::{Context, DType, Defines, Dispatch, Error, Result, ShaderSource, Tensor};

/// Defines for a kernel whose storage type is `dtype`: `alias T = f32|f16;` and, for f16,
/// `enable f16;`.
///
/// Errors: as [`float_dtype`].
pub fn dtype_defines(ctx: &Context, op: &str, dtype: DType) -> Result<Defines> {
    float_dtype(ctx, op, dtype)?;
    Ok(crate::shaders::storage_defines(dtype))
}

/// Errors unless a float kernel can run `dtype` on `ctx`: [`Error::MissingFeature`] for f16 on
/// an adapter without `shader-f16`, [`Error::InvalidArgument`] for u32.
pub fn float_dtype(ctx: &Context, op: &str, dtype: DType) -> Result<()> {
    match dtype {
        DType::F32 => Ok(()),
        DType::F16 => ctx.require(op, wgpu::Features::SHADER_F16),
        DType::U32 => Err(Error::invalid(
            op,
            "float kernels take f32 or f16 tensors, not u32",
        )),
    }
}

/// Defines built once per variant and shared after (their clones compare by pointer): for
/// kernels whose defines hold generated blocks, tens of kilobytes of WGSL that cost tens of
/// µs per launch to build and hash. `key` must name everything `build` reads; under `op`, it
/// is the memo key, hashed and compared as a value (formatting it as a string every launch
/// took 8 % of a decode step's host time on the H200, benches/NOTES.md run 127).
pub fn memoized<K>(op: &'static str, key: &K, build: impl FnOnce(&K) -> Defines) -> Defines
where
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    use std::any::{Any, TypeId};
    use std::hash::BuildHasher;
    type Entries = Vec<(Box<dyn Any + Send + Sync>, Defines)>;
    type Memo = std::sync::Mutex<std::collections::HashMap<(&'static str, TypeId, u64), Entries>>;
    static MEMO: std::sync::LazyLock<Memo> = std::sync::LazyLock::new(Default::default);
    static SEED: std::sync::LazyLock<std::hash::RandomState> =
        std::sync::LazyLock::new(std::hash::RandomState::new);
    let slot = (op, TypeId::of::<K>(), SEED.hash_one(key));
    let find = |entries: &Entries| {
        entries
            .iter()
            .find(|(k, _)| k.downcast_ref::<K>() == Some(key))
            .map(|(_, d)| d.clone())
    };
    if let Some(d) = MEMO
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&slot)
        .and_then(find)
    {
        return d;
    }
    let d = build(key);
    let mut memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    let entries = memo.entry(slot).or_default();
    match find(entries) {
        Some(d) => d,
        None => {
            entries.push((Box::new(key.clone()), d.clone()));
            d
        }
    }
}

/// A kernel's uniform parameters as 32-bit words, padded to 16 bytes.
#[derive(Clone, Default)]
pub struct Params(Vec<u32>);

impl Params {
    /// No words yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Appends a u32.
    pub fn u(mut self, v: u32) -> Self {
        self.0.push(v);
        self
    }
    /// Appends an f32.
    pub fn f(mut self, v: f32) -> Self {
        self.0.push(v.to_bits());
        self
    }
    /// Appends u32 words.
    pub fn words(mut self, v: &[u32]) -> Self {
        self.0.extend_from_slice(v);
        self
    }
    fn bytes(mut self) -> Vec<u8> {
        while !self.0.len().is_multiple_of(4) || self.0.is_empty() {
            self.0.push(0);
        }
        bytemuck::cast_slice(&self.0).to_vec()
    }
}

/// One kernel launch: shader, entry point, defines, parameters, storage bindings and grid.
pub struct Launch<'a> {
    /// Profiler span name (the op's name).
    pub label: &'a str,
    /// The shader file.
    pub shader: &'static ShaderSource,
    /// Entry point.
    pub entry: &'static str,
    /// Template defines.
    pub defines: Defines,
    /// Uniform parameters (binding 0).
    pub params: Params,
    /// Storage bindings by binding number.
    pub buffers: Vec<(u32, &'a Tensor)>,
    /// Workgroup grid.
    pub workgroups: [u32; 3],
}

impl Launch<'_> {
    /// Checks every binding against the adapter's limits, then records the dispatch.
    pub fn run(self, ctx: &Context) -> Result<()> {
        let align = ctx.limits().min_storage_buffer_offset_alignment as u64;
        for (_, t) in &self.buffers {
            ctx.check_binding(self.label, t.padded_bytes())?;
            if !t.offset().is_multiple_of(align) {
                return Err(Error::LimitExceeded {
                    what: format!(
                        "{}: a tensor view at byte offset {}",
                        self.label,
                        t.offset()
                    ),
                    limit: "minStorageBufferOffsetAlignment (offset must be a multiple)",
                    requested: t.offset(),
                    allowed: align,
                });
            }
        }
        let pipeline = ctx
            .pipelines()
            .get(ctx.device(), self.shader, self.entry, &self.defines);
        let bindings: Vec<(u32, wgpu::BindingResource<'_>)> = self
            .buffers
            .iter()
            .map(|(b, t)| (*b, t.binding()))
            .collect();
        ctx.dispatch(Dispatch {
            label: self.label,
            pipeline: &pipeline,
            params: &self.params.bytes(),
            bindings: &bindings,
            workgroups: self.workgroups,
        })
    }
}

/// Runs `f` with the thread-local launch choice `key` set to `value` (`None`: the adapter's
/// own choice), then puts back what was set before, also when `f` panics: how benches and
/// tests force a kernel's launch shape or loads ([`crate::qmatmul::MatvecShape::forced`],
/// [`crate::KvLoads::forced`]).
pub fn with_forced<T: Copy + 'static, R>(
    key: &'static std::thread::LocalKey<std::cell::Cell<Option<T>>>,
    value: Option<T>,
    f: impl FnOnce() -> R,
) -> R {
    struct Restore<T: Copy + 'static>(
        &'static std::thread::LocalKey<std::cell::Cell<Option<T>>>,
        Option<T>,
    );
    impl<T: Copy + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            self.0.set(self.1);
        }
    }
    let _restore = Restore(key, key.replace(value));
    f()
}

/// Errors unless every tensor has `dtype`.
pub fn same_dtype(op: &str, dtype: DType, tensors: &[&Tensor]) -> Result<()> {
    tensors.iter().try_for_each(|t| t.expect_dtype(op, dtype))
}

/// Errors when `out` shares its buffer with an input (WebGPU forbids binding one buffer as
/// both read-only and writable storage in a dispatch).
pub fn no_alias(op: &str, out: &Tensor, inputs: &[&Tensor]) -> Result<()> {
    if inputs.iter().any(|t| t.buffer() == out.buffer()) {
        return Err(Error::invalid(
            op,
            "the output must not share a buffer with an input",
        ));
    }
    Ok(())
}

/// Whether `t`'s view starts on a whole vector of `width` elements (its byte offset a
/// multiple of `width` × the element size), as loads of `vec4`s from its binding need.
pub fn starts_on_vector(t: &Tensor, width: usize) -> bool {
    t.offset().is_multiple_of((width * t.dtype().size()) as u64)
}

/// Errors unless `n` fits the 32-bit indices kernels use.
pub fn fits_u32(op: &str, what: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::LimitExceeded {
        what: format!("{op}: {what}"),
        limit: "32-bit element index",
        requested: n as u64,
        allowed: u32::MAX as u64,
    })
}

/// Errors unless a workgroup of `invocations` and `storage_bytes` of workgroup memory fits.
pub fn check_workgroup(
    ctx: &Context,
    op: &str,
    invocations: u32,
    storage_bytes: u32,
) -> Result<()> {
    let l = ctx.limits();
    if invocations > l.max_compute_invocations_per_workgroup {
        return Err(Error::LimitExceeded {
            what: op.to_string(),
            limit: "maxComputeInvocationsPerWorkgroup",
            requested: invocations as u64,
            allowed: l.max_compute_invocations_per_workgroup as u64,
        });
    }
    if storage_bytes > l.max_compute_workgroup_storage_size {
        return Err(Error::LimitExceeded {
            what: op.to_string(),
            limit: "maxComputeWorkgroupStorageSize",
            requested: storage_bytes as u64,
            allowed: l.max_compute_workgroup_storage_size as u64,
        });
    }
    Ok(())
}

/// The largest power of two ≤ `cap` that the adapter allows as a 1-D workgroup size.
pub fn workgroup_size_1d(ctx: &Context, cap: u32) -> u32 {
    let l = ctx.limits();
    let max = cap
        .min(l.max_compute_invocations_per_workgroup)
        .min(l.max_compute_workgroup_size_x)
        .max(1);
    1 << (31 - max.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key value builds its defines once; another value, the same value under another op,
    /// or an equal-looking value of another type builds its own.
    #[test]
    fn memoized_builds_once_per_key_value() {
        let built = std::cell::Cell::new(0);
        let make = |k: &(u32, bool)| {
            built.set(built.get() + 1);
            Defines::new().u32("K", k.0).bool("B", k.1)
        };
        let a = memoized("memo_test", &(7u32, true), make);
        let b = memoized("memo_test", &(7u32, true), make);
        assert_eq!((built.get(), &a), (1, &b));
        let c = memoized("memo_test", &(7u32, false), make);
        assert_eq!(built.get(), 2);
        assert_ne!(a, c);
        memoized("memo_test_other", &(7u32, true), make);
        assert_eq!(built.get(), 3);
        memoized("memo_test", &(7u64, true), |k| {
            built.set(built.get() + 1);
            Defines::new().u32("K", k.0 as u32)
        });
        assert_eq!(built.get(), 4);
    }
}
