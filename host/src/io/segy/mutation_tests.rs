//! The reader on thousands of deterministic random mutations of small fixtures (the plain-Rust
//! counterpart of the cargo-fuzz target in fuzz/): no panic, no hang, whatever the bytes.

use std::path::Path;
use std::time::{Duration, Instant};

use super::field_tests::{text_record, Fixture};
use super::header::FieldsMut;
use super::*;
use crate::io::input::exercise_reader;

/// The seed files: SEG-Y rev 1 and 2 in every layout the reader takes, SU in both byte orders.
pub(super) fn seeds() -> Vec<(Vec<u8>, &'static str)> {
    let mut v = Vec::new();
    for (format, endian) in [(SampleFormat::IbmFloat, Endian::Big), (SampleFormat::Int16, Endian::Little), (SampleFormat::Int8, Endian::Big)] {
        v.push((Fixture::new(format, endian, 12, 6).segy(), "sgy"));
    }
    let mut fx = Fixture::new(SampleFormat::IeeeFloat, Endian::Big, 10, 5);
    fx.header_ns = 40;
    v.push((fx.segy(), "sgy"));
    let mut fx = Fixture::new(SampleFormat::IbmFloat, Endian::Big, 8, 4);
    fx.rev = 0;
    fx.text_records = vec![text_record("C 1 HISTORY", TextEncoding::Ebcdic)];
    v.push((fx.segy(), "sgy"));
    let mut b = Fixture::new(SampleFormat::IeeeFloat, Endian::Little, 8, 4).segy();
    let mut f = FieldsMut::new(&mut b[3200..3600], 3201, Endian::Little);
    f.u8(3501, 2);
    f.u32(3297, header::BYTE_ORDER_CONSTANT);
    f.i32(3269, 8);
    f.f64(3273, 2000.0);
    f.u64(3521, 3600);
    v.push((b, "sgy"));
    v.push((Fixture::new(SampleFormat::IeeeFloat, Endian::Little, 9, 5).su(), "su"));
    v.push((Fixture::new(SampleFormat::IeeeFloat, Endian::Big, 9, 5).su(), "su"));
    v
}

/// Byte numbers (0-based file offsets) of the fields worth hitting with extreme values.
const FIELDS: [usize; 18] = [3216, 3220, 3224, 3268, 3272, 3296, 3500, 3504, 3506, 3512, 3520, 3528, 3600 + 114, 3600 + 116,
    3600 + 108, 3600 + 214, 114, 116];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize { (self.next() % n.max(1) as u64) as usize }
}

fn mutate(bytes: &mut Vec<u8>, rng: &mut Rng) {
    for _ in 0..1 + rng.below(4) {
        let len = bytes.len();
        match rng.below(6) {
            0 if len > 0 => {
                let i = rng.below(len);
                bytes[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                bytes[i] = rng.next() as u8;
            }
            2 => {
                let at = FIELDS[rng.below(FIELDS.len())];
                let v: [u8; 8] = match rng.below(8) {
                    0 => [0; 8],
                    1 => [0xFF; 8],
                    2 => [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
                    3 => [0x80, 0, 0, 0, 0, 0, 0, 0],
                    4 => f64::INFINITY.to_be_bytes(),
                    5 => f64::NAN.to_le_bytes(),
                    6 => (rng.below(70000) as u64).to_be_bytes(),
                    _ => rng.next().to_le_bytes(),
                };
                let w = [2, 4, 8][rng.below(3)];
                if at + w <= len {
                    bytes[at..at + w].copy_from_slice(&v[8 - w..]);
                }
            }
            3 => bytes.truncate(rng.below(len + 1)),
            4 => {
                let extra = rng.below(700);
                bytes.extend((0..extra).map(|_| rng.next() as u8));
            }
            _ => {
                // A copy of a 3200-byte stretch of text or data somewhere else.
                if len > 3200 {
                    let from = rng.below(len - 3200);
                    let to = rng.below(len - 3200);
                    let chunk = bytes[from..from + 3200].to_vec();
                    bytes[to..to + 3200].copy_from_slice(&chunk);
                }
            }
        }
    }
}

#[test]
fn random_mutations_of_the_fixtures_never_panic_or_hang() {
    let seeds = seeds();
    let dir = std::env::temp_dir().join(format!("seisgpu-segy-mut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let start = Instant::now();
    let mut slowest = Duration::ZERO;
    for k in 0..3000 {
        let (seed, ext) = &seeds[k % seeds.len()];
        let mut b = seed.clone();
        mutate(&mut b, &mut rng);
        let p = dir.join(format!("m.{ext}"));
        std::fs::write(&p, &b).unwrap();
        let t = Instant::now();
        let r = std::panic::catch_unwind(|| {
            exercise_reader(&p, None);
            exercise_reader(&p, Some(FileFormat::Su));
        });
        if r.is_err() {
            let keep = dir.join(format!("panic-{k}.{ext}"));
            std::fs::write(&keep, &b).unwrap();
            panic!("mutation {k} panicked; the file is {}", keep.display());
        }
        slowest = slowest.max(t.elapsed());
    }
    assert!(slowest < Duration::from_secs(2), "one file took {slowest:?}");
    assert!(start.elapsed() < Duration::from_secs(120), "{:?}", start.elapsed());
}

/// Writes the seed files into fuzz/corpus/segy_reader/ for the cargo-fuzz target (run by
/// scripts/fuzz.sh: `cargo test -p seisgpu-host --lib write_fuzz_seed_corpus -- --ignored`).
#[test]
#[ignore = "writes into the source tree; run by scripts/fuzz.sh"]
fn write_fuzz_seed_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/segy_reader");
    std::fs::create_dir_all(&dir).unwrap();
    for (k, (bytes, ext)) in seeds().iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{k}.{ext}")), bytes).unwrap();
    }
}
