//! ktm device code and shared math. (placeholder)
