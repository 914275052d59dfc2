//! Coefficient files (in progress).
