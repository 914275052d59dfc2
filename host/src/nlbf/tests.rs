//! Tests of the NLBF setup, apertures and search on generated gathers.

use super::*;
use super::apertures::{build_apertures, shift_bounds};
use super::setup::min_max;
use crate::synth::geometry;

/// The paper's 2D search (one definition: `synth::params_synthetic_2d`).
pub(crate) fn params_2d() -> EstimateParams { super::synth::params_synthetic_2d() }

#[test]
fn range_counts_match_the_paper() {
    assert_eq!(Range::new(-1e-4, 1e-5, 1e-4).count(), 21);
    assert_eq!(Range::new(-1.25e-7, 0.25e-7, 1.25e-7).count(), 11);
    assert_eq!(Range::new(-1e-3, 1.33e-5, 1e-3).count(), 151);
    assert_eq!("[-1e-3:1.33e-5:1e-3]".parse::<Range>().unwrap().count(), 151);
    assert_eq!("0".parse::<Range>().unwrap().count(), 1);
    assert!("1:2".parse::<Range>().is_err());
}

#[test]
fn apertures_on_the_paper_2d_line() {
    let tr = crate::synth::noise_traces(geometry::line_2d(41, 25.0, 41, 25.0), 50, 0.004, 1);
    let s = Setup::new(&tr, &params_2d()).unwrap();
    assert_eq!((s.grid.nx, s.grid.ny), (8, 8)); // 1000 m / 140 m -> 0..7
    // (A, D) aperture at the corner node: 9 receivers (0..200 m) x 1 source.
    assert_eq!(s.apertures.list(0, 0).len(), 9);
    // At node (1, 1) = (140, 140): receivers 0..340 (14) x sources 125, 150 (2).
    assert_eq!(s.apertures.list(0, 8 + 1).len(), 14 * 2);
    assert_eq!(s.apertures.list(2, 8 + 1).len(), 14 * 14);
    for p in 0..s.np() {
        for ph in 0..3 {
            let l = s.apertures.list(ph, p);
            assert!(l.windows(2).all(|w| w[0] < w[1]));
        }
    }
    assert_eq!(s.shift_bound[0], (1e-4f64 * 200.0 / 0.004 + 1.25e-7 * 40000.0 / 0.004).ceil() as i32 + 2);
}

#[test]
fn a_subset_reading_its_apertures_traces_searches_as_the_whole() {
    // An MPI rank's part: its parameter traces, only the input traces their apertures hold.
    let tr = crate::synth::noise_traces(geometry::line_2d(41, 25.0, 41, 25.0), 60, 0.004, 3);
    let s = Setup::new(&tr, &params_2d()).unwrap();
    let (code, sem) = cpu::estimate(&s, &tr.data);
    for part in [0..5, 17..40, 60..s.np()] {
        let (sub, wanted) = s.subset_reading(part.clone());
        assert!(wanted.len() < s.ntr() && wanted.windows(2).all(|w| w[0] < w[1]), "{part:?}");
        let data: Vec<f32> = wanted.iter().flat_map(|&t| tr.data[t * tr.ns..(t + 1) * tr.ns].iter().copied()).collect();
        let all: Vec<usize> = (0..sub.np()).collect();
        let (c, m) = cpu::estimate_subset(&sub, &data, &all);
        let at = part.start * s.ns..part.end * s.ns;
        assert_eq!(c, code[at.clone()], "{part:?}");
        assert!(m.iter().zip(&sem[at]).all(|(a, b)| a.to_bits() == b.to_bits()), "{part:?}");
    }
    // The search's queue job as a rank runs it: a block of the work items on its devices, from
    // the subset of their parameter traces, written in place.
    let items = work_items(s.np());
    let devs: Vec<NlbfDevice> = (0..3).map(|_| NlbfDevice::new(&crate::Backend::Cpu)).collect();
    for held in [0..items.len(), 3..9, 15..16] {
        let ptraces = items[held.start].start..items[held.end - 1].end;
        let (sub, wanted) = s.subset_reading(ptraces.clone());
        let data: Vec<f32> = wanted.iter().flat_map(|&t| tr.data[t * tr.ns..(t + 1) * tr.ns].iter().copied()).collect();
        let (mut c, mut m) = (vec![0u32; ptraces.len() * s.ns], vec![0f32; ptraces.len() * s.ns]);
        let job = Search::new(&sub, &data, Variant::Cpu, &items, held.clone(), ptraces.start, &mut c, &mut m).unwrap();
        crate::exec::run_queue_items(&job, &devs, held.clone(), ()).unwrap();
        let e = crate::exec::run_queue_items(&job, &devs, held.end - 1..held.end, ()).unwrap_err();
        assert!(e.to_string().contains("ran twice"), "{e}");
        if held.start > 0 {
            let e = crate::exec::run_queue_items(&job, &devs, 0..1, ()).unwrap_err();
            assert!(e.to_string().contains("not held here"), "{e}");
        }
        drop(job);
        let at = ptraces.start * s.ns..ptraces.end * s.ns;
        assert_eq!(c, code[at.clone()], "{held:?}");
        assert!(m.iter().zip(&sem[at]).all(|(a, b)| a.to_bits() == b.to_bits()), "{held:?}");
    }
    // Planned from the headers alone, as the ranks do.
    let layout = TraceSet { data: Vec::new().into(), ..tr.clone() };
    let l = Setup::from_layout(&layout, &params_2d()).unwrap();
    assert_eq!((l.apertures, l.tx, l.grid), (s.apertures.clone(), s.tx.clone(), s.grid));
}

