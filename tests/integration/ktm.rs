//! ktm integration tests (placeholder).
