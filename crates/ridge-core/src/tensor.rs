//! Tensors: a device buffer with a shape, strides and an element type.

use half::f16;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::{Error, Result};

/// Element type of a tensor's storage. Kernels accumulate in f32 whatever the storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16 (needs the adapter feature `shader-f16` in kernels).
    F16,
    /// Unsigned 32-bit integers (token ids, lengths).
    U32,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::U32 => 4,
            DType::F16 => 2,
        }
    }
    /// The WGSL scalar type.
    pub fn wgsl(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::U32 => "u32",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.wgsl())
    }
}

/// Host element types that can be uploaded and downloaded.
pub trait Element: bytemuck::Pod {
    /// The matching dtype.
    const DTYPE: DType;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for f16 {
    const DTYPE: DType = DType::F16;
}
impl Element for u32 {
    const DTYPE: DType = DType::U32;
}

/// A device buffer (or a byte range of one) viewed as a row-major tensor.
///
/// Shapes are in elements, outermost first; `strides` are in elements too. Tensors made
/// here are contiguous; [`Tensor::reshape`] gives another contiguous view of the same buffer
/// and [`Tensor::narrow`] a range of its outermost dim. Cloning is cheap and shares the buffer.
#[derive(Clone)]
pub struct Tensor {
    buffer: std::sync::Arc<crate::pool::PooledBuffer>,
    /// Byte offset of element 0 in `buffer`.
    offset: u64,
    shape: Vec<usize>,
    strides: Vec<usize>,
    dtype: DType,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape)
            .field("dtype", &self.dtype)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

/// Row-major strides of `shape`, in elements.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// Number of elements of `shape` (1 for a scalar's empty shape); `None` on overflow.
pub fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

impl Tensor {
    /// An uninitialised tensor (its buffer may come back from the context's pool holding old
    /// data). Buffers are at least 4 bytes and a multiple of 4 (WebGPU's copy and binding
    /// alignment), so zero-size and odd-length f16 tensors are fine.
    ///
    /// Errors: [`Error::LimitExceeded`] beyond `maxBufferSize`; [`Error::Shape`] when the
    /// element count overflows.
    // In the browser wgpu's handles are neither Send nor Sync (one thread); natively they are.
    #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
    pub fn empty(ctx: &Context, shape: &[usize], dtype: DType) -> Result<Self> {
        let n =
            numel(shape).ok_or_else(|| Error::shape("tensor", format!("{shape:?} overflows")))?;
        let bytes = (n as u64)
            .checked_mul(dtype.size() as u64)
            .ok_or_else(|| Error::shape("tensor", format!("{shape:?} overflows")))?;
        let size = bytes.div_ceil(4).max(1) * 4;
        let allowed = ctx.limits().max_buffer_size;
        if size > allowed {
            return Err(Error::LimitExceeded {
                what: format!("tensor {shape:?} {dtype}"),
                limit: "maxBufferSize",
                requested: size,
                allowed,
            });
        }
        let buffer = std::sync::Arc::new(ctx.buffer_pool().take(ctx.device(), size, allowed));
        Ok(Self {
            buffer,
            offset: 0,
            strides: contiguous_strides(shape),
            shape: shape.to_vec(),
            dtype,
        })
    }

    /// A contiguous tensor over a whole existing buffer (at least `shape`'s bytes).
    #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
    pub(crate) fn from_buffer(buffer: wgpu::Buffer, shape: &[usize], dtype: DType) -> Self {
        Self {
            buffer: std::sync::Arc::new(crate::pool::PooledBuffer::unpooled(buffer)),
            offset: 0,
            strides: contiguous_strides(shape),
            shape: shape.to_vec(),
            dtype,
        }
    }

    /// A tensor holding `data` (row-major) with `shape`.
    ///
    /// Errors: [`Error::Shape`] when `data.len()` is not the shape's element count.
    pub fn from_slice<T: Element>(ctx: &Context, data: &[T], shape: &[usize]) -> Result<Self> {
        let t = Self::empty(ctx, shape, T::DTYPE)?;
        t.write(ctx, data)?;
        Ok(t)
    }

