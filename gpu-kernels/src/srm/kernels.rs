//! srm kernels (see mod.rs for the math).

use crate::device::*;
use super::*;

/// image[i] += sum over planes of Re(S'_p R_p)[i].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn srm_image(nxy: u32, planes: u32, st: Stencil, s: *const f32, r: *const f32, image: *mut f32) {
    let i = global_x();
    if i < nxy {
        let mut acc = 0.0f32;
        for p in 0..planes {
            let k = 2 * (p * nxy + i) as usize;
            unsafe { acc += image_term((*s.add(k), *s.add(k + 1)), (*r.add(k), *r.add(k + 1))) * st.c; }
        }
        unsafe { *image.add(i as usize) += acc };
    }
}
