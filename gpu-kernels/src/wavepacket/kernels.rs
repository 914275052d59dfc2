//! Wave-packet kernels (nvptx only).
