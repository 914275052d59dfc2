//! Peer access between GPUs: copies between them go over NVLink/PCIe peer to peer. The sums of
//! per-device images over these links are `crate::exec::reduce`'s.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;

use super::context::Gpu;
use super::error::{GpuError, GpuResult};

/// Context pairs (accessor, owner) already asked for peer access (raw context pointers).
static PEERS: Mutex<Option<HashSet<(usize, usize)>>> = Mutex::new(None);

impl Gpu {
    /// Lets this GPU read and write `peer`'s memory directly (cuCtxEnablePeerAccess), so copies
    /// between them go over NVLink/PCIe peer to peer, not through host memory. Once per pair of
    /// contexts; `Ok(false)` where the devices cannot be peers (copies still work, staged by the
    /// driver). Part of opening the devices (`crate::exec::devices::open_gpus`): enabling maps the
    /// existing allocations, which is one-time setup, not per job.
    pub fn enable_peer_access(&self, peer: &Gpu) -> GpuResult<bool> {
        let (me, other) = (self.context().cu_ctx() as usize, peer.context().cu_ctx() as usize);
        if me == other {
            return Ok(true);
        }
        let mut guard = PEERS.lock().unwrap_or_else(|e| e.into_inner());
        let seen = guard.get_or_insert_with(HashSet::new);
        if seen.contains(&(me, other)) {
            return Ok(true);
        }
        let mut can = 0;
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.context().cu_device(), peer.context().cu_device()) }
            .result().map_err(GpuError::driver("asking whether two GPUs can be peers"))?;
        if can == 0 {
            return Ok(false);
        }
        self.context().bind_to_thread().map_err(GpuError::driver("binding the context"))?;
        match unsafe { sys::cuCtxEnablePeerAccess(peer.context().cu_ctx(), 0) } {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
            e => return Err(GpuError::driver("enabling peer access")(cudarc::driver::DriverError(e))),
        }
        seen.insert((me, other));
        Ok(true)
    }
}

/// Enables peer access between every pair of `gpus` (both ways); returns the pairs that cannot be
/// peers (their copies are staged through the host by the driver).
pub fn enable_peers(gpus: &[Arc<Gpu>]) -> GpuResult<Vec<(usize, usize)>> {
    let mut not = Vec::new();
    for (a, ga) in gpus.iter().enumerate() {
        for (b, gb) in gpus.iter().enumerate() {
            if a != b && !ga.enable_peer_access(gb)? {
                not.push((a, b));
            }
        }
    }
    Ok(not)
}
