//! Device buffers recycled by size class. A Transformer forward pass allocates dozens of
//! activation tensors; creating each as a fresh device allocation (which wgpu also zero-fills
//! before first use) cost more host time than the whole pass's GPU time on the H200
//! (benches/NOTES.md). A dropped tensor's buffer goes back to its class and the next tensor
//! of that class takes it: after the first pass, a pass allocates nothing.
//!
//! Order stays correct: work on a buffer is submitted in recording order on one queue, and
//! every host write (`Tensor::write`) first submits what was recorded before it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// Free buffers kept at most, in bytes, before dropped buffers are released for real.
const MAX_POOLED_BYTES: u64 = 1 << 30;

/// Buffers released for real so far, by every pool (and unpooled buffers dropped): the
/// recorder's bind-group cache, whose bind groups keep their buffers alive, empties itself
/// when this moves.
static RELEASES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The count of buffers released for real so far (see [`RELEASES`]).
pub(crate) fn releases() -> u64 {
    RELEASES.load(std::sync::atomic::Ordering::Relaxed)
}

/// The size class of a request: rounded up to 3 significant bits (at most 12.5 % more), at
/// least 256 bytes.
pub fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(256);
    let shift = (63 - b.leading_zeros()).saturating_sub(3);
    b.div_ceil(1 << shift) << shift
}

fn create(device: &wgpu::Device, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("ridge tensor"),
        size,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

#[derive(Default)]
pub(crate) struct BufferPool {
    free: Mutex<(HashMap<u64, Vec<wgpu::Buffer>>, u64)>,
    /// Bytes of the pool's buffers that exist, in use or free.
    allocated: std::sync::atomic::AtomicU64,
}

/// A buffer that returns to its pool when the last tensor using it is dropped.
pub(crate) struct PooledBuffer {
    pub(crate) buffer: wgpu::Buffer,
    pool: Weak<BufferPool>,
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        match self.pool.upgrade() {
            Some(pool) => pool.give_back(self.buffer.clone()),
            None => {
                RELEASES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

impl PooledBuffer {
    /// A buffer that belongs to no pool.
    pub(crate) fn unpooled(buffer: wgpu::Buffer) -> Self {
        Self {
            buffer,
            pool: Weak::new(),
        }
    }
}

impl BufferPool {
    /// A storage buffer of at least `bytes`, recycled when one of its class is free. Where
    /// the class would exceed `max_size` (the adapter's `maxBufferSize`), an exact-size buffer
    /// outside the pool.
    pub(crate) fn take(
        self: &Arc<Self>,
        device: &wgpu::Device,
        bytes: u64,
        max_size: u64,
    ) -> PooledBuffer {
        let class = size_class(bytes);
        if class > max_size {
            return PooledBuffer::unpooled(create(device, bytes));
        }
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            let b = free.0.get_mut(&class).and_then(Vec::pop);
            if b.is_some() {
                free.1 -= class;
            }
            b
        };
        let buffer = reused.unwrap_or_else(|| {
            self.allocated
                .fetch_add(class, std::sync::atomic::Ordering::Relaxed);
            create(device, class)
        });
        PooledBuffer {
            buffer,
            pool: Arc::downgrade(self),
        }
    }

    fn give_back(&self, buffer: wgpu::Buffer) {
        let class = buffer.size();
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.1 + class <= MAX_POOLED_BYTES {
            free.1 += class;
            free.0.entry(class).or_default().push(buffer);
        } else {
            self.release(&buffer);
            drop(buffer);
        }
    }

    /// Forgets a buffer: wgpu frees it once no recorded or submitted work uses it (an
    /// explicit `destroy` would break dispatches recorded but not yet submitted).
    fn release(&self, buffer: &wgpu::Buffer) {
        RELEASES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.allocated
            .fetch_sub(buffer.size(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Releases every free buffer to the device; returns the bytes released.
    pub(crate) fn trim(&self) -> u64 {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        for buffer in free.0.drain().flat_map(|(_, v)| v) {
            self.release(&buffer);
        }
        std::mem::take(&mut free.1)
    }

    /// Bytes of the pool's buffers that exist, in use by tensors or free.
    pub(crate) fn allocated_bytes(&self) -> u64 {
        self.allocated.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes held in free buffers.
    pub(crate) fn pooled_bytes(&self) -> u64 {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).1
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn classes_waste_at_most_an_eighth() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(256), 256);
        assert_eq!(size_class(257), 288);
        for b in [1000u64, 4096, 6_291_456, 25_165_824, 46_881_792, 1 << 30] {
            let c = size_class(b);
            assert!(c >= b && (c - b) * 8 <= b, "{b} -> {c}");
        }
    }
}
