//! srm integration tests (placeholder).
