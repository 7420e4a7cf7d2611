//! Command-line arguments shared by the benches (`-- --sizes 1024,4096`, `-- --f16`).

/// The comma-separated numbers after `--name`, or `default` when it is absent.
///
/// Panics with the argument's name on a value that is not a number (a bench, not a CLI).
pub fn list(name: &str, default: &[usize]) -> Vec<usize> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|s| {
            s.split(',')
                .map(|v| {
                    v.parse()
                        .unwrap_or_else(|_| panic!("{name}: {v:?} is not a number"))
                })
                .collect()
        })
        .unwrap_or_else(|| default.to_vec())
}

/// Whether `--name` was given.
#[allow(dead_code)] // not every bench has flags
pub fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}