#[test]
fn bad_input_gives_clear_errors() {
    let tr = crate::synth::noise_traces(geometry::line_2d(9, 25.0, 9, 25.0), 40, 0.004, 2);
    let err = |p: EstimateParams| Setup::new(&tr, &p).unwrap_err().to_string();
    let mut p = params_2d();
    p.search.a.step = 0.0;
    assert!(err(p).contains("step 0 must be positive"), "{}", err(p));
    let mut p = params_2d();
    p.search.d = Range::new(1.0, 0.1, -1.0);
    assert!(err(p).contains("max -1 is below min 1"));
    let mut p = params_2d();
    p.window = 41;
    assert!(err(p).contains("longer than the traces"));
    let mut p = params_2d();
    p.window = 10;
    assert!(err(p).contains("must be odd"));
    let mut p = params_2d();
    p.aperture_ad = Aperture { x: 10.0, y: 10.0 };
    p.spacing_x = 30.0;
    // Parameter traces whose aperture holds no trace are left unestimated, not an error.
    let s = Setup::new(&tr, &p).unwrap();
    let est = Estimate::from_setup(&s, vec![0; s.estimations()], vec![1.0; s.estimations()]);
    assert!(est.unestimated_count() > 0 && est.unestimated_count() < s.np(), "{:?}", est.unestimated);
    for (sem, u) in est.semblance.chunks(s.ns).zip(&est.unestimated) {
        assert!(!u || sem.iter().all(|v| *v == 0.0));
    }
    assert!(est.volume(Param::A).chunks(s.ns).zip(&est.unestimated).all(|(a, u)| a[0].is_nan() == *u));
    let mut p = params_2d();
    p.spacing_y = -5.0;
    assert!(err(p).contains("spacing in y is -5"));
    let mut p = params_2d();
    p.coords.x = CoordKey::ReceiverY;
    assert!(err(p).contains("zero on every trace"), "{}", err(p));
}
/// The bit-set aperture search and its bounds equal the bucket search and the separate bound
/// pass (the references), on lines, cross-spreads, shuffled trace orders and odd apertures.
#[test]
fn apertures_and_bounds_equal_the_reference() {
    use rand::RngExt;
    let mut cases: Vec<(TraceSet, EstimateParams)> = vec![
        super::synth::crossspread_3d(crate::synth::Size::Small),
        super::synth::synthetic_2d(crate::synth::Size::Small),
    ];
    let (mut t, p) = super::synth::crossspread_3d(crate::synth::Size::Small);
    let mut r = crate::synth::rng(7);
    for i in (1..t.headers.len()).rev() {
        let j = r.random_range(0..=i);
        t.headers.swap(i, j);
    }
    cases.push((t.clone(), p));
    let mut p2 = p;
    p2.aperture_ad = Aperture { x: 61.0, y: 20.0 };
    p2.aperture_c = Aperture { x: 40.0, y: 39.999 };
    p2.spacing_x = 20.0;
    p2.spacing_y = 13.0;
    cases.push((t, p2));
    for (k, (t, p)) in cases.iter().enumerate() {
        let s = Setup::from_headers(t, p).unwrap();
        let (x, y) = coordinates(&t.headers, &p.coords).unwrap();
        let aps = [p.aperture_ad, p.aperture_be, p.aperture_c];
        let (lo, hi) = ((min_max(&x).0, min_max(&y).0), (min_max(&x).1, min_max(&y).1));
        let old = build_apertures(&x, &y, lo, hi, &s.grid, &aps).unwrap();
        assert_eq!(old, s.apertures, "case {k}");
        let bounds = shift_bounds(&s.tx, &s.ty, &s.px, &s.py, &old, &p.search, s.inv_dt as f64).unwrap();
        assert_eq!(bounds, (s.shift_bound, [s.max_dx2_ad, s.max_dy2_be, s.max_abs_dxdy]), "case {k}");
    }
}

