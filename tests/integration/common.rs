//! Functions shared by the integration tests.
#![allow(dead_code)]

use rand::{RngExt, SeedableRng};

/// The `seisgpu` CLI: cargo's build, or the one beside the test binary (a GPU bundle copies the
/// tests and the CLI into one folder, where cargo's path does not exist).
pub fn seisgpu_bin() -> std::path::PathBuf {
    let built = std::path::PathBuf::from(env!("CARGO_BIN_EXE_seisgpu"));
    if built.exists() {
        return built;
    }
    let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.join("seisgpu")));
    beside.filter(|p| p.exists()).unwrap_or(built)
}

/// A fresh folder for one test's files: `seisgpu-<area>-<name>-<pid>` in the temporary folder.
pub fn fresh_dir(area: &str, name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("seisgpu-{area}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the CLI with `args`.
pub fn run_cli(args: &[&str]) -> std::process::Output {
    let bin = seisgpu_bin();
    std::process::Command::new(&bin).args(args).output().unwrap_or_else(|e| panic!("{} does not run: {e}", bin.display()))
}

/// What a run printed, standard output then standard error.
pub fn printed(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Fresh random values in [-1, 1) (never zeros), seeded from the clock unless `SEISGPU_TEST_SEED` is set;
/// the seed is printed so a failure can be replayed (`SEISGPU_TEST_SEED_<WHAT>`, e.g.
/// `SEISGPU_TEST_SEED_VELOCITY`, sets one vector's seed alone, for tests that draw several).
pub fn random_vec(len: usize, what: &str) -> Vec<f32> {
    let key = format!("SEISGPU_TEST_SEED_{}", what.to_uppercase().replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
    let seed = std::env::var(&key).ok().and_then(|s| s.parse().ok()).unwrap_or_else(test_seed);
    println!("{what}: seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

pub fn test_seed() -> u64 {
    std::env::var("SEISGPU_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    })
}

pub use seisgpu_lab::bench::rel_l2;
