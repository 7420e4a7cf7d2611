//! Device buffers recycled by size class. A Transformer forward pass allocates dozens of
//! activation tensors; creating each as a fresh device allocation (which wgpu also zero-fills
//! before first use) cost more host time than the whole pass's GPU time on the H200
//! (benches/NOTES.md). A dropped tensor's buffer goes back to its class and the next tensor
//! of that class takes it: after the first pass, a pass allocates nothing.
//!
//! Free buffers are kept up to 1 GiB (`MAX_POOLED_BYTES`); past it the least recently given back
//! are released, never the one just given back: a pool left full by earlier work (a sweep's
//! cold weight copies, a dropped model) would otherwise release and re-create a large buffer
//! at every launch that needs it (on the H200 a prompt attention's 39 and 156 MB partial
//! records made its launches 1.2–1.4× slower so; benches/NOTES.md runs 158–159).
//!
//! Order stays correct: work on a buffer is submitted in recording order on one queue, and
//! every host write (`Tensor::write`) first submits what was recorded before it.

use std::collections::{HashMap, VecDeque};
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

/// Free buffers by size class, newest last in each, with the bytes they hold; past `cap`
/// bytes the least recently given back are evicted first.
struct FreeList<B> {
    by_class: HashMap<u64, VecDeque<(u64, B)>>,
    bytes: u64,
    /// The stamp the next buffer given back gets (a count).
    next: u64,
    cap: u64,
}

impl<B> FreeList<B> {
    fn new(cap: u64) -> Self {
        Self {
            by_class: HashMap::new(),
            bytes: 0,
            next: 0,
            cap,
        }
    }

    /// The most recently given back free buffer of `class`.
    fn take(&mut self, class: u64) -> Option<B> {
        let (_, b) = self.by_class.get_mut(&class)?.pop_back()?;
        self.bytes -= class;
        Some(b)
    }

    /// Keeps `b` (of `class` bytes) free; returns what must be released to keep within the
    /// cap: the least recently given back buffers, or `b` itself where its class alone
    /// passes the cap.
    fn put(&mut self, class: u64, b: B) -> Vec<B> {
        if class > self.cap {
            return vec![b];
        }
        let mut evicted = Vec::new();
        while self.bytes + class > self.cap {
            let oldest = self
                .by_class
                .iter()
                .filter_map(|(&c, q)| q.front().map(|&(stamp, _)| (stamp, c)))
                .min();
            let Some((_, c)) = oldest else { break };
            if let Some((_, victim)) = self.by_class.get_mut(&c).and_then(VecDeque::pop_front) {
                self.bytes -= c;
                evicted.push(victim);
            }
        }
        self.by_class
            .entry(class)
            .or_default()
            .push_back((self.next, b));
        self.next += 1;
        self.bytes += class;
        evicted
    }

    /// Every free buffer, the list left empty.
    fn drain(&mut self) -> Vec<B> {
        self.bytes = 0;
        self.by_class
            .drain()
            .flat_map(|(_, q)| q.into_iter().map(|(_, b)| b))
            .collect()
    }
}

pub(crate) struct BufferPool {
    free: Mutex<FreeList<wgpu::Buffer>>,
    /// Bytes of the pool's buffers that exist, in use or free.
    allocated: std::sync::atomic::AtomicU64,
}

impl Default for BufferPool {
    fn default() -> Self {
        Self {
            free: Mutex::new(FreeList::new(MAX_POOLED_BYTES)),
            allocated: Default::default(),
        }
    }
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
        let reused = self
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(class);
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
        let evicted = self
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .put(class, buffer);
        for b in evicted {
            self.release(&b);
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
        let bytes = free.bytes;
        for buffer in free.drain() {
            self.release(&buffer);
        }
        bytes
    }

    /// Bytes of the pool's buffers that exist, in use by tensors or free.
    pub(crate) fn allocated_bytes(&self) -> u64 {
        self.allocated.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes held in free buffers.
    pub(crate) fn pooled_bytes(&self) -> u64 {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::{FreeList, size_class};

    /// Past the cap the least recently given back buffers go, never the one given back; a
    /// class alone past the cap is not kept.
    #[test]
    fn a_full_list_evicts_the_oldest_free_buffers() {
        let mut f = FreeList::new(100);
        assert!(f.put(40, "a").is_empty() && f.put(40, "b").is_empty());
        assert_eq!(f.put(30, "c"), vec!["a"]);
        assert_eq!((f.bytes, f.take(40), f.take(40)), (70, Some("b"), None));
        assert_eq!(f.put(101, "huge"), vec!["huge"]);
        assert_eq!(f.put(100, "d"), vec!["c"]);
        assert_eq!((f.drain(), f.bytes), (vec!["d"], 0));
    }

    /// A launch that takes and gives back one large buffer, after earlier work left the list
    /// full of others: the first give-back evicts what it needs, and every launch after takes
    /// the same buffer back (the old rule released it at every launch).
    #[test]
    fn a_buffer_used_every_launch_stays_once_the_list_is_full() {
        let mut f = FreeList::new(1000);
        for i in 0..10 {
            assert!(f.put(100, i).is_empty());
        }
        let mut evicted = 0;
        let mut made = 0;
        for _ in 0..5 {
            let b = f.take(390).unwrap_or_else(|| {
                made += 1;
                99
            });
            evicted += f.put(390, b).len();
        }
        assert_eq!((made, evicted, f.bytes), (1, 4, 990));
    }

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
