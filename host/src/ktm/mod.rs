//! ktm: see its issue. (placeholder)
