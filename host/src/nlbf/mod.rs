//! nlbf: see its issue. (placeholder)
