//! Data in and out: SEG-Y and Seismic Unix (with trace selection: [`input`]), .npy, the result
//! writers of every command ([`output`]), and the write-to-temporary-then-rename rule for every output.

pub mod atomic;
pub mod cube;
pub mod input;
pub mod npy;
pub mod output;
pub mod segy;
pub mod select;
pub mod sidecar;
pub mod su;

pub use atomic::AtomicFile;
