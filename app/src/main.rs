//! `ridge-dashboard`: the dashboard in a native window (`cargo xtask dashboard`).

#[cfg(not(target_arch = "wasm32"))]
fn main() -> eframe::Result {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("Ridge")
            .with_inner_size([1280.0, 860.0]),
        ..Default::default()
    };
    eframe::run_native(
        "Ridge",
        options,
        Box::new(|_cc| Ok(Box::new(ridge_app::RidgeApp::new(None)))),
    )
}

// The browser shell is `ridge-web`'s `start_dashboard`.
#[cfg(target_arch = "wasm32")]
fn main() {}
