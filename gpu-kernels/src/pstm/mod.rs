//! pstm device code and shared math. (placeholder)
