//! pstm: see its issue. (placeholder)