    /// A float tensor of `dtype` holding `data` (row-major) with `shape`: stored as is for
    /// f32, rounded to nearest for f16.
    ///
    /// Errors: [`Error::DType`] for a non-float `dtype`; [`Error::Shape`] as
    /// [`Tensor::from_slice`].
    pub fn from_f32(ctx: &Context, data: &[f32], shape: &[usize], dtype: DType) -> Result<Self> {
        match dtype {
            DType::F32 => Self::from_slice(ctx, data, shape),
            DType::F16 => {
                let halves: Vec<f16> = data.iter().map(|&v| f16::from_f32(v)).collect();
                Self::from_slice(ctx, &halves, shape)
            }
            got => Err(Error::DType {
                op: "Tensor::from_f32".into(),
                expected: DType::F32,
                got,
            }),
        }
    }

    /// Overwrites the whole tensor with `data`.
    ///
    /// Errors: [`Error::DType`] or [`Error::Shape`] when `data` does not match.
    pub fn write<T: Element>(&self, ctx: &Context, data: &[T]) -> Result<()> {
        self.expect_dtype("Tensor::write", T::DTYPE)?;
        if data.len() != self.numel() {
            return Err(Error::shape(
                "Tensor::write",
                format!("{} values for shape {:?}", data.len(), self.shape),
            ));
        }
        // Queue writes run before the next submission's commands: submit what is pending.
        ctx.flush();
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let aligned = bytes.len() / 4 * 4;
        if aligned > 0 {
            ctx.queue()
                .write_buffer(self.buffer(), self.offset, &bytes[..aligned]);
        }
        if aligned < bytes.len() {
            let mut tail = [0u8; 4];
            tail[..bytes.len() - aligned].copy_from_slice(&bytes[aligned..]);
            ctx.queue()
                .write_buffer(self.buffer(), self.offset + aligned as u64, &tail);
        }
        Ok(())
    }

    /// Fills the tensor's bytes (rounded up to 4) with NaN bit patterns (0xFFFF in f16,
    /// 0xFFFFFFFF in f32), so that tests catch any output element a kernel fails to write.
    pub fn poison(&self, ctx: &Context) {
        ctx.flush();
        let bytes = vec![0xFFu8; self.padded_bytes() as usize];
        ctx.queue().write_buffer(self.buffer(), self.offset, &bytes);
    }

    /// Downloads the tensor as `T` (which must be its dtype).
    pub async fn to_vec<T: Element>(&self, ctx: &Context) -> Result<Vec<T>> {
        self.expect_dtype("Tensor::to_vec", T::DTYPE)?;
        let raw = read_buffer(ctx, self.buffer(), self.offset, self.padded_bytes()).await?;
        let mut out: Vec<T> = bytemuck::pod_collect_to_vec(&raw);
        out.truncate(self.numel());
        Ok(out)
    }

    /// Downloads the tensor as f32 whatever its dtype (f32 or f16).
    ///
    /// Errors: [`Error::DType`] for a u32 tensor; GPU errors.
    pub async fn to_f32(&self, ctx: &Context) -> Result<Vec<f32>> {
        self.read_back(ctx)?.to_f32(ctx).await
    }

    /// Starts downloading the tensor after everything recorded so far and returns at once;
    /// [`ReadBack::to_f32`] (or [`ReadBack::to_u32`]) waits for it. Work recorded in between
    /// runs on the GPU meanwhile.
    pub fn read_back(&self, ctx: &Context) -> Result<ReadBack> {
        Ok(ReadBack {
            copy: PendingCopy::start(ctx, self.buffer(), self.offset, self.padded_bytes()),
            dtype: self.dtype,
            numel: self.numel(),
        })
    }

    /// Another contiguous view of the same buffer with `shape`.
    ///
    /// Errors: [`Error::Shape`] when the element counts differ.
    pub fn reshape(&self, shape: &[usize]) -> Result<Self> {
        if numel(shape) != Some(self.numel()) {
            return Err(Error::shape(
                "reshape",
                format!("{:?} to {shape:?}", self.shape),
            ));
        }
        Ok(Self {
            buffer: self.buffer.clone(),
            offset: self.offset,
            strides: contiguous_strides(shape),
            shape: shape.to_vec(),
            dtype: self.dtype,
        })
    }

