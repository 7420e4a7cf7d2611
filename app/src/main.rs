//! `ridge-dashboard`: the dashboard in a native window (`cargo xtask dashboard`).

/// Ridge's dashboard: the performance model next to your GPU. It opens the adapter
/// (`RIDGE_ADAPTER=name` picks one), measures its ceilings, and shows the roofline, live
/// kernel runs, MiniLM with a per-op breakdown, `ridge bench --json` reports side by side,
/// a teaching mode, and decoder LLMs on any GPU of the spec table against published rates.
/// It needs a display (`cargo xtask web` serves the same dashboard to a browser).
#[cfg(not(target_arch = "wasm32"))]
#[derive(clap::Parser)]
#[command(version)]
struct Args {
    /// Show a `ridge bench --json` report (e.g. benches/reports/h200.json) as if it had
    /// been measured here, without opening a GPU: its adapter, ceilings and every case.
    #[arg(long, value_name = "REPORT.json")]
    replay: Option<std::path::PathBuf>,
    /// The panel to open on: adapter, roofline, kernels, transformer, compare, teach or llms
    /// (a prefix will do).
    #[arg(long, value_parser = tab)]
    tab: Option<ridge_app::Tab>,
}

#[cfg(not(target_arch = "wasm32"))]
fn tab(name: &str) -> Result<ridge_app::Tab, String> {
    ridge_app::Tab::from_name(name).ok_or_else(|| {
        format!(
            "no panel {name:?}: one of adapter, roofline, kernels, transformer, compare, teach, \
             llms"
        )
    })
}

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    use clap::Parser as _;
    let args = Args::parse();
    let mut app = match &args.replay {
        None => ridge_app::RidgeApp::new(None),
        Some(path) => {
            let report = std::fs::read(path)
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    ridge_model::report::BenchReport::parse(&b).map_err(|e| e.to_string())
                });
            match report {
                Ok(r) => ridge_app::RidgeApp::replay(&r),
                Err(e) => {
                    eprintln!("ridge-dashboard: {}: {e}", path.display());
                    return std::process::ExitCode::FAILURE;
                }
            }
        }
    };
    if let Some(tab) = args.tab {
        app.tab = tab;
    }
    #[cfg(target_os = "linux")]
    if ["DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET"]
        .iter()
        .all(|v| std::env::var_os(v).is_none())
    {
        eprintln!(
            "ridge-dashboard: no display (DISPLAY and WAYLAND_DISPLAY are unset): run it under \
             X or Wayland (or xvfb-run), or serve the same dashboard to a browser with \
             `cargo xtask web`"
        );
        return std::process::ExitCode::FAILURE;
    }
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("Ridge")
            .with_inner_size([1280.0, 860.0]),
        ..Default::default()
    };
    match eframe::run_native("Ridge", options, Box::new(|_cc| Ok(Box::new(app)))) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ridge-dashboard: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

// The browser shell is `ridge-web`'s `start_dashboard`.
#[cfg(target_arch = "wasm32")]
fn main() {}
