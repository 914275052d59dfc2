//! What the reader can be told about a file that its own headers get wrong: the sample count and
//! interval, the format (SEG-Y or Seismic Unix), and where non-standard files keep their header
//! fields (as segyio's `iline=` / `xline=` arguments).

use std::str::FromStr;

/// The two layouts the reader takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum FileFormat {
    /// SEG-Y: 3200-byte textual and 400-byte binary header, then traces.
    #[default]
    Segy,
    /// Seismic Unix: SEG-Y trace headers and IEEE float samples in the writer's byte order, no
    /// file header.
    Su,
}

/// Options of [`SegyReader::open_with`](super::SegyReader::open_with). The default reads the
/// file as its headers describe it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReaderOptions {
    /// Samples per trace, overriding the binary and trace headers.
    pub samples: Option<usize>,
    /// Sample interval (s), overriding the binary and trace headers.
    pub dt: Option<f32>,
    /// Where the geometry fields are in each trace header.
    pub bytes: HeaderBytes,
    /// The layout; `None` decides by the extension (`.su`) and by the content.
    pub format: Option<FileFormat>,
}

/// The 1-based byte of each 4-byte integer geometry field in the 240-byte trace header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct HeaderBytes {
    pub inline: usize,
    pub crossline: usize,
    pub cdp: usize,
    pub offset: usize,
    pub source_x: usize,
    pub source_y: usize,
    pub group_x: usize,
    pub group_y: usize,
    pub cdp_x: usize,
    pub cdp_y: usize,
}

impl Default for HeaderBytes {
    /// The SEG-Y rev 2 bytes.
    fn default() -> Self {
        HeaderBytes { inline: 189, crossline: 193, cdp: 21, offset: 37, source_x: 73, source_y: 77, group_x: 81, group_y: 85,
            cdp_x: 181, cdp_y: 185 }
    }
}

/// A field of [`HeaderBytes`].
type Field = fn(&mut HeaderBytes) -> &mut usize;

/// The keys of `--bytes`, with their aliases (segyio's `iline` / `xline`, Seismic Unix's names).
const KEYS: &[(&[&str], Field)] = &[
    (&["inline", "iline", "il"], |b| &mut b.inline),
    (&["crossline", "xline", "xl"], |b| &mut b.crossline),
    (&["cdp", "cmp"], |b| &mut b.cdp),
    (&["offset"], |b| &mut b.offset),
    (&["sx", "source_x"], |b| &mut b.source_x),
    (&["sy", "source_y"], |b| &mut b.source_y),
    (&["gx", "group_x"], |b| &mut b.group_x),
    (&["gy", "group_y"], |b| &mut b.group_y),
    (&["cdpx", "cdp_x"], |b| &mut b.cdp_x),
    (&["cdpy", "cdp_y"], |b| &mut b.cdp_y),
];

impl HeaderBytes {
    /// Checks that every field lies inside the 240-byte header (a 4-byte integer at byte b takes
    /// bytes b..b+3).
    pub fn validate(&self) -> Result<(), String> {
        let mut b = *self;
        for (names, field) in KEYS {
            let v = *field(&mut b);
            if !(1..=237).contains(&v) {
                return Err(format!("header byte {v} for {} is outside the trace header (a 4-byte field starts at byte 1..237)", names[0]));
            }
        }
        Ok(())
    }
}

/// Parses `key=byte[,key=byte...]` (keys: inline, crossline, cdp, offset, sx, sy, gx, gy, cdpx,
/// cdpy) over the standard bytes.
impl FromStr for HeaderBytes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut b = HeaderBytes::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| format!("`{part}`: expected key=byte, e.g. inline=9"))?;
            let key = key.trim().to_ascii_lowercase();
            let field = KEYS.iter().find(|(names, _)| names.contains(&key.as_str())).map(|k| k.1).ok_or_else(|| {
                format!("`{part}`: unknown header key `{key}` (expected inline, crossline, cdp, offset, sx, sy, gx, gy, cdpx or cdpy)")
            })?;
            let v: usize = value.trim().parse().map_err(|_| format!("`{part}`: `{}` is not a byte number (1..237)", value.trim()))?;
            *field(&mut b) = v;
        }
        b.validate()?;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn header_bytes_parse() {
        let b: HeaderBytes = "iline=9, xline=13,cdpx=73".parse().unwrap();
        assert_eq!((b.inline, b.crossline, b.cdp_x, b.cdp), (9, 13, 73, 21));
        assert!("inline=239".parse::<HeaderBytes>().unwrap_err().contains("239"));
        assert!("depth=5".parse::<HeaderBytes>().unwrap_err().contains("unknown header key `depth`"));
        assert!("inline".parse::<HeaderBytes>().unwrap_err().contains("key=byte"));
        assert!("inline=x".parse::<HeaderBytes>().unwrap_err().contains("`x`"));
    }
}
