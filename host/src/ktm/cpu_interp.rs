//! CPU reference of the interpolated traveltimes (`--traveltime static8|dynamic`): the read
//! positions (and anti-alias lengths) of a whole column from its nodes, by the math the kernels
//! use (`gpu_kernels::ktm::interp`), so positions agree with the GPU bit for bit. The reads and
//! corrections then run as in the exact path (`super::cpu`).

use gpu_kernels::ktm::interp::{dynamic_steps, node, node_sample, quarter_step, quarter_value, static8_step, Node, SEG, STATIC8_STEPS,
    STEP, TT_DYNAMIC};
use gpu_kernels::ktm::{KtmConsts, PairGeom, SampleGeom};

use super::Plan;

/// Node sample geometry of one image column: samples 0, 8, .., 32 * segments (past the image:
/// the last velocity), and each segment's two dynamic midpoints (offsets 12 and 20).
pub struct ColumnNodes {
    nodes: Vec<SampleGeom>,
    mids: Vec<[SampleGeom; 2]>,
}

/// The nodes of column `col` (any column for v_rms(tau)).
pub fn column_nodes(plan: &Plan, col: usize) -> ColumnNodes {
    let c = &plan.consts;
    let ntau = plan.grid.ntau;
    let vcol = if c.vel_stride == 0 { 0 } else { col };
    let v = &plan.vel[vcol * ntau..(vcol + 1) * ntau];
    let at = |z: u32| node_sample(c, z, v[(z as usize).min(ntau - 1)]);
    let segs = ntau.div_ceil(SEG as usize) as u32;
    ColumnNodes {
        nodes: (0..=4 * segs).map(|i| at(i * STEP)).collect(),
        mids: (0..segs).map(|g| [at(g * SEG + 12), at(g * SEG + 20)]).collect(),
    }
}

/// Read positions `s` and (with `AA`) anti-alias half-lengths `m` of the pair `pg` down one
/// column (`s.len()` image samples), interpolated as `c.tt_mode` says.
pub fn positions<const AA: bool>(c: &KtmConsts, pg: &PairGeom, cn: &ColumnNodes, s: &mut [f32], m: &mut [f32]) {
    let ntau = s.len();
    for (g, mids) in cn.mids.iter().enumerate() {
        let nd: [Node; 5] = std::array::from_fn(|i| node::<AA>(c, pg, &cn.nodes[4 * g + i]));
        let ns = nd.map(|v| v.s);
        let ms = nd.map(|v| v.m);
        let dynamic = c.tt_mode == TT_DYNAMIC;
        let steps = if dynamic {
            dynamic_steps(&ns, node::<false>(c, pg, &mids[0]).s, node::<false>(c, pg, &mids[1]).s, c.tt_tol)
        } else {
            STATIC8_STEPS
        };
        for q in 0..4u32 {
            let z = g * SEG as usize + (q * STEP) as usize;
            if z >= ntau {
                break;
            }
            let step = |n: &[f32; 5]| if dynamic { quarter_step(n, q, steps[q as usize]) } else { static8_step(n, q) };
            let (st, mt) = (step(&ns), step(&ms));
            for j in 0..(STEP as usize).min(ntau - z) {
                s[z + j] = quarter_value(&st, j as u32);
                if AA {
                    m[z + j] = quarter_value(&mt, j as u32);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_kernels::ktm::interp::{TT_STATIC8};
    use gpu_kernels::ktm::{contribution, pair_geom, sample_geom};

    /// Static8 positions are the exact ones at every 8th sample and within a small fraction of a
    /// sample between; dynamic ones within the tolerance plus the static error's order.
    #[test]
    fn positions_are_exact_at_nodes_and_close_between() {
        let ntau = 203; // not a multiple of 32: the last segment is partial
        let c = KtmConsts { dt: 0.004, inv_dt: 250.0, s_off: 2.0, tau0: 0.0, dtau: 0.004, ntau: ntau as u32, tt_mode: TT_STATIC8,
            ..Default::default() };
        let v: Vec<f32> = (0..ntau).map(|i| 1800.0 + 3.0 * i as f32).collect();
        let at = |z: u32| node_sample(&c, z, v[(z as usize).min(ntau - 1)]);
        let segs = ntau.div_ceil(32) as u32;
        let cn = ColumnNodes { nodes: (0..=4 * segs).map(|i| at(i * 8)).collect(), mids: (0..segs).map(|g| [at(g * 32 + 12), at(g * 32 + 20)]).collect() };
        let pg = pair_geom(300.0, 100.0, [-900.0, 50.0, 1500.0, 400.0]);
        let exact: Vec<f32> = (0..ntau).map(|it| contribution::<false, false>(&c, &pg, &sample_geom(&c, it as f32 * 0.004, v[it])).s).collect();
        let (mut s, mut m) = (vec![f32::NAN; ntau], vec![f32::NAN; ntau]);
        positions::<false>(&c, &pg, &cn, &mut s, &mut m);
        let mut worst = 0.0f32;
        for it in 0..ntau {
            if it % 8 == 0 {
                assert_eq!(s[it], exact[it], "node {it}");
            }
            worst = worst.max((s[it] - exact[it]).abs());
        }
        assert!(worst < 0.5, "static8 off by {worst} samples");
        let cd = KtmConsts { tt_mode: TT_DYNAMIC, tt_tol: 0.05, ..c };
        positions::<false>(&cd, &pg, &cn, &mut s, &mut m);
        let worst_d = (0..ntau).map(|it| (s[it] - exact[it]).abs()).fold(0.0f32, f32::max);
        assert!(worst_d < 0.5 && s.iter().all(|v| v.is_finite()), "dynamic off by {worst_d} samples");
    }
}
