//! wavepacket device code and shared math. (placeholder)
