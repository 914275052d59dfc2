//! Progress bars: drawn on a terminal, silent in pipes and CI (indicatif hides itself when stderr
//! is not a TTY).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `len` steps labelled `what`.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}")
            .unwrap()
            .progress_chars("=> "),
    );
    pb.set_prefix(what.to_string());
    pb
}
