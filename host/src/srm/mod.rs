//! srm: see its issue. (placeholder)
