//! IBM System/360 single-precision float (SEG-Y sample format 1) <-> IEEE 754 binary32.
//!
//! IBM: sign bit, 7-bit base-16 exponent biased by 64, 24-bit fraction F with the radix point
//! before it: value = (-1)^s * F * 2^-24 * 16^(e-64).
//!
//! * IBM -> IEEE is exact for every IBM value inside the f32 range (F has at most 24 significant
//!   bits); the product F * 2^(4(e-64)-24) is formed exactly in f64 and rounded once to f32, so
//!   values below the f32 normal range become correctly rounded subnormals (segyio truncates
//!   those) and values above it become infinities (the reader rejects them).
//! * IEEE -> IBM is exact when the value has an IBM representation (a hex-aligned fraction loses
//!   up to 3 low bits of the f32 significand) and otherwise rounds to nearest, ties to even, so the
//!   error is at most half an IBM unit in the last place. segyio and Seismic Unix truncate (up to
//!   a whole unit); both agree bit for bit on every value that is representable. Every finite f32
//!   fits the IBM exponent range, so there is no overflow or underflow on this side.

/// 2^(4(e-64)-24) for every IBM exponent e: exact powers of two, all inside the f64 range.
const SCALE: [f64; 128] = {
    let mut t = [0.0f64; 128];
    let mut e = 0;
    while e < 128 {
        let p2: i32 = 4 * (e as i32 - 64) - 24; // -280 ..= 228
        // f64 bit pattern of 2^p2 (a normal f64 for this range).
        t[e] = f64::from_bits(((p2 + 1023) as u64) << 52);
        e += 1;
    }
    t
};

/// IBM float bit pattern -> f32 (see the module doc for the rounding of out-of-range values).
#[inline(always)]
pub fn ibm_to_f32(bits: u32) -> f32 {
    let frac = bits & 0x00FF_FFFF;
    let exp = ((bits >> 24) & 0x7F) as usize;
    let mag = (frac as f64 * SCALE[exp]) as f32;
    if bits & 0x8000_0000 != 0 { -mag } else { mag }
}

/// Finite f32 -> IBM float bit pattern, rounded to nearest (ties to even). The caller rejects
/// non-finite values first; for them this returns the largest IBM magnitude with the sign.
#[inline(always)]
pub fn f32_to_ibm(x: f32) -> u32 {
    let bits = x.to_bits();
    let biased = (bits >> 23) & 0xFF;
    if biased == 0 || biased == 0xFF {
        return special_to_ibm(x); // zeros, subnormals, infinities, NaN: rare, kept off the fast path
    }
    // value = (m / 2^24) * 2^p with m the 24-bit significand (top bit set); IBM wants
    // (F / 2^24) * 16^k with 16^k >= 2^p: k = ceil(p / 4), F = m >> (4k - p), rounded.
    let m = (bits & 0x007F_FFFF) | 0x0080_0000;
    let p = biased as i32 - 126;
    let k = (p + 3) >> 2; // arithmetic shift: floor((p + 3) / 4) = ceil(p / 4)
    let shift = (4 * k - p) as u32; // 0..=3
    let kept = m >> shift;
    let rem = m & ((1 << shift) - 1);
    let half = (1u32 << shift) >> 1;
    // Round half to even; with shift = 0 nothing is dropped (half = 0, rem = 0).
    // With shift >= 1, kept < 2^(24-shift), so rounding up never carries out of 24 bits.
    let up = (rem > half) | ((rem == half) & (half != 0) & (kept & 1 == 1));
    (bits & 0x8000_0000) | (((k + 64) as u32) << 24) | (kept + up as u32)
}

/// [`f32_to_ibm`] for zeros, subnormals and non-finite values.
#[cold]
fn special_to_ibm(x: f32) -> u32 {
    let bits = x.to_bits();
    let sign = bits & 0x8000_0000;
    let mut m = bits & 0x007F_FFFF;
    if (bits >> 23) & 0xFF == 0xFF {
        return sign | 0x7FFF_FFFF;
    }
    if m == 0 {
        return sign; // +-0 keeps its sign, as segyio does
    }
    // Subnormal: value = m * 2^-149. Normalise m to 24 bits; then as in the fast path.
    let lz = m.leading_zeros() - 8;
    m <<= lz;
    let p = -149 - lz as i32 + 24;
    let k = (p + 3) >> 2;
    let shift = (4 * k - p) as u32;
    let kept = m >> shift;
    let rem = m & ((1 << shift) - 1);
    let half = (1u32 << shift) >> 1;
    let up = (rem > half) | ((rem == half) & (half != 0) & (kept & 1 == 1));
    sign | (((k + 64) as u32) << 24) | (kept + up as u32)
}

