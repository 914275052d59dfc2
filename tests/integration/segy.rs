//! segy integration tests (placeholder).
