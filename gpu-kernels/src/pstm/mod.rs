//! PSTM traveltimes (paper 5): the traveltime math every migration kernel uses, and the static
//! 8-point / dynamic interpolation kernels. Owned by the PSTM traveltime issue; the Kirchhoff
//! engine (`ktm`) calls [`traveltime::dsr_two_way`] for exact traveltimes.

pub mod traveltime;
