//! Colour maps for variable-density plots. Amplitudes are mapped to u in [0, 1]: for signed data
//! -clip..+clip (u = 0.5 at zero), for non-negative data (semblance, energy) 0..clip.

/// A colour map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colormap {
    /// Blue (negative) - white (zero) - red (positive); white to red for non-negative data.
    Seismic,
    /// Grey levels, positive black (Seismic Unix's suximage and Madagascar's grey): white to black.
    Gray,
    /// Perceptually uniform dark blue - green - yellow (for non-negative data such as semblance).
    Viridis,
}

impl std::str::FromStr for Colormap {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "seismic" | "rwb" => Ok(Colormap::Seismic),
            "gray" | "grey" => Ok(Colormap::Gray),
            "viridis" => Ok(Colormap::Viridis),
            o => Err(format!("unknown colour map `{o}` (expected seismic, gray or viridis)")),
        }
    }
}

/// Viridis at nine evenly spaced points (matplotlib's table, rounded).
const VIRIDIS: [[u8; 3]; 9] = [
    [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141], [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];

impl Colormap {
    /// The default for data of this sign: seismic for signed, viridis for non-negative.
    pub fn default_for(signed: bool) -> Self { if signed { Colormap::Seismic } else { Colormap::Viridis } }

    /// The colour of u in [0, 1] (clamped). `signed`: u = 0.5 is zero amplitude.
    pub fn rgb(self, u: f32, signed: bool) -> [u8; 3] {
        let u = if u.is_nan() { 0.5 } else { u.clamp(0.0, 1.0) };
        match self {
            Colormap::Seismic => {
                // v in [-1, 1]: -1 blue, 0 white, +1 red.
                let v = if signed { 2.0 * u - 1.0 } else { u };
                let w = (255.0 * (1.0 - v.abs())).round() as u8;
                if v >= 0.0 { [255, w, w] } else { [w, w, 255] }
            }
            Colormap::Gray => {
                let g = (255.0 * (1.0 - u)).round() as u8;
                [g, g, g]
            }
            Colormap::Viridis => {
                let x = u * (VIRIDIS.len() - 1) as f32;
                let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
                let f = x - i as f32;
                let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
                std::array::from_fn(|c| (a[c] as f32 + f * (b[c] as f32 - a[c] as f32)).round() as u8)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_and_middle() {
        assert_eq!(Colormap::Seismic.rgb(0.5, true), [255, 255, 255]);
        assert_eq!(Colormap::Seismic.rgb(1.0, true), [255, 0, 0]);
        assert_eq!(Colormap::Seismic.rgb(0.0, true), [0, 0, 255]);
        assert_eq!(Colormap::Seismic.rgb(0.0, false), [255, 255, 255]);
        assert_eq!(Colormap::Gray.rgb(1.0, true), [0, 0, 0]);
        assert_eq!(Colormap::Viridis.rgb(0.0, false), VIRIDIS[0]);
        assert_eq!(Colormap::Viridis.rgb(1.0, false), VIRIDIS[8]);
        assert!("jet".parse::<Colormap>().is_err());
    }
}
