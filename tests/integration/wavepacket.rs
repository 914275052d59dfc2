//! wavepacket integration tests (placeholder).
