//! The host fold on the machine at hand (`--ignored --nocapture`): whole boxes against
//! 32-plane slabs, the global pool against smaller ones, passes back to back and with the
//! pool gone idle between them, and (with a GPU) from write-combined and cached page-locked
//! buffers.
use super::*;

fn passes(t: &Tiling, vol: &mut [f32], parts: &[&[f32]], slab: usize, gap: bool) -> (f64, usize) {
    let mut busy = 0.0;
    let mut n = 0;
    for (b, p) in parts.iter().enumerate() {
        let e0 = t.cube_box(b).extent[0];
        for r in super::super::gpu::slabs(e0, slab) {
            if gap {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let t0 = std::time::Instant::now();
            t.fold_rows(vol, &[FoldRows { b, partial: p, set_fresh: false, rows: r, face_folded: false }]).unwrap();
            busy += t0.elapsed().as_secs_f64();
            n += 1;
        }
    }
    (busy, n)
}

/// The tail of 480^3 on 4 GPUs with the faces on the devices: the last x0 row's four boxes
/// arrive together and the host adds only the x1 rows and x2 samples they share, 32-plane
/// slab by slab, the four boxes' slabs in one pass (as the ordered fold takes them).
#[test]
#[ignore]
fn fold_speed_480_tail() {
    let t = Tiling::new([480, 480, 480], 256, 32).unwrap();
    let mut vol = vec![1.0f32; 480 * 480 * 480];
    let last: Vec<usize> = (t.box_count() / 2..t.box_count()).collect();
    let owned: Vec<Vec<f32>> = last.iter().map(|&b| vec![0.5f32; t.cube_box(b).extent.iter().product()]).collect();
    let shared: usize = last.iter().map(|&b| t.cube_box(b).face_folded().covered_blocks().iter()
        .map(|(_, e)| e.iter().product::<usize>()).sum::<usize>()).sum();
    let cores = rayon::current_num_threads();
    println!("{shared} shared samples in the last row's {} boxes (faces on the devices)", last.len());
    for threads in [1usize, 2, 4, 8, 16, 32].into_iter().filter(|&n| n <= cores) {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t0 = std::time::Instant::now();
            for r in super::super::gpu::slabs(256, 32) {
                let items: Vec<FoldRows> = last.iter().zip(&owned).map(|(&b, p)| FoldRows { b, partial: p, set_fresh: false,
                    rows: r.clone(), face_folded: true }).collect();
                pool.install(|| t.fold_rows(&mut vol, &items)).unwrap();
            }
            best = best.min(t0.elapsed().as_secs_f64());
        }
        println!("pool {threads:>2}: {:6.2} ms, {:5.2} G samples/s, {:5.2} ns a sample a thread", best * 1e3,
            shared as f64 / best / 1e9, best * 1e9 * threads as f64 / shared as f64);
    }
}

#[test]
#[ignore]
fn fold_speed_480() {
    let t = Tiling::new([480, 480, 480], 256, 32).unwrap();
    let mut vol = vec![1.0f32; 480 * 480 * 480];
    let owned: Vec<Vec<f32>> = (0..t.box_count()).map(|b| vec![0.5f32; t.cube_box(b).extent.iter().product()]).collect();
    let covered: usize = (0..t.box_count()).map(|b| t.cube_box(b).covered_blocks().iter().map(|(_, e)| e.iter().product::<usize>()).sum::<usize>()).sum();
    let gpu = crate::runtime::context::Gpu::open(0).ok();
    let mut kinds: Vec<(&str, Vec<HostSamples>)> = vec![("pageable", owned.iter().map(|v| HostSamples::Pageable(v.clone())).collect())];
    if let Some(g) = &gpu {
        for (name, wc) in [("write-combined", true), ("cached page-locked", false)] {
            let bufs = owned.iter().map(|v| {
                let mut b = if wc { crate::runtime::memory::PinnedBuf::write_combined(g, v.len()) } else { crate::runtime::memory::PinnedBuf::new(g, v.len()) }.unwrap();
                b.as_mut_slice().unwrap().copy_from_slice(v);
                HostSamples::PageLocked(b)
            }).collect();
            kinds.push((name, bufs));
        }
    }
    println!("{covered} covered samples (480^3, 8 boxes of 256^3), {} threads", rayon::current_num_threads());
    for (name, bufs) in &kinds {
        let parts: Vec<&[f32]> = bufs.iter().map(|b| b.as_slice().unwrap()).collect();
        for threads in [0usize, 32, 16, 8] {
            let pool = (threads > 0).then(|| rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap());
            for (slab, gap) in [(256, false), (32, false), (32, true)] {
                let mut best = f64::MAX;
                let mut count = 0;
                for _ in 0..3 {
                    let (s, n) = match &pool {
                        Some(p) => p.install(|| passes(&t, &mut vol, &parts, slab, gap)),
                        None => passes(&t, &mut vol, &parts, slab, gap),
                    };
                    best = best.min(s);
                    count = n;
                }
                println!("{name:>20}, pool {:>2}, {count:>2} passes{}: {:6.2} ms, {:5.2} G samples/s, {:4.0} us a pass",
                    if threads == 0 { rayon::current_num_threads() } else { threads }, if gap { " 1 ms apart" } else { "" },
                    best * 1e3, covered as f64 / best / 1e9, best * 1e6 / count as f64);
            }
        }
    }
}