    /// The view of rows `start..start + len` of the outermost dim, sharing the buffer.
    ///
    /// Errors: [`Error::Shape`] for a range outside the dim, a scalar, or a view whose byte
    /// offset or size is not a multiple of 4 (WebGPU's copy and binding granularity). Kernels
    /// also need the offset to be a multiple of the adapter's
    /// `minStorageBufferOffsetAlignment` (checked at launch).
    pub fn narrow(&self, start: usize, len: usize) -> Result<Self> {
        let outer = *self
            .shape
            .first()
            .ok_or_else(|| Error::shape("narrow", "a scalar has no outer dim"))?;
        if start.checked_add(len).is_none_or(|end| end > outer) {
            return Err(Error::shape(
                "narrow",
                format!(
                    "rows {start}..{} of {:?}",
                    start.saturating_add(len),
                    self.shape
                ),
            ));
        }
        let row_bytes = (self.strides[0] * self.dtype.size()) as u64;
        let offset = self.offset + start as u64 * row_bytes;
        if !offset.is_multiple_of(4) || !(len as u64 * row_bytes).is_multiple_of(4) {
            return Err(Error::shape(
                "narrow",
                format!(
                    "rows {start}..{} of {:?} are not 4-byte aligned",
                    start + len,
                    self.shape
                ),
            ));
        }
        let mut shape = self.shape.clone();
        shape[0] = len;
        Ok(Self {
            buffer: self.buffer.clone(),
            offset,
            strides: contiguous_strides(&shape),
            shape,
            dtype: self.dtype,
        })
    }

    /// A new tensor with a copy of this one's data (a GPU-side copy, ordered after
    /// everything recorded so far).
    pub fn duplicate(&self, ctx: &Context) -> Result<Self> {
        let copy = Self::empty(ctx, &self.shape, self.dtype)?;
        let mut encoder = ctx.encoder();
        encoder.copy_buffer_to_buffer(
            self.buffer(),
            self.offset,
            copy.buffer(),
            0,
            self.padded_bytes(),
        );
        ctx.submit(encoder);
        Ok(copy)
    }

    /// Errors with [`Error::DType`] unless this tensor's dtype is `want`.
    pub fn expect_dtype(&self, op: &str, want: DType) -> Result<()> {
        if self.dtype != want {
            return Err(Error::DType {
                op: op.to_string(),
                expected: want,
                got: self.dtype,
            });
        }
        Ok(())
    }

    /// Errors with [`Error::Shape`] unless this tensor's shape is `want`.
    pub fn expect_shape(&self, op: &str, what: &str, want: &[usize]) -> Result<()> {
        if self.shape != want {
            return Err(Error::shape(
                op,
                format!("{what} has shape {:?}, expected {want:?}", self.shape),
            ));
        }
        Ok(())
    }

    /// The device buffer.
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer.buffer
    }
    /// Byte offset of the first element in [`Tensor::buffer`].
    pub fn offset(&self) -> u64 {
        self.offset
    }
    /// Bytes the tensor occupies, rounded up to 4 (at least 4).
    pub fn padded_bytes(&self) -> u64 {
        self.size_bytes().div_ceil(4).max(1) * 4
    }
    /// Shape in elements, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Strides in elements.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// Bytes of data (without the padding to 4).
    pub fn size_bytes(&self) -> u64 {
        (self.numel() * self.dtype.size()) as u64
    }
    /// Whether the strides are row-major contiguous.
    pub fn is_contiguous(&self) -> bool {
        self.strides == contiguous_strides(&self.shape)
    }
    /// The tensor's byte range as a binding resource.
    pub fn binding(&self) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: self.buffer(),
            offset: self.offset,
            size: std::num::NonZeroU64::new(self.padded_bytes()),
        })
    }
}

