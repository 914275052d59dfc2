//! Register caps per kernel (`.maxnreg`), declared once, and the one PTX edit that applies them.
//!
//! rustc's NVPTX backend cannot emit `.maxnreg`, so a capped kernel is moved out of the PTX into a
//! module of its own with the directive added after its parameter list: by build.rs for the sm_90
//! cluster kernels (their module is built once), by the runtime (`runtime::ptx`) for the others
//! (JIT-compiled once per context). Both read [`CAPS`] and edit with [`move_entries`]. Caps that are
//! tuning choices of a run rather than properties of a kernel (the pstm `GpuTuning::max_regs`, the
//! NLBF C-scan variants) are passed to the runtime by the caller instead.
//!
//! Also the build's check that no kernel calls a function ([`entry_calls`]): a panic path.

use crate::srm::CLUSTER_MAX_REGS;

/// (kernel, registers per thread) of every kernel that is always run with a cap.
pub const CAPS: &[(&str, u32)] = &[
    // 448 threads per CTA in 16-CTA clusters (`srm::CLUSTER_MAX_REGS` says why).
    ("sm90_srm_step_cluster", CLUSTER_MAX_REGS),
    ("sm90_srm_step_clusterd", CLUSTER_MAX_REGS),
    // 56 x 384 threads lets three blocks share an SM (66 registers unconstrained: two); ptxas
    // sm_90 needs no spills at 56 (48: 68 bytes).
    ("srm_step_paperq", 56),
    // 40 x 256 threads: six blocks (48 warps) per SM instead of four at its 60 unconstrained
    // registers; ptxas sm_90 spills 76 bytes, reloaded in the node phase (13 local loads per batch
    // of 4 traces, none in the read loop). ktm-table2-4096 on one H200
    // (same run): 170.8 ms at 40, 179.3 ms unconstrained, 193.1 ms at 48 (five blocks).
    ("ktm_mig_static8_bare2", 40),
];

/// The cap of `kernel` in [`CAPS`], if it has one.
pub const fn cap(kernel: &str) -> Option<u32> {
    let mut i = 0;
    while i < CAPS.len() {
        if str_eq(CAPS[i].0, kernel) {
            return Some(CAPS[i].1);
        }
        i += 1;
    }
    None
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Entry points moved out of a PTX module by [`move_entries`].
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Debug, Default)]
pub struct Moved {
    /// The moved entry points, each followed by a blank line, `.maxnreg N` after the parameter
    /// list of those given a cap. No module header: the caller writes the one its module needs.
    pub entries: std::string::String,
    /// The module without them.
    pub rest: std::string::String,
    /// How many were moved.
    pub count: usize,
}

/// Moves every entry point for which `pick(name)` is `Some(cap)` out of `ptx`, with `.maxnreg cap`
/// added where `cap` is `Some`. A moved kernel must call no function (its new module carries
/// none): an error names the first that does.
#[cfg(not(target_arch = "nvptx64"))]
pub fn move_entries(ptx: &str, pick: impl Fn(&str) -> Option<Option<u32>>) -> Result<Moved, std::string::String> {
    use std::format;
    let lines: std::vec::Vec<&str> = ptx.lines().collect();
    let mut out = Moved::default();
    let mut k = 0;
    while k < lines.len() {
        let l = lines[k];
        let name = l.strip_prefix(".visible .entry ").map(|r| r.trim_end_matches('('));
        let Some((name, cap)) = name.and_then(|n| pick(n).map(|c| (n, c))) else {
            out.rest.push_str(l);
            out.rest.push('\n');
            k += 1;
            continue;
        };
        let end = body_end(&lines, k).ok_or_else(|| format!("PTX of `{name}` has no end"))?;
        let mut params_closed = false;
        for body in &lines[k..=end] {
            if body.trim_start().starts_with("call") {
                return Err(format!("PTX kernel `{name}` calls a function; it cannot be moved to a module of its own"));
            }
            out.entries.push_str(body);
            out.entries.push('\n');
            if !params_closed && *body == ")" {
                params_closed = true;
                if let Some(c) = cap {
                    out.entries.push_str(&format!(".maxnreg {c}\n"));
                }
            }
        }
        out.entries.push('\n');
        out.count += 1;
        k = end + 1;
    }
    Ok(out)
}

