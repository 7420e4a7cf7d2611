//! Long work off the UI thread: natively a thread per task (blocking on the task's future),
//! in the browser the page's event loop (`spawn_local`), where GPU work is asynchronous
//! anyway. The UI polls a task each frame; a finished task asks egui for a repaint.

use std::future::Future;
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
