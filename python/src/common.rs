//! What every binding shares: the devices (`device`, `gpu`, `gpus` as the CLI's `--device`,
//! `--gpu`, `--gpus`), errors as Python exceptions, and trace sets built from NumPy arrays.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use numpy::{PyArray2, PyReadonlyArray, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use seisgpu_host::exec::GpuCount;
use seisgpu_host::runtime::GpuError;
use seisgpu_host::{Backend, DeviceChoice, Samples, TraceHeader, TraceSet};

/// The devices of one call: one backend, or several (`gpus=N`: N GPUs, or N CPU work queues).
pub enum Devices {
    One(Backend),
    Many(Vec<Backend>),
}

impl Devices {
    /// Every device, as the host library's entries take them (one runs the whole input, several split it).
    pub fn all(&self) -> &[Backend] {
        match self {
            Devices::One(b) => std::slice::from_ref(b),
            Devices::Many(bs) => bs,
        }
    }
    /// The first device (for the entry points that run on one).
    pub fn first(&self) -> &Backend {
        match self {
            Devices::One(b) => b,
            Devices::Many(bs) => &bs[0],
        }
    }
}

type Key = (String, usize, Option<String>);

/// Devices opened once per process: a GPU context and its kernel modules cost a second or more to
/// set up, and an iterative solver calls the operators hundreds of times.
static OPENED: Mutex<Option<HashMap<Key, Opened>>> = Mutex::new(None);

/// Open devices: the backends, the line that says which, whether `gpus` asked for several.
type Opened = (Vec<Backend>, String, bool);

/// Opens (or finds already open) the devices of `device`, `gpu`, `gpus`; returns them and the line
/// that says which run (the CLI prints it as "running on ...").
pub fn devices(device: &str, gpu: usize, gpus: Option<&str>) -> PyResult<(Devices, String)> {
    let choice: DeviceChoice = device.parse().map_err(|e: String| PyValueError::new_err(format!("device: {e}")))?;
    let count: Option<GpuCount> = match gpus {
        None => None,
        Some(s) => Some(s.parse().map_err(|e: String| PyValueError::new_err(e.replace("--gpus", "gpus")))?),
    };
    let key = (device.to_string(), gpu, gpus.map(str::to_string));
    let _keep = KeepContext::new();
    let mut opened = OPENED.lock().unwrap_or_else(|p| p.into_inner());
    let map = opened.get_or_insert_with(HashMap::new);
    if !map.contains_key(&key) {
        let entry = match count {
            None => {
                let (b, note) = Backend::select(choice, gpu).map_err(gpu_error)?;
                (vec![b], note, false)
            }
            Some(c) => {
                let (bs, note) = seisgpu_host::exec::backends(choice, c).map_err(gpu_error)?;
                (bs, note, true)
            }
        };
        map.insert(key.clone(), entry);
    }
    let (bs, note, many) = &map[&key];
    let d = if *many { Devices::Many(bs.clone()) } else { Devices::One(bs[0].clone()) };
    Ok((d, note.clone()))
}

/// The thread's current CUDA context, made current again when dropped: opening or using a GPU
/// binds its context to the thread, and CuPy (the CUDA runtime) takes the thread's context for its
/// current device, so without this a call on `gpu=1` would move the caller's CuPy arrays to GPU 1.
struct KeepContext(Option<cudarc::driver::sys::CUcontext>);

impl KeepContext {
    fn new() -> KeepContext {
        use cudarc::driver::sys::{cuCtxGetCurrent, CUresult};
        if !seisgpu_host::runtime::Gpu::driver_present() {
            return KeepContext(None);
        }
        let mut ctx = std::ptr::null_mut();
        // SAFETY: writes one handle; before cuInit it is an error code, and nothing is restored.
        let ok = unsafe { cuCtxGetCurrent(&mut ctx) } == CUresult::CUDA_SUCCESS;
        KeepContext(ok.then_some(ctx))
    }
}

impl Drop for KeepContext {
    fn drop(&mut self) {
        if let Some(ctx) = self.0 {
            // SAFETY: the handle was current on this thread before the call (or null: none).
            unsafe { cudarc::driver::sys::cuCtxSetCurrent(ctx) };
        }
    }
}

/// `seisgpu.GpuError`: the device failed (driver, memory, launch); a RuntimeError.
pub mod exceptions {
    pyo3::create_exception!(seisgpu, GpuError, pyo3::exceptions::PyRuntimeError, "The GPU failed (driver, memory, kernel launch): a RuntimeError.");
}
use exceptions::GpuError as PyGpuError;

