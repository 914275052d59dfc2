//! Interpolation shared by CPU and GPU code.

/// Linear interpolation of `trace` at fractional sample `s` (0 = first sample). Samples outside
/// `[0, n-1]` read as zero, and so do the outer halves of the edge intervals: a shifted sample that
/// falls outside the record contributes nothing.
#[inline(always)]
pub fn lerp_trace(trace: &[f32], s: f32) -> f32 {
    let n = trace.len();
    if !(s >= 0.0) || s > (n - 1) as f32 {
        return 0.0;
    }
    let i = s as usize; // s >= 0, so truncation is floor
    let f = s - i as f32;
    if i + 1 < n {
        trace[i] + f * (trace[i + 1] - trace[i])
    } else {
        trace[i]
    }
}

/// Same as [`lerp_trace`] on a raw pointer (kernels): `p` points at `n` samples.
///
/// # Safety
/// `p` must be valid for `n` reads.
#[inline(always)]
pub unsafe fn lerp_trace_ptr(p: *const f32, n: u32, s: f32) -> f32 {
    if !(s >= 0.0) || s > (n - 1) as f32 {
        return 0.0;
    }
    let i = s as u32;
    let f = s - i as f32;
    unsafe {
        let a = *p.add(i as usize);
        if i + 1 < n { a + f * (*p.add(i as usize + 1) - a) } else { a }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn lerp_inside_and_outside() {
        let t = [1.0, 3.0, 5.0];
        assert_eq!(lerp_trace(&t, 0.5), 2.0);
        assert_eq!(lerp_trace(&t, 2.0), 5.0);
        assert_eq!(lerp_trace(&t, -0.1), 0.0);
        assert_eq!(lerp_trace(&t, 2.1), 0.0);
        assert_eq!(lerp_trace(&t, f32::NAN), 0.0);
        assert_eq!(unsafe { lerp_trace_ptr(t.as_ptr(), 3, 1.25) }, 3.5);
    }
}
