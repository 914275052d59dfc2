//! Denoising, compression, interpolation (in progress).
