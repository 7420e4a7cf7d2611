//! What the benches share: the context, as applications get it, and command-line arguments
//! (`-- --sizes 1024,4096`, `-- --f16`).

use ridge::core::Context;

#[allow(dead_code)] // the benches that price a forward with a report's terms
pub mod calibrated;

/// The default adapter's context with Ridge's tuning tables installed (the user's, then the
/// shipped one for the adapter's family), as `ridge` and applications get it: without them
/// every op would run its vendor-heuristic default. Table warnings go to stderr.
///
/// Panics when there is no adapter (a bench, not a CLI).
pub fn context() -> Context {
    let ctx = pollster::block_on(Context::new()).expect("adapter");
    for w in ridge::tune::install(&ctx).1 {
        eprintln!("warning: {w}");
    }
    ctx
}

/// The comma-separated positive whole numbers after `--name`, or `default` when it is
/// absent.
///
/// Exits with status 2 and one line naming the argument on a missing value or one that is
/// not a positive whole number (a typo must not start a long run, nor panic into one).
#[allow(dead_code)] // not every bench has lists
pub fn list(name: &str, default: &[usize]) -> Vec<usize> {
    let Some(text) = value(name) else {
        return default.to_vec();
    };
    text.split(',')
        .map(|v| match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => fail(&format!(
                "{name} takes positive whole numbers separated by commas, not {text:?}"
            )),
        })
        .collect()
}

/// Prints `why` as one line and exits with status 2 (a bench's bad input).
#[allow(dead_code)] // not every bench refuses input
pub fn fail(why: &str) -> ! {
    eprintln!("{why}");
    std::process::exit(2)
}

/// Whether `--name` was given.
#[allow(dead_code)] // not every bench has flags
pub fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// The text after `--name`, or `None` when it is absent; exits with status 2 and one line
/// when `--name` is the last argument or followed by another option.
#[allow(dead_code)] // not every bench takes a value
pub fn value(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    match args.get(i + 1) {
        Some(v) if !v.starts_with("--") => Some(v.clone()),
        _ => fail(&format!("{name} needs a value (--help explains)")),
    }
}

/// Checks the command line against the flags (`flags`) and valued options (`values`) a bench
/// takes: `--help` (or `-h`) prints `help` and exits; anything else unknown is named with the
/// known ones and exits with status 2 (a typo must not start a long run of the defaults).
/// `--bench`, which `cargo bench` passes, is always accepted.
#[allow(dead_code)] // not every bench checks its arguments
pub fn check_args(flags: &[&str], values: &[&str], help: &str) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--help" || a == "-h" {
            println!("{help}");
            std::process::exit(0);
        }
        if values.contains(&a) {
            i += 2;
            continue;
        }
        if a != "--bench" && !flags.contains(&a) {
            eprintln!(
                "unknown argument {a:?}; this bench takes {} (--help explains)",
                flags
                    .iter()
                    .chain(values)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            std::process::exit(2);
        }
        i += 1;
    }
}
