//! nlbf device code and shared math. (placeholder)