/// The line where the body of the entry point or function declared at line `k` ends: where its
/// braces balance (inline `asm!` may open blocks of its own).
#[cfg(not(target_arch = "nvptx64"))]
fn body_end(lines: &[&str], k: usize) -> Option<usize> {
    let mut depth = 0i32;
    let mut opened = false;
    (k..lines.len()).find(|&j| {
        let code = lines[j].split("//").next().unwrap_or("");
        depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
        opened |= depth > 0;
        opened && depth == 0
    })
}

/// The function a PTX `call` line calls (`call.uni name, (...);`, `call (ret), name, (...);`).
#[cfg(not(target_arch = "nvptx64"))]
fn callee(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("call")?;
    let rest = rest.strip_prefix(".uni").unwrap_or(rest).trim_start();
    // A return value comes first, in parentheses.
    let rest = match rest.strip_prefix('(') {
        Some(r) => r.split_once(')')?.1.trim_start().strip_prefix(',')?.trim_start(),
        None => rest,
    };
    let name = rest.split(|c: char| c == ',' || c == ';' || c.is_whitespace()).next()?;
    (!name.is_empty()).then_some(name)
}

/// Every entry point of `ptx` that calls a function, with the functions it calls (in the order of
/// their first call). Kernels must call none: what a kernel can call after fat LTO is a
/// `core::panicking` function (a `trap` that kills the CUDA context: a division by a divisor not
/// known to be non-zero, a bounds-checked index), and a kernel with a call cannot be moved into a
/// module of its own ([`move_entries`]). build.rs fails the build on any.
#[cfg(not(target_arch = "nvptx64"))]
pub fn entry_calls(ptx: &str) -> std::vec::Vec<(std::string::String, std::vec::Vec<std::string::String>)> {
    use std::string::ToString;
    let lines: std::vec::Vec<&str> = ptx.lines().collect();
    let mut out = std::vec::Vec::new();
    let mut k = 0;
    while k < lines.len() {
        let Some(name) = lines[k].strip_prefix(".visible .entry ").map(|r| r.trim_end_matches('(')) else {
            k += 1;
            continue;
        };
        let end = body_end(&lines, k).unwrap_or(lines.len() - 1);
        let mut called: std::vec::Vec<std::string::String> = std::vec::Vec::new();
        for l in &lines[k..=end] {
            if let Some(c) = callee(l.split("//").next().unwrap_or("")) {
                if !called.iter().any(|x| x == c) {
                    called.push(c.to_string());
                }
            }
        }
        if !called.is_empty() {
            out.push((name.to_string(), called));
        }
        k = end + 1;
    }
    out
}

