//! PNG plots of sections and gathers. (placeholder)
