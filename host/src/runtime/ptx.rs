//! Single kernels of the embedded PTX as modules of their own, with a register cap: Rust cannot
//! emit `.maxnreg`, so the driver JIT-compiles a copy of the entry point with the directive added
//! after its parameter list (the pstm and srm drivers use it). The kernel must call no function,
//! since the copy carries no other function.

/// The directives every extracted module needs: `.version`, `.target`, `.address_size` and the
/// dynamic shared-memory symbol.
pub fn module_header(ptx: &str) -> String {
    let mut out = String::new();
    for l in ptx.lines() {
        let t = l.trim_start();
        if t.starts_with(".version") || t.starts_with(".target") || t.starts_with(".address_size")
            || t.starts_with(".extern .shared")
        {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// Lines of the end of the parameter list and of the body of the entry point `name` that
/// starts at `lines[start]`.
pub fn entry_span(lines: &[&str], start: usize, name: &str) -> Result<(usize, usize), String> {
    let close = (start..lines.len()).find(|&k| lines[k] == ")").ok_or_else(|| format!("PTX of `{name}` has no parameter list end"))?;
    let end = (close..lines.len()).find(|&k| lines[k] == "}").ok_or_else(|| format!("PTX of `{name}` has no end"))?;
    Ok((close, end))
}

/// Appends lines `start..=end` (the entry point `name`, parameter list ending at `close`) to
/// `out`, with `.maxnreg max_regs` after the parameter list.
pub fn push_capped(lines: &[&str], start: usize, (close, end): (usize, usize), name: &str, max_regs: u32, out: &mut String)
    -> Result<(), String> {
    for (k, l) in lines.iter().enumerate().take(end + 1).skip(start) {
        if l.trim_start().starts_with("call") {
            return Err(format!("PTX kernel `{name}` calls a function; it cannot be moved to its own module"));
        }
        out.push_str(l);
        out.push('\n');
        if k == close {
            out.push_str(&format!(".maxnreg {max_regs}\n"));
        }
    }
    Ok(())
}