fn gpu_error(e: GpuError) -> PyErr { PyGpuError::new_err(e.to_string()) }

/// A host error as a Python exception, with the CLI's message (the whole context chain), by the
/// kind of [`seisgpu_host::Error`]: ValueError for a parameter or the data, `seisgpu.GpuError` (a
/// RuntimeError) for the device, OSError for a file; anything else is a ValueError, as the
/// binding's own argument checks are (the host library checks its inputs before any work).
pub fn to_py(e: anyhow::Error) -> PyErr {
    use seisgpu_host::ErrorKind;
    let message = format!("{e:#}");
    match ErrorKind::of(&e) {
        ErrorKind::Gpu => PyGpuError::new_err(message),
        ErrorKind::Io => PyOSError::new_err(message),
        ErrorKind::Parameter | ErrorKind::Input | ErrorKind::Internal => PyValueError::new_err(message),
    }
}

/// Runs `work` with the GIL released (other Python threads go on), checking for Ctrl-C before and
/// after: the host drivers take no callback, so a running computation finishes before the
/// KeyboardInterrupt is raised.
///
/// The wall-clock time of `work` (the host library's entry, GIL released) is kept for
/// [`last_call_seconds`]: a call's time minus this is what the binding and the Python layer add.
pub fn compute<T: Send>(py: Python<'_>, work: impl FnOnce() -> anyhow::Result<T> + Send) -> PyResult<T> {
    py.check_signals()?;
    let timed = || {
        let _keep = KeepContext::new();
        let t = std::time::Instant::now();
        let out = work();
        (out, t.elapsed().as_secs_f64())
    };
    let (out, seconds) = py.detach(timed);
    LAST_CALL.with(|c| c.set(seconds));
    let out = out.map_err(to_py)?;
    py.check_signals()?;
    Ok(out)
}

thread_local! {
    /// Seconds the last host-library call of this thread took ([`compute`]).
    static LAST_CALL: std::cell::Cell<f64> = const { std::cell::Cell::new(f64::NAN) };
}

/// Wall-clock seconds of the host library's entry in this thread's last call (NaN before the
/// first): the Rust side of the call, measured around the entry with the GIL released.
#[pyfunction]
pub fn last_call_seconds() -> f64 { LAST_CALL.with(|c| c.get()) }

/// A C-contiguous array's values, in place (the Python layer converts other dtypes and orders).
/// An array contiguous in Fortran order only is refused too: its values are in another order.
pub fn slice<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(a: &'a PyReadonlyArray<'_, T, D>, name: &str) -> PyResult<&'a [T]> {
    let c_order = a.is_c_contiguous();
    a.as_slice().ok().filter(|_| c_order).ok_or_else(|| PyValueError::new_err(format!("{name}: the array must be C-contiguous")))
}

