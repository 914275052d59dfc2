//! Image and trace output: the image as .npy (float32, shape [classes, nx, ny, ntau], tau fastest),
//! SEG-Y or SU (one trace per image column and class, the grid and two-way image time in the
//! headers), through [`crate::io::output`].

use std::path::Path;

use super::Image;
use crate::io::output::{write_grid, Grid, GridImage, SampleAxis, TraceOrder};
use crate::traces::TraceSet;

/// The image grid as the output module's [`Grid`]: class-major, then x (inline = ix + 1), then y
/// (crossline = iy + 1), bin centres from the image grid, offset = the class centre.
pub fn grid(img: &Image) -> Grid {
    let g = img.grid;
    Grid { nx: g.nx, ny: g.ny, x0: g.x0, y0: g.y0, dx: g.dx, dy: g.dy,
        class_offsets: (0..img.classes).map(|c| img.class_offsets.get(c).copied().unwrap_or(0.0)).collect(),
        order: TraceOrder::ClassXY, inline_along_y: false }
}

fn grid_image<'a>(img: &'a Image, grid: &'a Grid) -> GridImage<'a> {
    let g = img.grid;
    GridImage {
        title: "seisgpu ktm: Kirchhoff migration image, TWO-WAY vertical time".into(),
        grid, axis: SampleAxis::Time { n: g.ntau, step: g.dtau, first: g.tau0 }, data: &img.data,
        npy_shape: vec![img.classes, g.nx, g.ny, g.ntau],
    }
}

/// The migrated image, by extension: `.npy` (float32, shape [classes, nx, ny, ntau]), SEG-Y
/// (`.sgy`/`.segy`) or SU (`.su`): one trace per offset class and image column, class-major
/// ([`grid`]; the time axis is TWO-WAY vertical time, said in the textual header).
pub fn write_image(path: &Path, img: &Image) -> anyhow::Result<()> {
    let grid = grid(img);
    write_grid(path, &grid_image(img, &grid))
}

/// The SEG-Y image's trace headers (one per offset class and image column, class-major, as the
/// image's data) and write options (IEEE floats, the textual header saying what the traces are,
/// a coordinate scalar chosen over every header, so any block of traces encodes as in the file).
pub fn segy_layout(img: &Image) -> (Vec<crate::traces::TraceHeader>, crate::io::segy::WriteOptions) {
    let grid = grid(img);
    let (headers, opts, _, _) = grid_image(img, &grid).segy_layout();
    (headers, opts)
}

/// Modelled traces in the input's geometry: SEG-Y or SU with its headers, or .npy (shape
/// [traces, samples]).
pub fn write_traces(path: &Path, t: &TraceSet) -> anyhow::Result<()> {
    crate::io::output::write_traces(path, t, "seisgpu ktm model: traces modelled from an image (Kirchhoff adjoint)")
}
