use seisgpu_host::runtime::{self, Gpu};

use super::Global;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: &Args, _global: &Global) -> anyhow::Result<()> {
    println!("seisgpu {}", env!("CARGO_PKG_VERSION"));
    println!("CPU: {} threads available to rayon", rayon_threads());
    println!("PTX: built for {} ({} kernels embedded)", runtime::PTX_ARCH, runtime::kernel_names().len());
    if !Gpu::driver_present() {
        println!("GPU: none (no CUDA driver: libcuda.so not found)");
        return Ok(());
    }
    let n = Gpu::device_count();
    if n == 0 {
        println!("GPU: none (the driver found no device)");
    }
    for i in 0..n {
        match Gpu::open(i) {
            Ok(g) => println!("{}", g.info()),
            Err(e) => println!("GPU {i}: cannot be opened: {e}"),
        }
    }
    Ok(())
}

fn rayon_threads() -> usize { seisgpu_host::rayon_threads() }

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn library_progress(&self) -> bool { false }
    fn path(&self) -> String { "info".to_string() }
}