/// Copies `bytes` (a multiple of 4) of `buffer` from `offset` to the host, after everything
/// recorded so far, and reports GPU errors recorded meanwhile.
pub(crate) async fn read_buffer(
    ctx: &Context,
    buffer: &wgpu::Buffer,
    offset: u64,
    bytes: u64,
) -> Result<Vec<u8>> {
    PendingCopy::start(ctx, buffer, offset, bytes)
        .finish(ctx)
        .await
}

/// A copy to a mappable buffer, submitted after everything recorded before it, its mapping
/// requested.
struct PendingCopy {
    staging: wgpu::Buffer,
    bytes: u64,
    index: wgpu::SubmissionIndex,
    mapped: futures_channel::oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
}

impl PendingCopy {
    fn start(ctx: &Context, buffer: &wgpu::Buffer, offset: u64, bytes: u64) -> Self {
        let staging = ctx.device().create_buffer(&wgpu::BufferDescriptor {
            label: Some("ridge read-back"),
            size: bytes.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = ctx.encoder();
        if bytes > 0 {
            encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, bytes);
        }
        let index = ctx.submit(encoder);
        let (tx, mapped) = futures_channel::oneshot::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        Self {
            staging,
            bytes,
            index,
            mapped,
        }
    }

    /// Waits for this copy (not for work submitted after it) and returns the bytes.
    async fn finish(self, ctx: &Context) -> Result<Vec<u8>> {
        ctx.wait_for(self.index)?;
        let mapped = self
            .mapped
            .await
            .map_err(|_| Error::DeviceLost("read-back was cancelled".into()))?;
        if let Err(e) = mapped {
            // A lost device or an earlier validation error is the cause worth reporting.
            ctx.take_error()?;
            return Err(Error::Gpu(format!("mapping a read-back buffer: {e}")));
        }
        let mut data = self
            .staging
            .slice(..self.bytes.max(4))
            .get_mapped_range()
            .map_err(|e| Error::Gpu(format!("reading a read-back buffer: {e}")))?
            .to_vec();
        self.staging.unmap();
        ctx.take_error()?;
        data.truncate(self.bytes as usize);
        Ok(data)
    }
}

/// A tensor's read-back on its way ([`Tensor::read_back`]). The host can record more work
/// before [`ReadBack::to_f32`] waits for this copy alone: the GPU starts on that work while
/// the host waits (a stream of batches then keeps the GPU busy between them).
pub struct ReadBack {
    copy: PendingCopy,
    dtype: DType,
    numel: usize,
}

impl ReadBack {
    /// Waits for this copy and returns the tensor's values as f32, as [`Tensor::to_f32`].
    ///
    /// Errors: [`Error::DType`] for a u32 tensor; GPU errors, as [`Tensor::to_f32`].
    pub async fn to_f32(self, ctx: &Context) -> Result<Vec<f32>> {
        if self.dtype == DType::U32 {
            return Err(Error::DType {
                op: "ReadBack::to_f32".into(),
                expected: DType::F32,
                got: DType::U32,
            });
        }
        let raw = self.copy.finish(ctx).await?;
        let mut out: Vec<f32> = if self.dtype == DType::F16 {
            bytemuck::pod_collect_to_vec::<u8, f16>(&raw)
                .into_iter()
                .map(f16::to_f32)
                .collect()
        } else {
            bytemuck::pod_collect_to_vec(&raw)
        };
        out.truncate(self.numel);
        Ok(out)
    }

    /// Waits for this copy and returns a u32 tensor's values (token ids).
    ///
    /// Errors: [`Error::DType`] unless the tensor is u32; GPU errors.
    pub async fn to_u32(self, ctx: &Context) -> Result<Vec<u32>> {
        if self.dtype != DType::U32 {
            return Err(Error::DType {
                op: "ReadBack::to_u32".into(),
                expected: DType::U32,
                got: self.dtype,
            });
        }
        let mut out: Vec<u32> = bytemuck::pod_collect_to_vec(&self.copy.finish(ctx).await?);
        out.truncate(self.numel);
        Ok(out)
    }
}
