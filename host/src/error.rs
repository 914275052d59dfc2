//! The error of the public algorithm entries: what went wrong by kind (a parameter, the data, the
//! device, a file, anything else), so that callers (the CLI's exit code, the Python exceptions) can
//! tell bad input from a failure without reading the text.
//!
//! Internals keep `anyhow` with its context chain; an entry converts at its end with
//! [`Error::classify`], which finds the typed cause in the chain ([`Error`] raised by a validation,
//! [`GpuError`], [`SegyError`], [`NlbfError`], `std::io::Error`) and keeps the messages above it as
//! [`Error::Context`] layers. The text is unchanged: `Display` of each layer is the layer's own
//! message and `source()` is the next layer, as with `anyhow`, so `{:#}` prints the same chain.

use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;

use crate::exec::WorkError;
use crate::io::segy::SegyError;
use crate::nlbf::NlbfError;
use crate::runtime::GpuError;

/// The result of a public entry.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of a public entry; [`Error::kind`] is what it is after any context.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A parameter out of range or inconsistent with another; `name` is its CLI name (`dx`, `aperture`).
    Parameter { name: String, reason: String },
    /// Bad data: the message names the file, trace, sample or byte.
    Input(String),
    /// A SEG-Y file that cannot be read (its I/O failures are [`ErrorKind::Io`], the rest [`ErrorKind::Input`]).
    Segy(SegyError),
    /// The device: driver, memory, launch.
    Gpu(GpuError),
    /// A file that cannot be read or written (`path` where known).
    Io { path: Option<PathBuf>, source: std::io::Error },
    /// Anything else, its context chain kept.
    Internal(anyhow::Error),
    /// One of the above under the message of the step that failed (`anyhow`'s context).
    Context { message: String, source: Box<Error> },
}

/// What an [`Error`] is, after its context layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Parameter,
    Input,
    Gpu,
    Io,
    Internal,
}

impl Error {
    /// A parameter error: `name` is the parameter's CLI name, `reason` the whole message.
    pub fn parameter(name: impl Into<String>, reason: impl Into<String>) -> Error {
        Error::Parameter { name: name.into(), reason: reason.into() }
    }

    /// A data error: the message names the file, trace, sample or byte.
    pub fn input(message: impl Into<String>) -> Error { Error::Input(message.into()) }

    /// The error under the context layers.
    pub fn root(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.root(),
            e => e,
        }
    }

    pub fn kind(&self) -> ErrorKind {
        match self.root() {
            Error::Parameter { .. } => ErrorKind::Parameter,
            Error::Input(_) => ErrorKind::Input,
            Error::Segy(SegyError::Io { .. }) => ErrorKind::Io,
            Error::Segy(_) => ErrorKind::Input,
            Error::Gpu(_) => ErrorKind::Gpu,
            Error::Io { .. } => ErrorKind::Io,
            Error::Internal(_) | Error::Context { .. } => ErrorKind::Internal,
        }
    }

    /// Whether the caller's input is at fault (a parameter or the data): the CLI exits with 2.
    pub fn is_usage(&self) -> bool { matches!(self.kind(), ErrorKind::Parameter | ErrorKind::Input) }

    /// The parameter's name, for a parameter error.
    pub fn parameter_name(&self) -> Option<&str> {
        match self.root() {
            Error::Parameter { name, .. } => Some(name),
            _ => None,
        }
    }

    /// The typed error of an `anyhow` chain: the first typed cause, with the messages above it as
    /// context layers; [`Error::Internal`] where there is none (or it cannot be taken out of the chain).
    pub fn classify(e: anyhow::Error) -> Error {
        // Index of the first typed layer; the layers above it are context messages.
        let typed = |c: &(dyn StdError + 'static)| {
            c.is::<Error>() || c.is::<GpuError>() || c.is::<SegyError>() || c.is::<NlbfError>() || c.is::<WorkError>() || c.is::<std::io::Error>()
        };
        let Some(at) = e.chain().position(typed) else { return Error::Internal(e) };
        let above: Vec<String> = e.chain().take(at).map(|c| c.to_string()).collect();
        // The typed layer by value: anyhow gives it through `context` layers (and only those).
        let e = match e.downcast::<Error>() {
            Ok(inner) => return wrap(above, inner),
            Err(e) => e,
        };
        let e = match e.downcast::<GpuError>() {
            Ok(inner) => return wrap(above, Error::Gpu(inner)),
            Err(e) => e,
        };
        let e = match e.downcast::<SegyError>() {
            Ok(inner) => return wrap(above, Error::from(inner)),
            Err(e) => e,
        };
        let e = match e.downcast::<NlbfError>() {
            Ok(inner) => return wrap(above, Error::from(inner)),
            Err(e) => e,
        };
        let e = match e.downcast::<WorkError>() {
            Ok(w) => {
                // Its message carries the whole chain below; the layers below are classified.
                let message = w.to_string();
                return wrap(above, Error::Context { message, source: Box::new(Error::classify(w.source)) });
            }
            Err(e) => e,
        };
        match e.downcast::<std::io::Error>() {
            Ok(source) => wrap(above, Error::Io { path: None, source }),
            Err(e) => Error::Internal(e),
        }
    }
}

