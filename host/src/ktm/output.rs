//! Image and trace output. The image is written as .npy (float32, shape [classes, nx, ny, ntau],
//! tau fastest) through `AtomicFile`; the SEG-Y writer (one trace per image column and class, the
//! grid and two-way image time in the headers) plugs in at [`write_image`] once it lands in main.

use std::path::Path;

use anyhow::Context;
use npyz::WriterBuilder;

use super::Image;
use crate::io::AtomicFile;
use crate::traces::TraceSet;

/// Writes `data` with `shape` as a float32 .npy through a temporary file.
pub fn write_npy(path: &Path, shape: &[u64], data: &[f32]) -> anyhow::Result<()> {
    let mut f = AtomicFile::create(path)?;
    {
        let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(&mut f).begin_nd()?;
        w.extend(data.iter().copied())?;
        w.finish()?;
    }
    f.commit().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The migrated image, by extension: `.npy` (float32, shape [classes, nx, ny, ntau]) or SEG-Y
/// (`.sgy`/`.segy`: one trace per offset class and image column, class-major; source = receiver =
/// the bin centre, inline = ix + 1, crossline = iy + 1, CDP = the column's running number, offset =
/// the class centre; the time axis is TWO-WAY vertical time, said in the textual header).
pub fn write_image(path: &Path, img: &Image) -> anyhow::Result<()> {
    let g = img.grid;
    match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
        Some("npy") => write_npy(path, &[img.classes as u64, g.nx as u64, g.ny as u64, g.ntau as u64], &img.data),
        Some("sgy") | Some("segy") => {
            let (headers, opts) = segy_layout(img);
            let set = TraceSet { headers, data: img.data.clone(), ns: g.ntau, dt: g.dtau, t0: g.tau0 };
            crate::io::segy::write_segy(path, &set, &opts).with_context(|| format!("writing {}", path.display()))
        }
        _ => anyhow::bail!("{}: unknown image format (use .npy, .sgy or .segy)", path.display()),
    }
}

/// The SEG-Y image's trace headers (one per offset class and image column, class-major, as the
/// image's data) and write options (IEEE floats, the textual header saying what the traces are,
/// a coordinate scalar chosen over every header, so any block of traces encodes as in the file).
pub fn segy_layout(img: &Image) -> (Vec<crate::traces::TraceHeader>, crate::io::segy::WriteOptions) {
    let g = img.grid;
    let mut headers = Vec::with_capacity(img.classes * g.ncols());
    for c in 0..img.classes {
        for ix in 0..g.nx {
            for iy in 0..g.ny {
                let (x, y) = (g.x(ix), g.y(iy));
                headers.push(crate::traces::TraceHeader {
                    sx: x, sy: y, gx: x, gy: y,
                    offset: img.class_offsets.get(c).copied().unwrap_or(0.0),
                    cdp: (ix * g.ny + iy) as i32 + 1,
                    inline: ix as i32 + 1,
                    crossline: iy as i32 + 1,
                    ..Default::default()
                });
            }
        }
    }
    let text = format!(
        "seisgpu ktm: Kirchhoff prestack time migration image\n\
         time axis: TWO-WAY vertical time, {} samples at {} ms from {} ms\n\
         grid: {} inlines (x0 {} m, dx {} m) x {} crosslines (y0 {} m, dy {} m)\n\
         {} offset class(es), class-major; bin centre in source and group X/Y",
        g.ntau, g.dtau * 1e3, g.tau0 * 1e3, g.nx, g.x0, g.dx, g.ny, g.y0, g.dy, img.classes);
    let scalar = crate::io::segy::header::choose_scalar(headers.iter().flat_map(|h| [h.sx, h.sy, h.gx, h.gy]));
    let opts = crate::io::segy::WriteOptions {
        format: crate::io::segy::SampleFormat::IeeeFloat,
        text: Some(text),
        coordinate_scalar: scalar.map_or(crate::io::segy::CoordinateScalar::Auto, crate::io::segy::CoordinateScalar::Fixed),
        ..Default::default()
    };
    (headers, opts)
}

/// Modelled traces as .npy (shape [traces, samples]).
pub fn write_traces(path: &Path, t: &TraceSet) -> anyhow::Result<()> {
    write_npy(path, &[t.len() as u64, t.ns as u64], &t.data)
}

/// A float32 .npy: (shape, data).
pub fn read_npy(path: &Path) -> anyhow::Result<(Vec<usize>, Vec<f32>)> { crate::io::npy::read_f32(path) }

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn npy_round_trip() {
        let dir = std::env::temp_dir().join(format!("seisgpu-ktm-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        let data: Vec<f32> = (0..24).map(|i| i as f32 * 0.5).collect();
        write_npy(&p, &[2, 3, 4], &data).unwrap();
        let (shape, back) = read_npy(&p).unwrap();
        assert_eq!(shape, vec![2, 3, 4]);
        assert_eq!(back, data);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
