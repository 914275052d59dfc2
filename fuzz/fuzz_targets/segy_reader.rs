//! Arbitrary bytes as a SEG-Y file and as a Seismic Unix file, through everything a command does
//! with an input: open, every header, a range of traces, chunks, the cube grid, the selection
//! entry. Any panic, hang or runaway allocation is a bug; errors are the expected outcome.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use seisgpu_host::io::cube::CubeGrid;
use seisgpu_host::io::input::{read_traces, ReadOptions};
use seisgpu_host::io::segy::{FileFormat, ReaderOptions, SegyReader};

fn exercise(p: &Path, format: Option<FileFormat>) {
    let o = ReaderOptions { format, ..Default::default() };
    if let Ok(mut r) = SegyReader::open_with(p, &o) {
        let n = r.info().n_traces;
        if let Ok(h) = r.read_headers() {
            let _ = CubeGrid::from_headers(&h, "fuzz");
        }
        let _ = r.read_range(0, n.min(64));
        let _ = r.read_range(n.saturating_sub(3), 3.min(n));
        let _ = r.seek_trace(0);
        while let Ok(Some(_)) = r.read_chunk(7) {}
        let _ = r.check_tail();
    }
    let _ = read_traces(p, &ReadOptions { reader: o, ..Default::default() });
}

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    for (ext, format) in [("sgy", None), ("su", None), ("dat", Some(FileFormat::Su))] {
        let p = dir.join(format!("seisgpu-fuzz-{pid}.{ext}"));
        std::fs::write(&p, data).expect("writing the input to a temporary file");
        exercise(&p, format);
        let _ = std::fs::remove_file(&p);
    }
});
