//! Data in and out: SEG-Y, .npy, and the write-to-temporary-then-rename rule for every output.

pub mod atomic;
pub mod cube;
pub mod npy;
pub mod segy;

pub use atomic::AtomicFile;
