//! Arbitrary bytes as a SEG-Y file and as a Seismic Unix file, through everything a command does
//! with an input (`seisgpu_host::io::input::exercise_reader`). Any panic, hang or runaway allocation is a bug; errors are the expected outcome.

#![no_main]

use libfuzzer_sys::fuzz_target;
use seisgpu_host::io::input::exercise_reader;
use seisgpu_host::io::segy::FileFormat;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    for (ext, format) in [("sgy", None), ("su", None), ("dat", Some(FileFormat::Su))] {
        let p = dir.join(format!("seisgpu-fuzz-{pid}.{ext}"));
        std::fs::write(&p, data).expect("writing the input to a temporary file");
        exercise_reader(&p, format);
        let _ = std::fs::remove_file(&p);
    }
});
