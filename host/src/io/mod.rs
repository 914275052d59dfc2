//! Data in and out: SEG-Y, Seismic Unix, .npy, the result writers of every command ([`output`]), and the write-to-temporary-then-rename rule for every output.

pub mod atomic;
pub mod cube;
pub mod npy;
pub mod output;
pub mod segy;
pub mod su;

pub use atomic::AtomicFile;
