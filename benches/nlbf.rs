//! Criterion benchmarks of the nlbf CPU reference (and GPU kernels when a GPU is present). Placeholder.
use criterion::{criterion_group, criterion_main, Criterion};

fn placeholder(_c: &mut Criterion) {}

criterion_group!(benches, placeholder);
criterion_main!(benches);
