//! Device ceilings measured once per benchmark run. (placeholder)
