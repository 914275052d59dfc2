//! srm device code and shared math. (placeholder)