/// The split setup (the pipelined engine's path): the deferred first pass plus the lists filled
/// band by band (on all cores or on one thread, into one index list split by band) equals
/// `Setup::from_headers` in every field, and each list's recorded last entry and each band's
/// need equal those read from the full lists.
#[test]
fn band_by_band_setup_equals_the_full_setup() {
    let mut cases = vec![super::synth::crossspread_3d(crate::synth::Size::Small),
        super::synth::synthetic_2d(crate::synth::Size::Small)];
    let (t, mut p) = super::synth::crossspread_3d(crate::synth::Size::Small);
    p.aperture_ad = Aperture { x: 61.0, y: 20.0 };
    p.spacing_x = 20.0;
    p.spacing_y = 13.0;
    cases.push((t, p));
    for (k, (t, p)) in cases.iter().enumerate() {
        let full = Setup::from_headers(t, p).unwrap();
        let ends: [&[f64]; 4] = [&gpu::BAND_ENDS, &[1.0], &[0.01, 0.02, 0.03, 0.5, 0.99], &[0.3, 0.31, 0.9]];
        for (e, parallel) in ends.iter().zip([false, true, false, true]) {
            let DeferredSetup { setup: mut s, fill } = Setup::from_headers_deferred(t, p).unwrap();
            assert!(s.apertures.idx.is_empty());
            assert_eq!(s.apertures.off, full.apertures.off, "case {k}");
            // What the launch plan reads before the lists exist (FastPlan: the longest list).
            for ph in 0..3 {
                assert_eq!(s.apertures.max_len(ph), full.apertures.max_len(ph), "case {k}, phase {ph}");
            }
            assert_eq!((s.shift_bound, s.max_abs_dxdy, s.max_dx2_ad, s.max_dy2_be),
                (full.shift_bound, full.max_abs_dxdy, full.max_dx2_ad, full.max_dy2_be), "case {k}");
            assert_eq!((&s.tx, &s.ty, &s.px, &s.py, s.grid, s.origin, &s.tables, s.ns, s.half),
                (&full.tx, &full.ty, &full.px, &full.py, full.grid, full.origin, &full.tables, full.ns, full.half));
            let b = gpu::bands(s.np(), e);
            let mut idx = vec![u32::MAX; fill.total()];
            // Later bands first: the order of the fills does not matter.
            for (band, mut piece) in b.iter().zip(fill.split(&b, &mut idx)).rev() {
                fill.fill(*band, &mut piece, parallel);
            }
            s.apertures.idx = idx;
            assert_eq!(s.apertures, full.apertures, "case {k}, bands {e:?}");
            let need = gpu::band_needs_by(&b, |ph, q| fill.last(ph, q));
            assert_eq!(need, gpu::band_needs(&full.apertures, &b), "case {k}, bands {e:?}");
        }
        let fill = Setup::from_headers_deferred(t, p).unwrap().fill;
        for ph in 0..3 {
            for q in 0..full.np() {
                assert_eq!(fill.last(ph, q), full.apertures.list(ph, q).last().copied());
            }
        }
    }
}

