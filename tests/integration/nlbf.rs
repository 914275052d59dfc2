//! nlbf integration tests (placeholder).
