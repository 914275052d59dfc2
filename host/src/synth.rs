//! Synthetic data with fixed seeds. (placeholder)