/// Decodes big- or little-endian IBM samples.
pub fn decode(bytes: &[u8], big_endian: bool, out: &mut [f32]) {
    debug_assert_eq!(bytes.len(), out.len() * 4);
    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        let b = [b[0], b[1], b[2], b[3]];
        *o = ibm_to_f32(if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) });
    }
}

/// Encodes finite samples as big- or little-endian IBM floats.
pub fn encode(samples: &[f32], big_endian: bool, out: &mut [u8]) {
    debug_assert_eq!(out.len(), samples.len() * 4);
    for (&x, o) in samples.iter().zip(out.chunks_exact_mut(4)) {
        let v = f32_to_ibm(x);
        o.copy_from_slice(&if big_endian { v.to_be_bytes() } else { v.to_le_bytes() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// segyio's (and Seismic Unix's) truncating encoder, for comparison.
    fn ieee2ibm_truncating(x: f32) -> u32 {
        let mut fr = x.to_bits();
        let sgn = fr >> 31;
        fr <<= 1;
        let mut exp = (fr >> 24) as i32;
        fr <<= 8;
        if exp > 0 {
            fr = (fr >> 1) | 0x8000_0000;
        } else if fr == 0 {
            return sgn << 31;
        }
        exp += 130;
        fr >>= (-exp) & 3;
        exp = (exp + 3) >> 2;
        while fr < 0x1000_0000 {
            exp -= 1;
            fr <<= 4;
        }
        (fr >> 8) | ((exp as u32) << 24) | (sgn << 31)
    }

    #[test]
    fn known_values() {
        // The SEG-Y standard's example: -118.625 = 0xC276A000.
        assert_eq!(f32_to_ibm(-118.625), 0xC276_A000);
        assert_eq!(ibm_to_f32(0xC276_A000), -118.625);
        assert_eq!(f32_to_ibm(1.0), 0x4110_0000);
        assert_eq!(f32_to_ibm(0.0), 0);
        assert_eq!(f32_to_ibm(-0.0), 0x8000_0000);
        assert_eq!(ibm_to_f32(0x4110_0000), 1.0);
        assert_eq!(ibm_to_f32(0x0000_0000), 0.0);
        // Largest IBM value overflows f32; tiny ones round to zero.
        assert_eq!(ibm_to_f32(0x7FFF_FFFF), f32::INFINITY);
        assert_eq!(ibm_to_f32(0x0010_0000), 0.0);
    }

    #[test]
    fn ibm_representable_values_round_trip_exactly_and_match_segyio() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let bits = state as u32;
            let x = f32::from_bits(bits);
            if !x.is_finite() {
                continue;
            }
            let ibm = f32_to_ibm(x);
            let back = ibm_to_f32(ibm);
            // Rounded to nearest: error at most half an IBM ulp (2^-24 relative to 16^k >= |x|).
            if x != 0.0 && x.is_normal() {
                let k = (ibm >> 24) & 0x7F;
                let ulp = 2f64.powi(4 * (k as i32 - 64) - 24);
                assert!(((back as f64) - (x as f64)).abs() <= 0.5 * ulp, "{x:e}: {back:e}");
            }
            // The decoded value is representable, so it re-encodes exactly, as segyio would.
            if back.is_normal() {
                assert_eq!(ibm_to_f32(f32_to_ibm(back)), back);
                assert_eq!(f32_to_ibm(back), ieee2ibm_truncating(back), "{back:e}");
            }
        }
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        // 1 + 2^-23 needs 24 bits after the leading hex digit 1 (3 leading zero bits): the low
        // 3 bits of the f32 significand are dropped; 1 + 2^-23 rounds to 1 (tie below half).
        assert_eq!(f32_to_ibm(1.0 + f32::EPSILON), 0x4110_0000);
        // 1 + 4 * 2^-23 is exactly half of an IBM ulp (2^-20): tie to even -> 1.0.
        assert_eq!(f32_to_ibm(1.0 + 4.0 * f32::EPSILON), 0x4110_0000);
        // 1 + 12 * 2^-23 = 1 + 1.5 ulp: tie to even -> 1 + 2 ulp.
        assert_eq!(f32_to_ibm(1.0 + 12.0 * f32::EPSILON), 0x4110_0002);
        // The largest f32 below 2 rounds up to 2 (0.2 hex * 16).
        assert_eq!(f32_to_ibm(f32::from_bits(2.0f32.to_bits() - 1)), 0x4120_0000);
        // The largest f32 below 16 is representable (all 24 bits in one hex-aligned fraction).
        assert_eq!(f32_to_ibm(f32::from_bits(16.0f32.to_bits() - 1)), 0x41FF_FFFF);
        // Subnormal f32 are encoded exactly.
        let tiny = f32::from_bits(1);
        assert_eq!(ibm_to_f32(f32_to_ibm(tiny)), tiny);
    }
}
