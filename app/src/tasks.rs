//! Long work off the UI thread: natively a thread per task (blocking on the task's future),
//! in the browser the page's event loop (`spawn_local`), where GPU work is asynchronous
//! anyway. The UI polls a task each frame; a finished task asks egui for a repaint.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A background task's result, `None` until it is done.
pub struct Task<T> {
    slot: Arc<Mutex<Option<T>>>,
}

impl<T> Task<T> {
    /// Takes the result once the task is done.
    pub fn take(&self) -> Option<T> {
        self.slot.lock().ok()?.take()
    }
}

fn finish<T>(slot: &Arc<Mutex<Option<T>>>, egui: &egui::Context, value: T) {
    if let Ok(mut s) = slot.lock() {
        *s = Some(value);
    }
    egui.request_repaint();
}

/// Runs the future `make()` returns in the background.
#[cfg(not(target_arch = "wasm32"))]
pub fn spawn<T, F>(egui: &egui::Context, make: impl FnOnce() -> F + Send + 'static) -> Task<T>
where
    T: Send + 'static,
    F: Future<Output = T> + 'static,
{
    let slot = Arc::new(Mutex::new(None));
    let (s, egui) = (slot.clone(), egui.clone());
    std::thread::spawn(move || finish(&s, &egui, pollster::block_on(make())));
    Task { slot }
}

/// Runs the future `make()` returns in the background.
#[cfg(target_arch = "wasm32")]
pub fn spawn<T, F>(egui: &egui::Context, make: impl FnOnce() -> F + 'static) -> Task<T>
where
    T: 'static,
    F: Future<Output = T> + 'static,
{
    let slot = Arc::new(Mutex::new(None));
    let (s, egui) = (slot.clone(), egui.clone());
    wasm_bindgen_futures::spawn_local(async move { finish(&s, &egui, make().await) });
    Task { slot }
}

/// A background task that hands over its results one by one as it makes them (a sweep's
/// points appear as they are measured) and can be asked to stop.
pub struct Stream<T> {
    shared: Arc<Shared<T>>,
    _task: Task<()>,
}

struct Shared<T> {
    items: Mutex<Vec<T>>,
    cancel: AtomicBool,
    done: AtomicBool,
}

/// The task's end of a [`Stream`].
pub struct Sink<T> {
    shared: Arc<Shared<T>>,
    egui: egui::Context,
}

impl<T> Sink<T> {
    /// Hands `item` to the UI and asks for a repaint.
    pub fn send(&self, item: T) {
        if let Ok(mut items) = self.shared.items.lock() {
            items.push(item);
        }
        self.egui.request_repaint();
    }

    /// Whether the UI asked the task to stop (checked between units of work).
    pub fn cancelled(&self) -> bool {
        self.shared.cancel.load(Ordering::Relaxed)
    }
}

impl<T> Stream<T> {
    /// The items sent since the last call.
    pub fn drain(&self) -> Vec<T> {
        self.shared
            .items
            .lock()
            .map(|mut i| std::mem::take(&mut *i))
            .unwrap_or_default()
    }

    /// Whether the task has returned (drain once more for its last items).
    pub fn finished(&self) -> bool {
        self.shared.done.load(Ordering::Acquire)
    }

    /// Asks the task to stop after its current unit of work.
    pub fn cancel(&self) {
        self.shared.cancel.store(true, Ordering::Relaxed);
    }

    /// Whether [`Stream::cancel`] was called.
    pub fn cancelling(&self) -> bool {
        self.shared.cancel.load(Ordering::Relaxed)
    }
}

/// Runs the future `make(sink)` returns in the background, streaming what it sends
/// (natively on a thread of its own, in the browser on the page's event loop, as [`spawn`]).
pub fn spawn_stream<T, F>(
    egui: &egui::Context,
    make: impl FnOnce(Sink<T>) -> F + Sendable,
) -> Stream<T>
where
    T: Sendable,
    F: Future<Output = ()> + 'static,
{
    let shared = Arc::new(Shared {
        items: Mutex::new(Vec::new()),
        cancel: AtomicBool::new(false),
        done: AtomicBool::new(false),
    });
    let sink = Sink {
        shared: Arc::clone(&shared),
        egui: egui.clone(),
    };
    let done = Arc::clone(&shared);
    let task = spawn(egui, move || {
        let work = make(sink);
        async move {
            work.await;
            done.done.store(true, Ordering::Release);
        }
    });
    Stream {
        shared,
        _task: task,
    }
}

/// `Send + 'static` natively (tasks run on threads), `'static` in the browser.
#[cfg(not(target_arch = "wasm32"))]
pub trait Sendable: Send + 'static {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Send + 'static> Sendable for T {}
/// `Send + 'static` natively (tasks run on threads), `'static` in the browser.
#[cfg(target_arch = "wasm32")]
pub trait Sendable: 'static {}
#[cfg(target_arch = "wasm32")]
impl<T: 'static> Sendable for T {}
