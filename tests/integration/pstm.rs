//! pstm integration tests (placeholder).
