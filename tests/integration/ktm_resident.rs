//! The device-resident Kirchhoff entries (`ktm::resident`, what the Python package runs on CuPy
//! arrays): traces and image on the GPU give the host entries' results, a borrowed device buffer
//! is given back unfreed, and a foreign address is refused with a clear error.

use seisgpu_host::backend::{gpu_or_skip, Backend};
use seisgpu_host::ktm::resident::{self, Borrowed};
use seisgpu_host::ktm::{self, GpuLimits, ImageGrid, Params};

use crate::common::{random_vec, rel_l2};
use crate::ktm::{configs, random_traces};

fn grid() -> ImageGrid { ImageGrid { x0: 3.0, dx: 17.0, nx: 6, y0: -4.0, dy: 13.0, ny: 5, tau0: 0.02, dtau: 0.004, ntau: 61 } }

#[test]
fn resident_migration_and_modelling_match_the_host_entries() {
    let Some(gpu) = gpu_or_skip("resident_migration_and_modelling_match_the_host_entries") else { return };
    let g = grid();
    let traces = random_traces(150, 95, 0.004, 160.0, "resident traces");
    let d_traces = gpu.upload(&traces.data).unwrap();
    for (name, params) in configs(g).into_iter().chain([("full", Params::full(g, ktm::Velocity::Constant(1800.0)))]) {
        // Migration: the GPU path with the traces prepared on the GPU (the same kernels).
        let want = ktm::migrate(&traces, &Params { prep_on_gpu: true, ..params.clone() }, &[Backend::Gpu(gpu.clone())]).unwrap();
        let mut image = gpu.poisoned(params.classes() * g.len()).unwrap();
        let out = resident::migrate(&gpu, &d_traces.slice(..), &traces.headers, traces.ns, traces.dt, traces.t0, &params,
            &mut image.slice_mut(..)).unwrap();
        let got = gpu.download(&image).unwrap();
        let err = rel_l2(&got, &want.data);
        println!("resident migration {name}: rel L2 {err:.2e} against the host entry");
        assert!(err < 1e-5, "{name}: rel L2 {err}");
        assert_eq!((out.classes, out.skipped_traces), (want.classes, want.skipped_traces), "{name}");

        // Modelling, with forced trace chunks and column tiles.
        let m = ktm::Image { grid: g, classes: params.classes(), class_offsets: vec![],
            data: random_vec(params.classes() * g.len(), "resident image"), skipped_traces: 0 };
        let p = Params { limits: GpuLimits { max_traces_per_chunk: Some(23), max_columns_per_tile: Some(7) }, ..params };
        let want = ktm::model(&m, &traces.headers, traces.ns, traces.dt, traces.t0, &p, &Backend::Gpu(gpu.clone())).unwrap();
        let d_image = gpu.upload(&m.data).unwrap();
        let mut modelled = gpu.poisoned(traces.data.len()).unwrap();
        resident::model(&gpu, &d_image.slice(..), &traces.headers, traces.ns, traces.dt, traces.t0, &p, &mut modelled.slice_mut(..))
            .unwrap();
        let got = gpu.download(&modelled).unwrap();
        let err = rel_l2(&got, &want.data);
        println!("resident modelling {name}: rel L2 {err:.2e} against the host entry");
        assert!(err < 1e-4, "{name}: modelling rel L2 {err}");
    }
}

#[test]
fn borrowed_buffers_are_given_back_and_foreign_addresses_refused() {
    let Some(gpu) = gpu_or_skip("borrowed_buffers_are_given_back_and_foreign_addresses_refused") else { return };
    // A buffer another library owns: its address and length only.
    let ptr = gpu.upload(&[1.0f32, 2.0, 3.0]).unwrap().leak();
    {
        // SAFETY: the buffer stays allocated (taken back below) and nothing else touches it.
        let mut b = unsafe { Borrowed::new(&gpu, "data", ptr, 3) }.unwrap();
        gpu.stream().memcpy_htod(&[4.0f32, 5.0, 6.0], &mut b.view_mut()).unwrap();
    }
    // Still allocated (the borrow did not free it), with the borrower's write; freed when dropped.
    // SAFETY: the address and length of the buffer leaked above.
    let owned = unsafe { gpu.stream().upgrade_device_ptr::<f32>(ptr, 3) };
    assert_eq!(gpu.download(&owned).unwrap(), vec![4.0, 5.0, 6.0]);
    let host = [0.0f32; 4];
    // SAFETY: refused before any use.
    let err = unsafe { Borrowed::new(&gpu, "image", host.as_ptr() as u64, 4) }.err().expect("a host address is refused").to_string();
    assert!(err.contains("image") && err.contains("not device memory"), "{err}");
}
