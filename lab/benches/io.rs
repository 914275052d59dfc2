//! Micro-benchmarks of the data layer: IBM float conversion and SEG-Y read/write throughput
//! (whole file and streaming chunks). Files go to the system temporary directory (page cache:
//! this measures the decoder/encoder and copies, not the disk).
use seisgpu_host::io::segy::{ibm, read_segy, write_segy, Endian, SampleFormat, SegyReader, WriteOptions};
use seisgpu_host::synth;
use seisgpu_lab::micro::Group;

const N_TRACES: usize = 20_000;
const NS: usize = 500;

fn ibm_conversion() {
    let x: Vec<f32> = (0..1 << 20).map(|i| ((i as f32) * 0.618).sin() * 1e3).collect();
    let mut bytes = vec![0u8; x.len() * 4];
    let mut back = vec![0f32; x.len()];
    let g = Group::new("ibm").repeats(50);
    let work = Some((x.len() as f64, "sample"));
    g.case("encode 1M samples", work, || ibm::encode(std::hint::black_box(&x), true, &mut bytes));
    ibm::encode(&x, true, &mut bytes);
    g.case("decode 1M samples", work, || ibm::decode(std::hint::black_box(&bytes), true, &mut back));
}

fn segy_files() {
    let headers = synth::geometry::line_2d(40, 50.0, N_TRACES / 40, 12.5);
    let set = synth::noise_traces(headers, NS, 0.004, 3);
    let dir = std::env::temp_dir().join(format!("seisgpu-bench-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let g = Group::new("segy");
    let work = Some(((3600 + N_TRACES * (240 + NS * 4)) as f64, "B"));
    for (name, format) in [("ibm", SampleFormat::IbmFloat), ("ieee", SampleFormat::IeeeFloat)] {
        let p = dir.join(format!("{name}.sgy"));
        let o = WriteOptions { format, endian: Endian::Big, ..Default::default() };
        g.case(&format!("write {name} 20k x 500"), work, || write_segy(&p, &set, &o).unwrap());
        // The reads need the file even when the write case is filtered out.
        write_segy(&p, &set, &o).unwrap();
        g.case(&format!("read {name} 20k x 500"), work, || read_segy(&p).unwrap());
        g.case(&format!("stream {name} chunks of 1000"), work, || {
            let mut r = SegyReader::open(&p).unwrap();
            let mut n = 0;
            while let Some(chunk) = r.read_chunk(1000).unwrap() {
                n += chunk.len();
            }
            assert_eq!(n, N_TRACES);
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    ibm_conversion();
    segy_files();
}
