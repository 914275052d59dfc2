//! EBCDIC <-> 8-bit text for SEG-Y textual headers, and the detection of which of EBCDIC and
//! ASCII a textual header is in.
//!
//! The table is the `dd conv=ascii` one that segyio and Seismic Unix use (read out of segyio 1.9
//! byte by byte), not IBM code page 037: the two agree on letters, digits and most punctuation
//! but differ on `! [ ] ^ |` and on the upper half, and matching segyio keeps textual headers
//! bit-identical between the two programs. It is a bijection of the 256 byte values, so
//! decode-then-encode gives back the same bytes.

/// EBCDIC byte -> 8-bit character (ASCII in the lower half).
pub const EBCDIC_TO_ASCII: [u8; 256] = [
    0x00, 0x01, 0x02, 0x03, 0x9C, 0x09, 0x86, 0x7F, 0x97, 0x8D, 0x8E, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F,
    0x10, 0x11, 0x12, 0x13, 0x9D, 0x85, 0x08, 0x87, 0x18, 0x19, 0x92, 0x8F, 0x1C, 0x1D, 0x1E, 0x1F,
    0x80, 0x81, 0x82, 0x83, 0x84, 0x0A, 0x17, 0x1B, 0x88, 0x89, 0x8A, 0x8B, 0x8C, 0x05, 0x06, 0x07,
    0x90, 0x91, 0x16, 0x93, 0x94, 0x95, 0x96, 0x04, 0x98, 0x99, 0x9A, 0x9B, 0x14, 0x15, 0x9E, 0x1A,
    0x20, 0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8, 0x5B, 0x2E, 0x3C, 0x28, 0x2B, 0x21,
    0x26, 0xA9, 0xAA, 0xAB, 0xAC, 0xAD, 0xAE, 0xAF, 0xB0, 0xB1, 0x5D, 0x24, 0x2A, 0x29, 0x3B, 0x5E,
    0x2D, 0x2F, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7, 0xB8, 0xB9, 0x7C, 0x2C, 0x25, 0x5F, 0x3E, 0x3F,
    0xBA, 0xBB, 0xBC, 0xBD, 0xBE, 0xBF, 0xC0, 0xC1, 0xC2, 0x60, 0x3A, 0x23, 0x40, 0x27, 0x3D, 0x22,
    0xC3, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9,
    0xCA, 0x6A, 0x6B, 0x6C, 0x6D, 0x6E, 0x6F, 0x70, 0x71, 0x72, 0xCB, 0xCC, 0xCD, 0xCE, 0xCF, 0xD0,
    0xD1, 0x7E, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7A, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7,
    0xD8, 0xD9, 0xDA, 0xDB, 0xDC, 0xDD, 0xDE, 0xDF, 0xE0, 0xE1, 0xE2, 0xE3, 0xE4, 0xE5, 0xE6, 0xE7,
    0x7B, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0xE8, 0xE9, 0xEA, 0xEB, 0xEC, 0xED,
    0x7D, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F, 0x50, 0x51, 0x52, 0xEE, 0xEF, 0xF0, 0xF1, 0xF2, 0xF3,
    0x5C, 0x9F, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5A, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8, 0xF9,
    0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF,
];

/// 8-bit character -> EBCDIC byte (the inverse of [`EBCDIC_TO_ASCII`]).
pub const ASCII_TO_EBCDIC: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut e = 0;
    while e < 256 {
        t[EBCDIC_TO_ASCII[e] as usize] = e as u8;
        e += 1;
    }
    t
};

/// How a textual header is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum TextEncoding {
    /// EBCDIC (code page 037): what SEG-Y rev 0/1 require and most files use.
    #[default]
    Ebcdic,
    /// ASCII: allowed by SEG-Y rev 1 and later.
    Ascii,
}

/// Decides the encoding of a textual header by counting the bytes that are letters, digits or
/// spaces in each encoding: an EBCDIC header's spaces (0x40) and letters (0xC1..0xE9) are not ASCII
/// letters or spaces, and an ASCII header's spaces (0x20) are EBCDIC control codes.
pub fn detect(text: &[u8]) -> TextEncoding {
    let plain = |c: u8| c.is_ascii_alphanumeric() || c == b' ';
    let ascii = text.iter().filter(|&&c| plain(c)).count();
    let ebcdic = text.iter().filter(|&&c| plain(EBCDIC_TO_ASCII[c as usize])).count();
    if ebcdic > ascii { TextEncoding::Ebcdic } else { TextEncoding::Ascii }
}

/// Decodes a textual header (or extended textual header) to a String (each byte one char, U+0000..U+00FF).
pub fn decode(text: &[u8], encoding: TextEncoding) -> String {
    match encoding {
        TextEncoding::Ebcdic => text.iter().map(|&c| EBCDIC_TO_ASCII[c as usize] as char).collect(),
        TextEncoding::Ascii => text.iter().map(|&c| c as char).collect(),
    }
}

/// Encodes `text` into exactly `out.len()` bytes: characters above U+00FF become `?`, the rest
/// is padded with spaces.
pub fn encode(text: &str, encoding: TextEncoding, out: &mut [u8]) {
    let mut chars = text.chars();
    for o in out.iter_mut() {
        let c = match chars.next() {
            Some(c) if (c as u32) < 256 => c as u32 as u8,
            Some(_) => b'?',
            None => b' ',
        };
        *o = match encoding {
            TextEncoding::Ebcdic => ASCII_TO_EBCDIC[c as usize],
            TextEncoding::Ascii => c,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn table_is_a_bijection_and_matches_known_codes() {
        for e in 0..256 {
            assert_eq!(ASCII_TO_EBCDIC[EBCDIC_TO_ASCII[e] as usize] as usize, e);
        }
        assert_eq!(ASCII_TO_EBCDIC[b'C' as usize], 0xC3);
        assert_eq!(ASCII_TO_EBCDIC[b' ' as usize], 0x40);
        assert_eq!(ASCII_TO_EBCDIC[b'0' as usize], 0xF0);
        assert_eq!(ASCII_TO_EBCDIC[b'a' as usize], 0x81);
        // Where segyio's table differs from code page 037.
        assert_eq!(ASCII_TO_EBCDIC[b'!' as usize], 0x4F);
        assert_eq!(ASCII_TO_EBCDIC[b'[' as usize], 0x4A);
        assert_eq!(ASCII_TO_EBCDIC[b'|' as usize], 0x6A);
    }
    #[test]
    fn detects_both_encodings() {
        let card = "C 1 CLIENT SEISGPU   LINE 42   AREA NORTH SEA                                   ";
        let mut buf = vec![0u8; 3200];
        for enc in [TextEncoding::Ebcdic, TextEncoding::Ascii] {
            encode(&card.repeat(40), enc, &mut buf);
            assert_eq!(detect(&buf), enc);
            assert_eq!(decode(&buf, enc), card.repeat(40));
        }
        // An all-zero header (segyio writes one when given no text) reads as ASCII NULs.
        assert_eq!(detect(&[0u8; 3200]), TextEncoding::Ascii);
    }
}