/// Trace headers from per-trace arrays (float64, one value per trace): `sx`, `sy`, `gx`, `gy`,
/// `offset` (m), `cdp`, `inline`, `crossline`, `ffid`, `channel`, `source_station`, `receiver_station`,
/// and `cdp_x`, `cdp_y` (m) together.
pub fn headers(n: usize, fields: &HashMap<String, PyReadonlyArray1<'_, f64>>) -> PyResult<Vec<TraceHeader>> {
    let known = ["sx", "sy", "gx", "gy", "offset", "cdp", "inline", "crossline", "ffid", "channel", "source_station", "receiver_station",
        "cdp_x", "cdp_y"];
    for name in fields.keys() {
        if !known.contains(&name.as_str()) {
            return Err(PyValueError::new_err(format!("trace header `{name}` is not one of {}", known.join(", "))));
        }
    }
    let mut columns: HashMap<&str, &[f64]> = HashMap::new();
    for (name, a) in fields {
        let s = slice(a, name)?;
        if s.len() != n {
            return Err(PyValueError::new_err(format!("{name}: {} values for {n} traces", s.len())));
        }
        // NaN in cdp_x/cdp_y: the trace's CDP is its midpoint (as a SEG-Y file with zeros there).
        let optional = name == "cdp_x" || name == "cdp_y";
        if let Some(i) = s.iter().position(|v| !v.is_finite() && !(optional && v.is_nan())) {
            return Err(PyValueError::new_err(format!("{name}: trace {i} has a value that is not finite")));
        }
        columns.insert(name.as_str(), s);
    }
    if columns.contains_key("cdp_x") != columns.contains_key("cdp_y") {
        return Err(PyValueError::new_err("cdp_x and cdp_y go together"));
    }
    // Each column looked up once and the integer columns checked whole, not field by field per
    // trace: a survey has millions of traces.
    let column = |name: &str| columns.get(name).copied();
    let [sx, sy, gx, gy, offset, cdp_x, cdp_y] = ["sx", "sy", "gx", "gy", "offset", "cdp_x", "cdp_y"].map(column);
    let ints = ["cdp", "inline", "crossline", "ffid", "channel", "source_station", "receiver_station"].map(|name| (name, column(name)));
    let not_int = |v: f64| v.fract() != 0.0 || v < i32::MIN as f64 || v > i32::MAX as f64;
    // The first trace with a bad value, and of its bad fields the first in the list.
    let bad = ints.iter().filter_map(|&(name, c)| c.and_then(|c| c.iter().position(|&v| not_int(v)).map(|i| (i, name, c[i])))).min_by_key(|b| b.0);
    if let Some((i, name, v)) = bad {
        return Err(PyValueError::new_err(format!("{name}: trace {i} has {v}, not a 32-bit integer")));
    }
    let [cdp, inline, crossline, ffid, channel, source_station, receiver_station] = ints.map(|(_, c)| c);
    let get = |c: Option<&[f64]>, i: usize| c.map_or(0.0, |c| c[i]);
    let int = |c: Option<&[f64]>, i: usize| c.map_or(0, |c| c[i] as i32);
    Ok((0..n).map(|i| TraceHeader {
        sx: get(sx, i),
        sy: get(sy, i),
        gx: get(gx, i),
        gy: get(gy, i),
        offset: get(offset, i),
        cdp: int(cdp, i),
        inline: int(inline, i),
        crossline: int(crossline, i),
        ffid: int(ffid, i),
        channel: int(channel, i),
        source_station: int(source_station, i),
        receiver_station: int(receiver_station, i),
        cdp_xy: Some((get(cdp_x, i), get(cdp_y, i))).filter(|(x, y)| cdp_x.is_some() && !x.is_nan() && !y.is_nan()),
        ..Default::default()
    }).collect())
}

/// A trace set: `data` [traces, samples], `dt` and `t0` (s), the headers' arrays. The samples are
/// read in place from the NumPy array (no copy): the Python caller must not write to it until the
/// call returns, as with NumPy's own functions that release the GIL.
pub fn trace_set(data: &PyReadonlyArray2<'_, f32>, dt: f32, t0: f32, fields: &HashMap<String, PyReadonlyArray1<'_, f64>>)
    -> PyResult<TraceSet> {
    let shape = data.shape();
    let (n, ns) = (shape[0], shape[1]);
    let samples = Samples::shared(Arc::new(ArraySamples::new(data)?));
    Ok(TraceSet { headers: headers(n, fields)?, data: samples, ns, dt, t0 })
}

/// The samples of a C-contiguous float32 NumPy array, read where NumPy holds them: the array
/// itself, kept alive by the reference, and its data pointer and length.
pub struct ArraySamples {
    _array: Py<PyArray2<f32>>,
    ptr: *const f32,
    len: usize,
}

impl ArraySamples {
    /// The samples of `data`; an error unless it is C-contiguous (the Python layer makes it so).
    pub fn new(data: &PyReadonlyArray2<'_, f32>) -> PyResult<ArraySamples> {
        let samples = slice(data, "data")?;
        Ok(ArraySamples { _array: data.as_unbound().clone_ref(data.py()), ptr: samples.as_ptr(), len: samples.len() })
    }
}

impl AsRef<[f32]> for ArraySamples {
    fn as_ref(&self) -> &[f32] {
        // SAFETY: `ptr` and `len` are those of a slice that rust-numpy's `as_slice` checked (aligned,
        // contiguous, float32). `_array` keeps the array alive, so its buffer stays in place unless
        // Python resizes or writes it, which the call's documentation asks the caller not to do until
        // the call returns; on the Rust side the readonly borrow excludes writers.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

// SAFETY: the samples are only read, from any thread ([`AsRef`] above); the array's reference is
// `Py`, which is Send and Sync (dropped without the GIL, its decrement waits for the next holder).
unsafe impl Send for ArraySamples {}
unsafe impl Sync for ArraySamples {}

/// An NLBF error as an `anyhow` error whose chain keeps a GPU failure visible to [`to_py`].
pub fn nlbf_error(e: seisgpu_host::nlbf::NlbfError) -> anyhow::Error {
    match e {
        seisgpu_host::nlbf::NlbfError::Gpu(g) => anyhow::Error::new(g),
        other => anyhow::Error::new(other),
    }
}
