//! Fragments (in progress).
