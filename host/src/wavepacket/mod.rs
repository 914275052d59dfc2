//! wavepacket: see its issue. (placeholder)