/// Host setup time at paper size (`cargo test --release -p seisgpu-host --lib setup_timing -- --ignored
/// --nocapture`): `Setup::from_headers` on the cross-spread, its parts, and what the pipelined
/// engine waits for before its first launch (the deferred first pass + band 0's lists on all
/// cores), on this machine's cores.
#[test]
#[ignore]
fn setup_timing_crossspread() {
    let (t, p) = super::synth::crossspread_3d(crate::synth::Size::Paper);
    let ms = |t0: std::time::Instant| t0.elapsed().as_secs_f64() * 1e3;
    let med = |mut v: Vec<f64>| { v.sort_by(f64::total_cmp); (v[v.len() / 2], v[0]) };
    for _ in 0..2 {
        Setup::from_headers(&t, &p).unwrap();
    }
    let mut v = Vec::new();
    for _ in 0..9 {
        let t0 = std::time::Instant::now();
        let s = Setup::from_headers(&t, &p).unwrap();
        v.push(ms(t0));
        std::hint::black_box(s);
    }
    let full = med(v);
    // The pipelined engine's path: first pass, band 0 on all cores, the rest on one thread.
    let (mut head, mut ready, mut rest, mut rest_par) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut stage = Vec::new();
    for _ in 0..9 {
        let t0 = std::time::Instant::now();
        let d = Setup::from_headers_deferred(&t, &p).unwrap();
        head.push(ms(t0));
        let b = gpu::bands(d.setup.np(), &gpu::BAND_ENDS);
        stage.resize(d.fill.total(), 0u32);
        let mut pieces = d.fill.split(&b, &mut stage).into_iter();
        d.fill.fill(b[0], &mut pieces.next().unwrap(), true);
        ready.push(ms(t0));
        let t1 = std::time::Instant::now();
        for (band, mut piece) in b[1..].iter().zip(pieces) {
            d.fill.fill(*band, &mut piece, false);
        }
        rest.push(ms(t1));
        let t1 = std::time::Instant::now();
        for (band, mut piece) in b[1..].iter().zip(d.fill.split(&b, &mut stage).into_iter().skip(1)) {
            d.fill.fill(*band, &mut piece, true);
        }
        rest_par.push(ms(t1));
    }
    let (head, ready, rest, rest_par) = (med(head), med(ready), med(rest), med(rest_par));
    let t0 = std::time::Instant::now();
    let (x, y) = coordinates(&t.headers, &p.coords).unwrap();
    let c_ms = ms(t0);
    let s = Setup::from_headers(&t, &p).unwrap();
    let aps = [p.aperture_ad, p.aperture_be, p.aperture_c];
    let (lo, hi) = ((min_max(&x).0, min_max(&y).0), (min_max(&x).1, min_max(&y).1));
    let t0 = std::time::Instant::now();
    let old = build_apertures(&x, &y, lo, hi, &s.grid, &aps).unwrap();
    let a_ms = ms(t0);
    let t0 = std::time::Instant::now();
    let bounds = shift_bounds(&s.tx, &s.ty, &s.px, &s.py, &old, &p.search, s.inv_dt as f64).unwrap();
    let b_ms = ms(t0);
    assert_eq!(old, s.apertures);
    assert_eq!(bounds, (s.shift_bound, [s.max_dx2_ad, s.max_dy2_be, s.max_abs_dxdy]));
    eprintln!("SETUP {} threads: from_headers median {:.2} ms (min {:.2}); band 0 ready (first pass + band 0 lists) \
        median {:.2} ms (min {:.2}), first pass alone {:.2} ms (min {:.2}); other bands' lists {:.2} ms on one thread \
        (min {:.2}), {:.2} ms on all cores; coordinates {c_ms:.2} ms; reference bucket search {a_ms:.2} ms + shift \
        bounds {b_ms:.2} ms; {} parameter traces, {} aperture entries", rayon::current_num_threads(), full.0, full.1,
        ready.0, ready.1, head.0, head.1, rest.0, rest.1, rest_par.0, s.np(), s.apertures.idx.len());
}