/// A readable form of a Rust (v0) symbol, `_RNvNtCs..._4core9panicking18panic_bounds_check` ->
/// `core::panicking::panic_bounds_check`: the longest tail of length-prefixed identifiers. Other
/// names come back as they are.
#[cfg(not(target_arch = "nvptx64"))]
pub fn readable_symbol(sym: &str) -> std::string::String {
    let b = sym.as_bytes();
    let parse = |mut i: usize| -> Option<std::vec::Vec<&str>> {
        let mut parts = std::vec::Vec::new();
        while i < b.len() {
            let d = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let n: usize = sym.get(i..i + d)?.parse().ok()?;
            let id = sym.get(i + d..i + d + n)?;
            if n == 0 || !id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                return None;
            }
            parts.push(id);
            i += d + n;
        }
        (parts.len() > 1).then_some(parts)
    };
    (0..b.len())
        .filter(|&i| b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()))
        .find_map(|i| parse(i))
        .map_or_else(|| std::string::String::from(sym), |p| p.join("::"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = ".version 8.0\n.target sm_70\n.address_size 64\n\n\
        .visible .entry a(\n\t.param .u32 a_param_0\n)\n{\n\t{ .reg .pred p; }\n\tret;\n}\n\n\
        .visible .entry b(\n\t.param .u32 b_param_0\n)\n{\n\tret;\n}\n\n\
        .visible .entry c(\n)\n{\n\tcall f;\n}\n";

    #[test]
    fn caps_are_found_by_name() {
        assert_eq!(cap("sm90_srm_step_cluster"), Some(CLUSTER_MAX_REGS));
        assert_eq!(cap("srm_step_paperq"), Some(56));
        assert_eq!(cap("saxpy"), None);
        let mut names: std::vec::Vec<_> = CAPS.iter().map(|c| c.0).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), CAPS.len(), "a kernel listed twice");
        assert!(CAPS.iter().all(|c| (32..=255).contains(&c.1)));
    }

    #[test]
    fn moves_the_picked_entries_with_their_caps() {
        let m = move_entries(PTX, |n| (n == "a").then_some(Some(64))).unwrap();
        assert_eq!(m.count, 1);
        assert_eq!(m.entries, ".visible .entry a(\n\t.param .u32 a_param_0\n)\n.maxnreg 64\n{\n\t{ .reg .pred p; }\n\tret;\n}\n\n");
        assert!(!m.rest.contains("entry a(") && m.rest.contains("entry b(") && m.rest.starts_with(".version 8.0\n"));
        let uncapped = move_entries(PTX, |n| (n == "b").then_some(None)).unwrap();
        assert!(!uncapped.entries.contains(".maxnreg") && uncapped.count == 1);
        let e = move_entries(PTX, |n| (n == "c").then_some(Some(64))).unwrap_err();
        assert!(e.contains("`c` calls a function"), "{e}");
        assert_eq!(move_entries(PTX, |_| None).unwrap().rest, PTX);
    }

    #[test]
    fn finds_the_entry_points_that_call_functions() {
        assert_eq!(entry_calls(PTX), [("c".into(), std::vec!["f".into()])]);
        let ptx = ".visible .entry k(\n)\n{\n\t{ // callseq 0, 0\n\tcall.uni _RNvNtCsbSE61zFgCyu_4core9panicking18panic_bounds_check, (param0);\n\t}\n\
            \tcall.uni (retval0), g, (param0);\n\tcall.uni _RNvNtCsbSE61zFgCyu_4core9panicking18panic_bounds_check, (param0);\n}\n\
            .func _RNvNtCsbSE61zFgCyu_4core9panicking18panic_bounds_check(\n\t.param .b64 p\n)\n{\n\tcall.uni panic_fmt, ();\n}\n\
            .visible .entry ok(\n)\n{\n\t// call.uni commented, ();\n\tret;\n}\n";
        let calls = entry_calls(ptx);
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(calls[0].0, "k");
        assert_eq!(calls[0].1, ["_RNvNtCsbSE61zFgCyu_4core9panicking18panic_bounds_check", "g"]);
        assert!(entry_calls(&ptx.replace("call", "mov")).is_empty());
    }

    #[test]
    fn symbols_are_made_readable() {
        assert_eq!(readable_symbol("_RNvNtCsbSE61zFgCyu_4core9panicking18panic_bounds_check"), "core::panicking::panic_bounds_check");
        assert_eq!(readable_symbol("_RNvNtNtCsbSE61zFgCyu_4core9panicking11panic_const23panic_const_div_by_zero"),
            "core::panicking::panic_const::panic_const_div_by_zero");
        assert_eq!(readable_symbol("local_fn"), "local_fn");
        assert_eq!(readable_symbol("__nv_sinf"), "__nv_sinf");
    }
}
