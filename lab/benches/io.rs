//! Criterion benchmarks of the data layer: IBM float conversion and SEG-Y read/write throughput
//! (whole file and streaming chunks). Files go to the system temporary directory (page cache:
//! this measures the decoder/encoder and copies, not the disk).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use seisgpu_host::io::segy::{ibm, read_segy, write_segy, Endian, SampleFormat, SegyReader, WriteOptions};
use seisgpu_host::synth;

const N_TRACES: usize = 20_000;
const NS: usize = 500;

fn ibm_conversion(c: &mut Criterion) {
    let x: Vec<f32> = (0..1 << 20).map(|i| ((i as f32) * 0.618).sin() * 1e3).collect();
    let mut bytes = vec![0u8; x.len() * 4];
    let mut back = vec![0f32; x.len()];
    let mut g = c.benchmark_group("ibm");
    g.throughput(Throughput::Elements(x.len() as u64));
    g.bench_function("encode 1M samples", |b| b.iter(|| ibm::encode(black_box(&x), true, &mut bytes)));
    ibm::encode(&x, true, &mut bytes);
    g.bench_function("decode 1M samples", |b| b.iter(|| ibm::decode(black_box(&bytes), true, &mut back)));
    g.finish();
}

fn segy_files(c: &mut Criterion) {
    let headers = synth::geometry::line_2d(40, 50.0, N_TRACES / 40, 12.5);
    let set = synth::noise_traces(headers, NS, 0.004, 3);
    let dir = std::env::temp_dir().join(format!("seisgpu-bench-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut g = c.benchmark_group("segy");
    g.sample_size(10);
    let bytes = (3600 + N_TRACES * (240 + NS * 4)) as u64;
    g.throughput(Throughput::Bytes(bytes));
    for (name, format) in [("ibm", SampleFormat::IbmFloat), ("ieee", SampleFormat::IeeeFloat)] {
        let p = dir.join(format!("{name}.sgy"));
        let o = WriteOptions { format, endian: Endian::Big, ..Default::default() };
        g.bench_function(format!("write {name} 20k x 500"), |b| b.iter(|| write_segy(&p, &set, &o).unwrap()));
        g.bench_function(format!("read {name} 20k x 500"), |b| b.iter(|| black_box(read_segy(&p).unwrap())));
        g.bench_function(format!("stream {name} chunks of 1000"), |b| {
            b.iter(|| {
                let mut r = SegyReader::open(&p).unwrap();
                let mut n = 0;
                while let Some(chunk) = r.read_chunk(1000).unwrap() {
                    n += chunk.len();
                }
                assert_eq!(n, N_TRACES);
            })
        });
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, ibm_conversion, segy_files);
criterion_main!(benches);