impl ErrorKind {
    /// The kind of an `anyhow` chain without taking it apart: that of its first typed layer (a
    /// failed work item is looked through), [`ErrorKind::Internal`] where none is typed.
    pub fn of(e: &anyhow::Error) -> ErrorKind {
        for c in e.chain() {
            if let Some(e) = c.downcast_ref::<Error>() {
                return e.kind();
            }
            if c.is::<GpuError>() {
                return ErrorKind::Gpu;
            }
            if let Some(e) = c.downcast_ref::<SegyError>() {
                return if matches!(e, SegyError::Io { .. }) { ErrorKind::Io } else { ErrorKind::Input };
            }
            if let Some(e) = c.downcast_ref::<NlbfError>() {
                return match e {
                    NlbfError::Parameter { .. } => ErrorKind::Parameter,
                    NlbfError::Input(_) => ErrorKind::Input,
                    NlbfError::Gpu(_) => ErrorKind::Gpu,
                    NlbfError::Invalid(_) => ErrorKind::Internal,
                };
            }
            if c.is::<std::io::Error>() {
                return ErrorKind::Io;
            }
            #[cfg(feature = "mpi")]
            if let Some(e) = c.downcast_ref::<crate::exec::mpi::JobFailed>() {
                return e.kind;
            }
        }
        ErrorKind::Internal
    }

    /// Whether the caller's input is at fault (a parameter or the data).
    pub fn is_usage(self) -> bool { matches!(self, ErrorKind::Parameter | ErrorKind::Input) }

    /// The CLI's exit status for an error of this kind: 2 for a parameter or the data, 1 otherwise.
    pub fn exit_code(self) -> i32 { if self.is_usage() { 2 } else { 1 } }
}

/// `inner` under the context messages `above` (outermost first).
fn wrap(above: Vec<String>, inner: Error) -> Error {
    above.into_iter().rev().fold(inner, |source, message| Error::Context { message, source: Box::new(source) })
}

impl fmt::Display for Error {
    // `{}`: this layer's own message only (as anyhow's layers, so an anyhow chain over it prints
    // each message once). `{:#}`: the whole chain, "outer: inner: root", as anyhow prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_layer(f)?;
        if f.alternate() {
            let mut next = self.source();
            while let Some(e) = next {
                write!(f, ": {e}")?;
                next = e.source();
            }
        }
        Ok(())
    }
}

impl Error {
    fn fmt_layer(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parameter { reason, .. } => f.write_str(reason),
            Error::Input(message) | Error::Context { message, .. } => f.write_str(message),
            Error::Segy(e) => write!(f, "{e}"),
            Error::Gpu(e) => write!(f, "{e}"),
            Error::Io { path: Some(path), source } => write!(f, "{}: {source}", path.display()),
            Error::Io { path: None, source } => write!(f, "{source}"),
            Error::Internal(e) => write!(f, "{e}"),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Parameter { .. } | Error::Input(_) => None,
            Error::Segy(e) => e.source(),
            Error::Gpu(e) => e.source(),
            // The I/O error's text is in this layer's message already.
            Error::Io { source, .. } => source.source(),
            Error::Internal(e) => e.source(),
            Error::Context { source, .. } => Some(source.as_ref()),
        }
    }
}

impl From<GpuError> for Error {
    fn from(e: GpuError) -> Error { Error::Gpu(e) }
}

impl From<SegyError> for Error {
    fn from(e: SegyError) -> Error { Error::Segy(e) }
}

impl From<NlbfError> for Error {
    fn from(e: NlbfError) -> Error {
        match e {
            NlbfError::Parameter { name, reason } => Error::Parameter { name, reason },
            NlbfError::Input(message) => Error::Input(message),
            NlbfError::Gpu(e) => Error::Gpu(e),
            e @ NlbfError::Invalid(_) => Error::Internal(anyhow::Error::new(e)),
        }
    }
}

impl From<WorkError> for Error {
    fn from(e: WorkError) -> Error { Error::classify(anyhow::Error::new(e)) }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Error { Error::classify(e) }
}

/// A failed read of a file in a known format under `message` (naming the file): the data's fault
/// ([`Error::Input`]) where the reader found them malformed or cut short, an I/O failure otherwise.
pub fn malformed(e: std::io::Error, message: impl Into<String>) -> anyhow::Error {
    let message = message.into();
    match e.kind() {
        std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidInput => Error::input(format!("{message}: {e}")).into(),
        _ => anyhow::Error::new(e).context(message),
    }
}

/// Returns early with [`Error::Parameter`] (as an `anyhow` error in the internals, which
/// [`Error::classify`] finds again) unless `cond` holds: `ensure_param!(cond, "dx", "message {}", x)`.
#[macro_export]
macro_rules! ensure_param {
    ($cond:expr, $name:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::error::Error::parameter($name, format!($($msg)+)).into());
        }
    };
}

/// Returns early with [`Error::Parameter`]: `bail_param!("dx", "message {}", x)`.
#[macro_export]
macro_rules! bail_param {
    ($name:expr, $($msg:tt)+) => {
        return Err($crate::error::Error::parameter($name, format!($($msg)+)).into())
    };
}

/// Returns early with [`Error::Input`] unless `cond` holds: `ensure_input!(cond, "trace {i}: ...")`.
#[macro_export]
macro_rules! ensure_input {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::error::Error::input(format!($($msg)+)).into());
        }
    };
}

/// Returns early with [`Error::Input`]: `bail_input!("trace {i}: ...")`.
#[macro_export]
macro_rules! bail_input {
    ($($msg:tt)+) => {
        return Err($crate::error::Error::input(format!($($msg)+)).into())
    };
}

/// `anyhow::ensure!` for functions that return either `anyhow::Result` or [`Result`] (an
/// internal check: [`Error::Internal`] at an entry).
#[macro_export]
macro_rules! ensure_internal {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(anyhow::anyhow!($($msg)+).into());
        }
    };
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
